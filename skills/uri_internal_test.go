package skills

import "testing"

// TestNormalizeSkillURI: the normal form decodes what RFC 3986 lets a URI spell otherwise, and
// what could take the server out of the directory is refused.
func TestNormalizeSkillURI(t *testing.T) {
	for uri, want := range map[string]string{
		"skill://pdf-processing/SKILL.md":         "skill://pdf-processing/SKILL.md",
		"skill://pdf-processing/%46ORMS%2emd":     "skill://pdf-processing/FORMS.md",
		"skill://pdf-processing/a%20b%c3%a9":      "skill://pdf-processing/a%20b%C3%A9",
		"file:///skills/pdf/SKILL.md":             "file:///skills/pdf/SKILL.md",
		"skill://pdf-processing/...":              "skill://pdf-processing/...",
		"skill://pdf-processing/..a/.b/%2e%2e%2e": "skill://pdf-processing/..a/.b/...",
	} {
		if got, problem := normalizeSkillURI(uri); got != want || problem != "" {
			t.Errorf("normalizeSkillURI(%q) = %q, %q; want %q", uri, got, problem, want)
		}
	}
	for _, uri := range []string{
		"skill://pdf-processing/../billing/SKILL.md", "skill://../billing/SKILL.md", "skill://%2e%2e/x",
		"skill://pdf-processing/.", "skill://pdf-processing/%2E", "skill://pdf-processing/a%2fb",
		"skill://pdf-processing/a%5Cb", "skill://pdf-processing/a\\b", "skill://pdf-processing/%252e%252e/x",
		"skill://pdf-processing//x", "skill://pdf-processing/x%", "skill://pdf-processing/x%2", "skill://pdf-processing/x%zz",
		"skill://pdf-processing/x%00", "skill://pdf-processing/x?../../y", "skill://pdf-processing/x#/../y",
	} {
		if got, problem := normalizeSkillURI(uri); problem == "" {
			t.Errorf("normalizeSkillURI(%q) = %q, want a refusal", uri, got)
		}
	}
}
