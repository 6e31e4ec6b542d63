package skills_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/skills"
)

const (
	pdfSkill = "skill://pdf-processing/SKILL.md"
	pdfForms = "skill://pdf-processing/references/FORMS.md"
	pdfLogo  = "skill://pdf-processing/assets/logo.png"
	pdfMD    = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nmetadata:\n  version: 2\n  tags: [pdf, forms]\n---\n\nSkill body.\n"
	pdfFM    = `{"name":"pdf-processing","description":"Extract, fill, and assemble PDF documents","metadata":{"tags":["pdf","forms"],"version":2}}`
	formsMD  = "Supporting content.\n"
)

var logoPNG = []byte{0x89, 'P', 'N', 'G', 0, 1, 2, 0xff}

// fileOf is the manifest entry of a file holding data.
func fileOf(uri string, data []byte) skills.File {
	sum := sha256.Sum256(data)
	return skills.File{URI: uri, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}
}

// pdfEntry is the entry of the skill pdf-processing, whose files pdfFiles serves.
func pdfEntry() *skills.Skill {
	return &skills.Skill{
		URI:         pdfSkill,
		Frontmatter: json.RawMessage(pdfFM),
		Files: []skills.File{
			fileOf(pdfSkill, []byte(pdfMD)),
			fileOf(pdfForms, []byte(formsMD)),
			fileOf(pdfLogo, logoPNG),
		},
	}
}

func pdfFiles() map[string]mcpclient.ResourceContents {
	return map[string]mcpclient.ResourceContents{
		pdfSkill: {MIMEType: "text/markdown", Text: pdfMD},
		pdfForms: {MIMEType: "text/markdown", Text: formsMD},
		pdfLogo:  {MIMEType: "image/png", Blob: base64.StdEncoding.EncodeToString(logoPNG)},
	}
}

// skillServer serves skills with mcptest: the entries, two a page, by skills/list and
// skills/get, and the files as resources, counting the reads of each.
type skillServer struct {
	*mcptest.Server
	mu      sync.Mutex
	reads   []string // the URIs read, in order
	methods map[string]int
}

func newSkillServer(t *testing.T, entries []*skills.Skill, files map[string]mcpclient.ResourceContents, opts ...mcptest.Option) *skillServer {
	t.Helper()
	s := &skillServer{methods: map[string]int{}}
	count := func(method string) {
		s.mu.Lock()
		s.methods[method]++
		s.mu.Unlock()
	}
	opts = append([]mcptest.Option{
		mcptest.WithExtension(skills.Extension, nil),
		mcptest.WithMethod("skills/list", func(_ context.Context, params json.RawMessage) (any, error) {
			count("skills/list")
			var p struct{ Cursor string }
			json.Unmarshal(params, &p)
			start, _ := strconv.Atoi(p.Cursor)
			end := min(start+2, len(entries))
			res := map[string]any{"skills": entries[start:end]}
			if end < len(entries) {
				res["nextCursor"] = strconv.Itoa(end)
			}
			return res, nil
		}),
		mcptest.WithMethod("skills/get", func(_ context.Context, params json.RawMessage) (any, error) {
			count("skills/get")
			var p struct{ URI string }
			json.Unmarshal(params, &p)
			for _, e := range entries {
				if e.URI == p.URI {
					return map[string]any{"skill": e}, nil
				}
			}
			if p.URI == "skill://impostor/SKILL.md" {
				return map[string]any{"skill": entries[0]}, nil
			}
			return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "unknown skill"}
		}),
	}, opts...)
	for uri, rc := range files {
		opts = append(opts, mcptest.WithResource(mcpclient.Resource{URI: uri, Name: uri}, func(context.Context, string) ([]mcpclient.ResourceContents, error) {
			s.mu.Lock()
			s.reads = append(s.reads, uri)
			s.mu.Unlock()
			rc.URI = uri
			return []mcpclient.ResourceContents{rc}, nil
		}))
	}
	s.Server = mcptest.NewTestServer(t, opts...)
	return s
}

// read returns the URIs read so far, in order.
func (s *skillServer) read() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reads)
}

func (s *skillServer) calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methods[method]
}

// refusal returns the *VerificationError of err, failing the test unless err is the
// *Error of a refused skill file.
func refusal(t *testing.T, err error) *skills.VerificationError {
	t.Helper()
	var sve *skills.VerificationError
	if !errors.As(err, &sve) || !errors.Is(err, skills.ErrVerification) || mcpclient.CodeOf(err) != mcpclient.CodeSkillVerification {
		t.Fatalf("error %v, want a *VerificationError with CodeSkillVerification", err)
	}
	return sve
}

