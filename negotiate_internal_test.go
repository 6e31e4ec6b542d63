package mcpclient

import (
	"encoding/json"
	"testing"
)

// An older server's answer to server/discover is recognized without decoding it, and whatever is
// recognized so would decode to no stateless revision the client speaks.
func TestListsNoStatelessRevision(t *testing.T) {
	for _, tc := range []struct {
		answer string
		sure   bool
	}{
		{`{}`, true},
		{`{"supportedVersions":null}`, true},
		{`{"supportedVersions":[]}`, true},
		{`{"resultType":"complete","supportedVersions":["2025-11-25","2025-06-18"],"capabilities":{"tools":{}}}`, true},
		{`{"supportedVersions":["2099-01-01"]}`, true},
		{`{"supportedVersions":["2026-07-28"]}`, false},
		{`{"supportedVersions":["2025-11-25","2026-07-28"]}`, false},
		{`{"supportedVersions":["2026-07-28"],"supportedVersions":["2025-11-25"]}`, true}, // the last counts
		{`{"supportedVersions":["2025-11-25"],"supportedVersions":["2026-07-28"]}`, false},
		{`{"SupportedVersions":["2026-07-28"],"supportedVersions":["2025-11-25"]}`, false}, // a decoder matches keys without case
		{`{"supportedVersions":["2026\u002d07-28"]}`, false},
		{`{"support\u0065dVersions":["2026-07-28"]}`, false},
		{`{"supportedVersions":[2026]}`, false},
		{`{"supportedVersions":"2026-07-28"}`, false},
		{`[]`, false},
		{`{"supportedVersions":[`, false},
	} {
		if got := listsNoStatelessRevision([]byte(tc.answer)); got != tc.sure {
			t.Errorf("listsNoStatelessRevision(%s) = %v, want %v", tc.answer, got, tc.sure)
		}
		checkNoStatelessRevision(t, []byte(tc.answer))
	}
}

func FuzzListsNoStatelessRevision(f *testing.F) {
	for _, seed := range []string{`{}`, `{"supportedVersions":["2025-11-25"]}`, `{"supportedVersions":["2026-07-28"]}`,
		`{"supportedVersions":["2026-07-28"],"supportedversions":["x"]}`, `{"supportedVersions":["\u0032026-07-28"]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(checkNoStatelessRevision)
}

// checkNoStatelessRevision fails when listsNoStatelessRevision is sure of an answer that decodes
// to a stateless revision the client speaks.
func checkNoStatelessRevision(t *testing.T, raw []byte) {
	t.Helper()
	if !listsNoStatelessRevision(raw) {
		return
	}
	var res discoverResult
	if json.Unmarshal(raw, &res) != nil {
		return // an older server's answer either way
	}
	if v := bestVersion(res.SupportedVersions, "", true); v != "" {
		t.Fatalf("listsNoStatelessRevision(%s) is sure, but it decodes to %q", raw, v)
	}
}