func TestSkillsListPaginatesAndGetReadsNoFile(t *testing.T) {
	t.Parallel()
	var entries []*skills.Skill
	for _, name := range []string{"alpha", "beta", "gamma", "delta", "pdf-processing"} {
		e := pdfEntry()
		if name != "pdf-processing" {
			e.URI = "skill://" + name + "/SKILL.md"
			e.Frontmatter = json.RawMessage(`{"name":"` + name + `","description":"the ` + name + ` skill"}`)
			e.Files = []skills.File{fileOf(e.URI, []byte("x"))}
		}
		entries = append(entries, e)
	}
	entries[3].Files, entries[3].Dynamic = nil, true
	srv := newSkillServer(t, entries, pdfFiles())
	c := mcptest.NewClient(t, srv, mcpclient.WithExtension(skills.Extension, nil))
	ctx := testCtx(t)

	if decl, ok := skills.CapabilitiesOf(c.ServerCapabilities()); !ok || decl.DirectoryRead {
		t.Errorf("server declaration %+v, %v: want the extension without directoryRead", decl, ok)
	}
	first, err := skills.ListPage(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Skills) != 2 || first.NextCursor != "2" {
		t.Errorf("first page: %d skills, cursor %q", len(first.Skills), first.NextCursor)
	}
	all, err := mcpclient.Collect(skills.List(ctx, c))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name())
	}
	if want := []string{"alpha", "beta", "gamma", "delta", "pdf-processing"}; !slices.Equal(names, want) {
		t.Errorf("listed %v, want %v", names, want)
	}
	if n := srv.calls("skills/list"); n != 4 {
		t.Errorf("%d skills/list requests, want 4 (one page, then three)", n)
	}
	pdf := all[4]
	if pdf.URI != pdfSkill || pdf.Description() != "Extract, fill, and assemble PDF documents" || len(pdf.Files) != 3 || pdf.Dynamic {
		t.Errorf("listed entry %+v", pdf)
	}
	if !all[3].Dynamic || all[3].Files != nil {
		t.Errorf("dynamic entry %+v", all[3])
	}

	got, err := skills.Get(ctx, c, pdfSkill)
	if err != nil {
		t.Fatal(err)
	}
	if got.URI != pdfSkill || !slices.Equal(got.Files, pdf.Files) || string(got.Frontmatter) != pdfFM {
		t.Errorf("Get: %+v", got)
	}
	if _, err := skills.Get(ctx, c, "skill://nonexistent/SKILL.md"); rpcError(t, err).Code != mcpclient.RPCInvalidParams {
		t.Errorf("Get of an unknown skill: %v", err)
	}
	if _, err := skills.Get(ctx, c, "skill://impostor/SKILL.md"); mcpclient.CodeOf(err) != mcpclient.CodeProtocol {
		t.Errorf("Get answered with another skill: %v, want CodeProtocol", err)
	}
	if reads := srv.read(); len(reads) != 0 {
		t.Errorf("connecting, listing and getting read %v", reads)
	}
}

// TestSkillFilesAreReadWhenAskedAndVerified: Load reads SKILL.md alone, ReadFile the one file
// asked for, Files one file per step of the loop; each comes back verified.
func TestSkillFilesAreReadWhenAskedAndVerified(t *testing.T) {
	t.Parallel()
	srv := newSkillServer(t, []*skills.Skill{pdfEntry()}, pdfFiles())
	c := mcptest.NewClient(t, srv)
	ctx := testCtx(t)
	skill, err := skills.Get(ctx, c, pdfSkill)
	if err != nil {
		t.Fatal(err)
	}

	md, err := skills.Load(ctx, c, skill)
	if err != nil {
		t.Fatal(err)
	}
	if string(md.Data) != pdfMD || !md.Verified || md.MIMEType != "text/markdown" || md.URI != pdfSkill {
		t.Errorf("Load: %+v", md)
	}
	if reads := srv.read(); !slices.Equal(reads, []string{pdfSkill}) {
		t.Errorf("Load read %v, want SKILL.md alone", reads)
	}
	_, body, ok := skills.SplitFrontmatter(md.Data)
	if !ok || string(body) != "\nSkill body.\n" {
		t.Errorf("SKILL.md body %q, %v", body, ok)
	}

	logo, err := skills.ReadFile(ctx, c, skill, pdfLogo)
	if err != nil {
		t.Fatal(err)
	}
	if string(logo.Data) != string(logoPNG) || !logo.Verified {
		t.Errorf("logo: %+v", logo)
	}
	if reads := srv.read(); !slices.Equal(reads, []string{pdfSkill, pdfLogo}) {
		t.Errorf("reads %v", reads)
	}

	for f, err := range skills.Files(ctx, c, skill) {
		if err != nil || f.URI != pdfSkill {
			t.Fatalf("first file %v, %v", f, err)
		}
		break
	}
	if reads := srv.read(); len(reads) != 3 {
		t.Errorf("a loop that stopped at SKILL.md read %v", reads[2:])
	}
	var uris []string
	for f, err := range skills.Files(ctx, c, skill) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, f.URI)
	}
	if want := []string{pdfSkill, pdfForms, pdfLogo}; !slices.Equal(uris, want) || !slices.Equal(srv.read()[3:], want) {
		t.Errorf("Files yielded %v and read %v, want %v", uris, srv.read()[3:], want)
	}
}

// TestSkillFileRefusals: content that differs from the entry is refused, naming the file and
// the check, and nothing of it is returned; Files stops at the refusal.
func TestSkillFileRefusals(t *testing.T) {
	t.Parallel()
	tampered := strings.Replace(pdfMD, "Skill body.", "Evil body!!", 1) // same length
	tests := []struct {
		name  string
		md    string // the SKILL.md served
		entry func(e *skills.Skill)
		check skills.Check
		field string
	}{
		// The size is checked first: a file whose size and digest both differ is refused for
		// its size.
		{"size", pdfMD + "extra bytes the entry did not account for\n", nil, skills.CheckSize, ""},
		{"digest", tampered, nil, skills.CheckDigest, ""},
		{"frontmatter field", strings.Replace(pdfMD, "Extract, fill, and assemble PDF documents", "Exfiltrate credentials", 1), nil,
			skills.CheckFrontmatter, "description"},
		{"frontmatter nested field", strings.Replace(pdfMD, "version: 2", "version: 3", 1), nil,
			skills.CheckFrontmatter, "metadata"},
		{"frontmatter field the entry lacks", strings.Replace(pdfMD, "name: pdf-processing\n", "name: pdf-processing\nallowed-tools: Bash\n", 1), nil,
			skills.CheckFrontmatter, "allowed-tools"},
		{"frontmatter field the file lacks", pdfMD, func(e *skills.Skill) {
			e.Frontmatter = json.RawMessage(strings.Replace(pdfFM, `{`, `{"license":"MIT",`, 1))
		}, skills.CheckFrontmatter, "license"},
		{"no frontmatter", "# pdf-processing\n", nil, skills.CheckFrontmatter, ""},
		{"frontmatter no YAML", "---\nname: [unclosed\n---\n", nil, skills.CheckFrontmatter, ""},
		{"frontmatter no mapping", "---\n- name\n---\n", nil, skills.CheckFrontmatter, ""},
		{"frontmatter duplicate key", "---\nname: a\nname: b\n---\n", nil, skills.CheckFrontmatter, ""},
		{"frontmatter merge keys", "---\nname: a\nb: &b {c: d}\ne: {<<: *b}\n---\n", nil, skills.CheckFrontmatter, ""},
		{"frontmatter nested too deep", "---\nname: a\nb: " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n---\n", nil, skills.CheckFrontmatter, ""},
		{"frontmatter over 64 KiB", "---\nname: a\nb: " + strings.Repeat("c", 64<<10) + "\n---\n", nil, skills.CheckFrontmatter, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			files := pdfFiles()
			files[pdfSkill] = mcpclient.ResourceContents{MIMEType: "text/markdown", Text: tt.md}
			entry := pdfEntry()
			if tt.check == skills.CheckFrontmatter {
				entry.Files[0] = fileOf(pdfSkill, []byte(tt.md)) // the manifest vouches for the bytes
			}
			if tt.entry != nil {
				tt.entry(entry)
			}
			srv := newSkillServer(t, []*skills.Skill{entry}, files)
			c := mcptest.NewClient(t, srv)
			ctx := testCtx(t)

			md, err := skills.Load(ctx, c, entry)
			if md != nil {
				t.Errorf("Load returned the refused content %q", md.Data)
			}
			sve := refusal(t, err)
			if sve.Check != tt.check || sve.Field != tt.field || sve.File != pdfSkill || sve.Skill != pdfSkill {
				t.Errorf("refusal %+v, want check %s, field %q", sve, tt.check, tt.field)
			}
			var e *mcpclient.Error
			if errors.As(err, &e); e.Request == nil || e.Request.Method() != "resources/read" {
				t.Errorf("the *Error names request %v, want the resources/read", e.Request)
			}
			t.Log(err)

			var yielded []string
			for f, err := range skills.Files(ctx, c, entry) {
				if err != nil {
					refusal(t, err)
					break
				}
				yielded = append(yielded, f.URI)
			}
			if len(yielded) != 0 {
				t.Errorf("Files yielded %v before the refusal", yielded)
			}
			if reads := srv.read(); !slices.Equal(reads, []string{pdfSkill, pdfSkill}) {
				t.Errorf("reads %v: want SKILL.md twice, and nothing after it was refused", reads)
			}
		})
	}

	t.Run("supporting file", func(t *testing.T) {
		t.Parallel()
		files := pdfFiles()
		files[pdfForms] = mcpclient.ResourceContents{Text: "Supporting content!\n"}
		files[pdfLogo] = mcpclient.ResourceContents{Blob: base64.StdEncoding.EncodeToString(logoPNG[1:])}
		srv := newSkillServer(t, []*skills.Skill{pdfEntry()}, files)
		c := mcptest.NewClient(t, srv)
		ctx := testCtx(t)
		_, err := skills.ReadFile(ctx, c, pdfEntry(), pdfForms)
		if sve := refusal(t, err); sve.Check != skills.CheckDigest || sve.File != pdfForms || sve.Want != pdfEntry().Files[1].Digest {
			t.Errorf("FORMS.md: %+v", sve)
		}
		_, err = skills.ReadFile(ctx, c, pdfEntry(), pdfLogo)
		if sve := refusal(t, err); sve.Check != skills.CheckSize || sve.Want != "8 bytes" || sve.Got != "7 bytes" {
			t.Errorf("logo: %+v", sve)
		}
		var got []string
		for f, err := range skills.Files(ctx, c, pdfEntry()) {
			if err != nil {
				if refusal(t, err).File != pdfForms {
					t.Errorf("Files refused %v", err)
				}
				break
			}
			got = append(got, f.URI)
		}
		if !slices.Equal(got, []string{pdfSkill}) || !slices.Equal(srv.read()[2:], []string{pdfSkill, pdfForms}) {
			t.Errorf("Files yielded %v and read %v: it must stop at the refused FORMS.md", got, srv.read()[2:])
		}
	})
}

// TestSkillFrontmatterComparesAsJSON: the frontmatter matches the entry as JSON values do,
// whatever the YAML spelling: quoting, block scalars, flow collections, aliases, numbers
// spelled otherwise, and a field that is null in one and absent in the other.
func TestSkillFrontmatterComparesAsJSON(t *testing.T) {
	t.Parallel()
	md := "\uFEFF---\r\nname: 'pdf-processing'\r\ndescription: >-\r\n  Extract, fill,\r\n  and assemble PDF documents\r\n" +
		"metadata: &m {tags: [pdf, \"forms\"], version: 2.0}\r\ncopy: *m\r\nlicense: ~\r\nbig: 12345678901234567890\r\n--- \r\nbody\r\n"
	entry := &skills.Skill{
		URI: pdfSkill,
		Frontmatter: json.RawMessage(`{"name":"pdf-processing","description":"Extract, fill, and assemble PDF documents",` +
			`"metadata":{"version":2,"tags":["pdf","forms"]},"copy":{"tags":["pdf","forms"],"version":2e0},"big":12345678901234567890}`),
		Files: []skills.File{fileOf(pdfSkill, []byte(md))},
	}
	srv := newSkillServer(t, nil, map[string]mcpclient.ResourceContents{pdfSkill: {Text: md}})
	c := mcptest.NewClient(t, srv)
	if _, err := skills.Load(testCtx(t), c, entry); err != nil {
		t.Fatal(err)
	}
	entry.Frontmatter = json.RawMessage(strings.Replace(string(entry.Frontmatter), "12345678901234567890", "12345678901234567891", 1))
	if sve := refusal(t, second(skills.Load(testCtx(t), c, entry))); sve.Field != "big" {
		t.Errorf("an integer beyond float64 that differs in its last digit: %+v", sve)
	}
}

func second[T any](_ T, err error) error { return err }

// TestSkillEntryRefusedBeforeAnyRead: a skill whose entry cannot vouch for its files, or that is
// beyond the client's limits, is refused without reading anything.
func TestSkillEntryRefusedBeforeAnyRead(t *testing.T) {
	t.Parallel()
	many := func(n int) func(e *skills.Skill) {
		return func(e *skills.Skill) {
			for i := len(e.Files); i < n; i++ {
				e.Files = append(e.Files, fileOf(fmt.Sprintf("skill://pdf-processing/f%d", i), nil))
			}
		}
	}
	tests := []struct {
		name   string
		opts   []skills.Option
		entry  func(e *skills.Skill)
		uri    string // the file read; "" for SKILL.md
		check  skills.Check
		target error
		// fileOnly: the entry is sound and the refusal is of the one file read, which
		// Files, reading the files the manifest lists, does not meet.
		fileOnly bool
	}{
		{"dynamic", nil, func(e *skills.Skill) { e.Files, e.Dynamic = nil, true }, "", skills.CheckDynamic, skills.ErrUnverifiable, false},
		{"files over the default limit", nil, many(skills.DefaultMaxFiles + 1), "", skills.CheckLimits, nil, false},
		{"bytes over the default limit", nil, func(e *skills.Skill) { e.Files[2].Size = skills.DefaultMaxBytes }, "", skills.CheckLimits, nil, false},
		{"a size that would wrap the sum", nil, func(e *skills.Skill) { e.Files[2].Size = math.MaxInt64 }, "", skills.CheckLimits, nil, false},
		{"files over WithLimits", []skills.Option{skills.WithLimits(2, 0)}, nil, "", skills.CheckLimits, nil, false},
		{"bytes over WithLimits", []skills.Option{skills.WithLimits(0, int64(len(pdfMD)))}, nil, "", skills.CheckLimits, nil, false},
		{"no manifest", nil, func(e *skills.Skill) { e.Files = nil }, "", skills.CheckManifest, nil, false},
		{"no SKILL.md in the manifest", nil, func(e *skills.Skill) { e.Files = e.Files[1:] }, pdfForms, skills.CheckManifest, nil, false},
		{"a file listed twice", nil, func(e *skills.Skill) { e.Files = append(e.Files, e.Files[1]) }, "", skills.CheckManifest, nil, false},
		{"a file outside the skill", nil, func(e *skills.Skill) { e.Files[1].URI = "skill://other/FORMS.md" }, "", skills.CheckManifest, nil, false},
		{"a digest in capitals", nil, func(e *skills.Skill) { e.Files[1].Digest = strings.ToUpper(e.Files[1].Digest) }, "", skills.CheckManifest, nil, false},
		{"a digest of another hash", nil, func(e *skills.Skill) { e.Files[1].Digest = "md5:" + e.Files[1].Digest[7:] }, "", skills.CheckManifest, nil, false},
		{"a negative size", nil, func(e *skills.Skill) { e.Files[1].Size = -1 }, "", skills.CheckManifest, nil, false},
		{"a file not listed", nil, nil, "skill://pdf-processing/scripts/run.sh", skills.CheckManifest, nil, true},
		{"frontmatter no object", nil, func(e *skills.Skill) { e.Frontmatter = json.RawMessage(`["name"]`) }, "", skills.CheckManifest, nil, false},
		{"no SKILL.md URI", nil, func(e *skills.Skill) { e.URI = "skill://pdf-processing/README.md" }, pdfForms, skills.CheckManifest, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newSkillServer(t, nil, pdfFiles())
			c := mcptest.NewClient(t, srv)
			ctx := testCtx(t)
			entry := pdfEntry()
			if tt.entry != nil {
				tt.entry(entry)
			}
			uri := tt.uri
			if uri == "" {
				uri = entry.URI
			}
			_, err := skills.ReadFile(ctx, c, entry, uri, tt.opts...)
			sve := refusal(t, err)
			if sve.Check != tt.check {
				t.Errorf("refusal %v, want the %s check", err, tt.check)
			}
			if tt.target != nil && !errors.Is(err, tt.target) {
				t.Errorf("%v is not %v", err, tt.target)
			}
			if tt.check != skills.CheckDynamic && errors.Is(err, skills.ErrUnverifiable) {
				t.Errorf("%v is ErrUnverifiable", err)
			}
			var e *mcpclient.Error
			if errors.As(err, &e); e.Request != nil {
				t.Errorf("the refusal names request %v: nothing should have been sent", e.Request.ID())
			}
			if !tt.fileOnly {
				for _, err := range skills.Files(ctx, c, entry, tt.opts...) {
					if sve := refusal(t, err); sve.Check != tt.check {
						t.Errorf("Files: %v", err)
					}
				}
			}
			if reads := srv.read(); len(reads) != 0 {
				t.Errorf("read %v", reads)
			}
			t.Log(err)
		})
	}

	t.Run("negative limits", func(t *testing.T) {
		t.Parallel()
		srv := newSkillServer(t, nil, pdfFiles())
		c := mcptest.NewClient(t, srv)
		for _, limits := range []skills.Option{skills.WithLimits(-1, 0), skills.WithLimits(0, -1)} {
			if _, err := skills.Load(testCtx(t), c, pdfEntry(), limits); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
				t.Errorf("Load with a negative limit: %v", err)
			}
			for _, err := range skills.Files(testCtx(t), c, pdfEntry(), limits) {
				if mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
					t.Errorf("Files with a negative limit: %v", err)
				}
			}
		}
		if reads := srv.read(); len(reads) != 0 {
			t.Errorf("read %v", reads)
		}
	})
	t.Run("nil skill", func(t *testing.T) {
		t.Parallel()
		c := mcptest.NewClient(t, mcptest.NewTestServer(t))
		if _, err := skills.Load(testCtx(t), c, nil); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
			t.Errorf("Load(nil): %v", err)
		}
	})
}

// TestSkillDynamicReadUnverified: with WithUnverifiableFiles the files of a skill without a
// manifest are returned, not verified, within the skill's directory; its SKILL.md's frontmatter
// is still compared with the entry's.
func TestSkillDynamicReadUnverified(t *testing.T) {
	t.Parallel()
	files := pdfFiles()
	files["skill://other/SKILL.md"] = mcpclient.ResourceContents{Text: pdfMD}
	srv := newSkillServer(t, nil, files)
	c := mcptest.NewClient(t, srv)
	ctx := testCtx(t)
	entry := pdfEntry()
	entry.Files, entry.Dynamic = nil, true

	md, err := skills.Load(ctx, c, entry, skills.WithUnverifiableFiles())
	if err != nil || md.Verified || string(md.Data) != pdfMD {
		t.Fatalf("Load: %+v, %v; want SKILL.md, not verified", md, err)
	}
	forms, err := skills.ReadFile(ctx, c, entry, pdfForms, skills.WithUnverifiableFiles())
	if err != nil || forms.Verified || string(forms.Data) != formsMD {
		t.Fatalf("ReadFile: %+v, %v", forms, err)
	}
	if _, err := skills.ReadFile(ctx, c, entry, "skill://other/SKILL.md", skills.WithUnverifiableFiles()); refusal(t, err).Check != skills.CheckManifest {
		t.Errorf("a file outside the skill: %v", err)
	}
	var n int
	for f, err := range skills.Files(ctx, c, entry, skills.WithUnverifiableFiles()) {
		if err != nil || f.URI != pdfSkill {
			t.Fatalf("Files: %v, %v", f, err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("Files of a dynamic skill yielded %d files, want SKILL.md alone", n)
	}
	entry.Frontmatter = json.RawMessage(`{"name":"pdf-processing","description":"something else"}`)
	if _, err := skills.Load(ctx, c, entry, skills.WithUnverifiableFiles()); refusal(t, err).Field != "description" {
		t.Errorf("a dynamic skill whose frontmatter differs: %v", err)
	}
	if reads := srv.read(); !slices.Equal(reads, []string{pdfSkill, pdfForms, pdfSkill, pdfSkill}) {
		t.Errorf("reads %v", reads)
	}
}

func TestReadDirectory(t *testing.T) {
	t.Parallel()
	children := []*mcpclient.Resource{
		{URI: pdfSkill, Name: "SKILL.md", MIMEType: "text/markdown"},
		{URI: "skill://pdf-processing/references", Name: "references", MIMEType: skills.MIMETypeDirectory},
		{URI: "skill://pdf-processing/assets", Name: "assets", MIMEType: skills.MIMETypeDirectory},
	}
	var mu sync.Mutex
	reads := 0
	read := mcptest.WithMethod("resources/directory/read", func(_ context.Context, params json.RawMessage) (any, error) {
		mu.Lock()
		reads++
		mu.Unlock()
		var p struct{ URI, Cursor string }
		json.Unmarshal(params, &p)
		if p.URI != "skill://pdf-processing" {
			return nil, &mcpclient.RPCError{Code: mcpclient.RPCInvalidParams, Message: "not a directory"}
		}
		if p.Cursor == "" {
			return skills.ReadDirectoryResult{Resources: children[:2], NextCursor: "2"}, nil
		}
		return skills.ReadDirectoryResult{Resources: children[2:]}, nil
	})

	t.Run("declared", func(t *testing.T) {
		c := mcptest.NewClient(t, mcptest.NewTestServer(t, read, mcptest.WithExtension(skills.Extension, skills.Capabilities{DirectoryRead: true})))
		ctx := testCtx(t)
		got, err := mcpclient.Collect(skills.ReadDirectory(ctx, c, "skill://pdf-processing"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[1].MIMEType != skills.MIMETypeDirectory || got[2].URI != "skill://pdf-processing/assets" {
			t.Errorf("children %+v", got)
		}
		if _, err := skills.ReadDirectoryPage(ctx, c, pdfSkill, ""); rpcError(t, err).Code != mcpclient.RPCInvalidParams {
			t.Errorf("a file read as a directory: %v", err)
		}
	})
	t.Run("not declared", func(t *testing.T) {
		for _, decl := range []mcptest.Option{nil, mcptest.WithExtension(skills.Extension, nil)} {
			mu.Lock()
			before := reads
			mu.Unlock()
			c := mcptest.NewClient(t, mcptest.NewTestServer(t, read, decl))
			_, err := skills.ReadDirectoryPage(testCtx(t), c, "skill://pdf-processing", "")
			if !errors.Is(err, skills.ErrDirectoryReadNotDeclared) || mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
				t.Errorf("ReadDirectoryPage: %v, want ErrDirectoryReadNotDeclared", err)
			}
			if _, err := mcpclient.Collect(skills.ReadDirectory(testCtx(t), c, "skill://pdf-processing")); !errors.Is(err, skills.ErrDirectoryReadNotDeclared) {
				t.Errorf("ReadDirectory: %v", err)
			}
			mu.Lock()
			if reads != before {
				t.Errorf("%d requests sent", reads-before)
			}
			mu.Unlock()
		}
	})
}

// TestSkillEntryJSON: an entry decodes and encodes in each of its forms, and resources that are
// no manifest leave the entry without one rather than failing the listing.
func TestSkillEntryJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, out     string
		files       int
		dynamic     bool
		noManifest  bool
		name, descr string
	}{
		{in: `{"uri":"skill://a/SKILL.md","frontmatter":{"name":"a","description":"d"},"resources":[{"uri":"skill://a/SKILL.md","digest":"sha256:00","size":3}],"_meta":{"k":1}}`,
			out:   `{"uri":"skill://a/SKILL.md","frontmatter":{"name":"a","description":"d"},"resources":[{"uri":"skill://a/SKILL.md","digest":"sha256:00","size":3}],"_meta":{"k":1}}`,
			files: 1, name: "a", descr: "d"},
		{in: `{"uri":"skill://a/SKILL.md","frontmatter":{"name":7},"resources":"dynamic"}`,
			out: `{"uri":"skill://a/SKILL.md","frontmatter":{"name":7},"resources":"dynamic"}`, dynamic: true},
		{in: `{"uri":"skill://a/SKILL.md","resources":[]}`, out: `{"uri":"skill://a/SKILL.md","resources":[]}`},
		{in: `{"uri":"skill://a/SKILL.md"}`, out: `{"uri":"skill://a/SKILL.md"}`, noManifest: true},
		{in: `{"uri":"skill://a/SKILL.md","resources":"static"}`, out: `{"uri":"skill://a/SKILL.md"}`, noManifest: true},
		{in: `{"uri":"skill://a/SKILL.md","resources":[{"uri":1}]}`, out: `{"uri":"skill://a/SKILL.md"}`, noManifest: true},
		{in: `{"uri":"skill://a/SKILL.md","resources":{"a":1}}`, out: `{"uri":"skill://a/SKILL.md"}`, noManifest: true},
	}
	for _, tt := range tests {
		var s skills.Skill
		if err := json.Unmarshal([]byte(tt.in), &s); err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if len(s.Files) != tt.files || s.Dynamic != tt.dynamic || s.Name() != tt.name || s.Description() != tt.descr {
			t.Errorf("%s: decoded %+v", tt.in, s)
		}
		if out, err := json.Marshal(s); err != nil || string(out) != tt.out {
			t.Errorf("%s: encoded %s, %v; want %s", tt.in, out, err, tt.out)
		}
	}
	var s skills.Skill
	if err := json.Unmarshal([]byte(`{"uri":1}`), &s); err == nil {
		t.Error("an entry whose uri is no string decoded")
	}
}

// TestSkillFileURIEscapes: a file URI that leaves the skill's directory by dot segments, raw or
// percent-encoded, by an encoded slash or a backslash, is refused, whether the manifest lists
// it or the skill has none: nothing is read, and nothing is returned as verified.
func TestSkillFileURIEscapes(t *testing.T) {
	t.Parallel()
	const billing = "---\nname: billing\ndescription: the billing skill\n---\n"
	escapes := []string{
		"skill://pdf-processing/../billing/SKILL.md",
		"skill://pdf-processing/%2e%2e/billing/SKILL.md",
		"skill://pdf-processing/%2E%2E/billing/SKILL.md",
		"skill://pdf-processing/.%2e/billing/SKILL.md",
		"skill://pdf-processing/%2e./billing/SKILL.md",
		"skill://pdf-processing/references/../../billing/SKILL.md",
		"skill://pdf-processing/references/%2e%2e/%2e%2e/billing/SKILL.md",
		"skill://pdf-processing/..%2fbilling/SKILL.md",
		"skill://pdf-processing/..%2Fbilling%2FSKILL.md",
		"skill://pdf-processing/..\\billing\\SKILL.md",
		"skill://pdf-processing/%5c..%5cbilling/SKILL.md",
		"skill://pdf-processing/%252e%252e/billing/SKILL.md",
		"skill://pdf-processing/./../billing/SKILL.md",
		"skill://pdf-processing//billing/SKILL.md",
	}
	for _, uri := range escapes {
		t.Run(uri, func(t *testing.T) {
			t.Parallel()
			files := pdfFiles()
			files[uri] = mcpclient.ResourceContents{Text: billing}
			srv := newSkillServer(t, nil, files)
			c := mcptest.NewClient(t, srv)
			ctx := testCtx(t)

			listed := pdfEntry()
			listed.Files = append(listed.Files, fileOf(uri, []byte(billing)))
			f, err := skills.ReadFile(ctx, c, listed, uri)
			if f != nil {
				t.Errorf("ReadFile returned %+v", f)
			}
			if sve := refusal(t, err); sve.Check != skills.CheckManifest {
				t.Errorf("a manifest listing %s: %+v", uri, sve)
			}
			for f, err := range skills.Files(ctx, c, listed) {
				if err == nil {
					t.Errorf("Files yielded %s", f.URI)
					continue
				}
				refusal(t, err)
			}

			dynamic := pdfEntry()
			dynamic.Files, dynamic.Dynamic = nil, true
			f, err = skills.ReadFile(ctx, c, dynamic, uri, skills.WithUnverifiableFiles())
			if f != nil {
				t.Errorf("ReadFile of a skill without a manifest returned %+v", f)
			}
			if sve := refusal(t, err); sve.Check != skills.CheckManifest {
				t.Errorf("a skill without a manifest, %s: %+v", uri, sve)
			}

			escaping := pdfEntry()
			escaping.URI = strings.Replace(uri, "billing/SKILL.md", "SKILL.md", 1)
			if escaping.URI != uri {
				escaping.Files = []skills.File{fileOf(escaping.URI, []byte(pdfMD))}
				if _, err := skills.Load(ctx, c, escaping); refusal(t, err).Check != skills.CheckManifest {
					t.Errorf("a skill whose URI is %s: %v", escaping.URI, err)
				}
			}
			if reads := srv.read(); len(reads) != 0 {
				t.Errorf("read %v", reads)
			}
		})
	}
}

// TestReadDirectoryRefusesEscapingChildren: a child the server lists outside the directory read,
// by dot segments, encoded slashes or another directory, fails the page with CodeProtocol: a
// host descending into it would read beyond the skill.
func TestReadDirectoryRefusesEscapingChildren(t *testing.T) {
	t.Parallel()
	for _, child := range []string{
		"skill://pdf-processing/../billing",
		"skill://pdf-processing/%2e%2e/billing",
		"skill://pdf-processing/..%2fbilling",
		"skill://pdf-processing/..\\billing",
		"skill://billing/SKILL.md",
		"skill://pdf-processing-evil/SKILL.md",
	} {
		read := mcptest.WithMethod("resources/directory/read", func(context.Context, json.RawMessage) (any, error) {
			return skills.ReadDirectoryResult{Resources: []*mcpclient.Resource{
				{URI: pdfSkill, Name: "SKILL.md"},
				{URI: child, Name: "billing", MIMEType: skills.MIMETypeDirectory},
			}}, nil
		})
		c := mcptest.NewClient(t, mcptest.NewTestServer(t, read, mcptest.WithExtension(skills.Extension, skills.Capabilities{DirectoryRead: true})))
		page, err := skills.ReadDirectoryPage(testCtx(t), c, "skill://pdf-processing", "")
		if page != nil || mcpclient.CodeOf(err) != mcpclient.CodeProtocol {
			t.Errorf("a child %s: %+v, %v; want CodeProtocol", child, page, err)
		}
	}
}
