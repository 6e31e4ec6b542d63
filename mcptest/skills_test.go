package mcptest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/skills"
)

var pdfSkill = mcptest.Skill{
	Path:        "acme/pdf-processing",
	Description: "Extracts text and tables from PDF files",
	Frontmatter: map[string]any{
		"license":       "Apache-2.0",
		"metadata":      map[string]string{"author": "acme: tools, inc.", "version": "1.0"},
		"allowed-tools": []string{"Bash(python:*)", "Read"},
	},
	Body: "# PDF processing\n\nRun scripts/extract.py on the file.\n",
	Files: map[string][]byte{
		"scripts/extract.py": []byte("print('extracting')\n"),
		"FORMS.md":           []byte("# Forms\n"),
		"assets/logo.png":    {0x89, 'P', 'N', 'G', 0xff, 0x00},
	},
}

// TestSkillsAreServedAsTheClientReadsAndVerifiesThem: what WithSkill serves passes every check
// this module's client makes of a skill, files and frontmatter included.
func TestSkillsAreServedAsTheClientReadsAndVerifiesThem(t *testing.T) {
	t.Parallel()
	srv := mcptest.NewTestServer(t, mcptest.WithPageSize(1), mcptest.WithSkill(pdfSkill),
		mcptest.WithSkill(mcptest.Skill{Path: "notes", Description: "Takes notes"}))
	c := mcptest.NewClient(t, srv, mcpclient.WithExtension(skills.Extension, nil))
	ctx := context.Background()

	if caps, ok := skills.CapabilitiesOf(c.ServerCapabilities()); !ok || !caps.DirectoryRead {
		t.Fatalf("skills declared %v with %+v, want directoryRead", ok, caps)
	}
	entries, err := mcpclient.Collect(skills.List(ctx, c)) // one skill a page
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, s := range entries {
		uris = append(uris, s.URI)
	}
	if !slices.Equal(uris, []string{"skill://acme/pdf-processing/SKILL.md", "skill://notes/SKILL.md"}) {
		t.Fatalf("skills %v", uris)
	}
	pdf, err := skills.Get(ctx, c, "skill://acme/pdf-processing/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	if pdf.Name() != "pdf-processing" || pdf.Description() != pdfSkill.Description || len(pdf.Files) != 4 {
		t.Fatalf("entry %s %q %+v", pdf.Name(), pdf.Description(), pdf.Files)
	}
	var fm map[string]any
	json.Unmarshal(pdf.Frontmatter, &fm)
	if md, _ := fm["metadata"].(map[string]any); md["author"] != "acme: tools, inc." || fm["license"] != "Apache-2.0" {
		t.Errorf("frontmatter %s", pdf.Frontmatter)
	}

	read := map[string][]byte{}
	for f, err := range skills.Files(ctx, c, pdf) { // each file checked against the manifest
		if err != nil {
			t.Fatal(err)
		}
		read[f.URI] = f.Data
	}
	for p, want := range pdfSkill.Files {
		if got := read["skill://acme/pdf-processing/"+p]; string(got) != string(want) {
			t.Errorf("%s read %q, want %q", p, got, want)
		}
	}
	if _, ok := read[pdf.URI]; !ok || len(read) != 4 {
		t.Errorf("read %d files, SKILL.md among them %v", len(read), ok)
	}

	res, err := mcpclient.Collect(c.Resources(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].URI != pdf.URI || res[0].Name != "pdf-processing" || res[0].MIMEType != "text/markdown" || res[0].Description != pdfSkill.Description {
		t.Errorf("resources/list %+v, want the SKILL.md files alone", res)
	}

	children, err := mcpclient.Collect(skills.ReadDirectory(ctx, c, "skill://acme/pdf-processing"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, r := range children {
		listed = append(listed, r.URI+" "+r.MIMEType)
	}
	want := []string{
		"skill://acme/pdf-processing/assets " + skills.MIMETypeDirectory,
		"skill://acme/pdf-processing/scripts " + skills.MIMETypeDirectory,
		"skill://acme/pdf-processing/FORMS.md text/markdown",
		"skill://acme/pdf-processing/SKILL.md text/markdown",
	}
	if !slices.Equal(listed, want) {
		t.Errorf("directory %q, want %q", listed, want)
	}
	if sub, err := mcpclient.Collect(skills.ReadDirectory(ctx, c, "skill://acme/pdf-processing/scripts/")); err != nil || len(sub) != 1 || sub[0].Name != "extract.py" {
		t.Errorf("subdirectory %+v, %v", sub, err)
	}

	for _, bad := range []func() error{
		func() error { _, err := skills.Get(ctx, c, "skill://missing/SKILL.md"); return err },
		func() error {
			_, err := mcpclient.Collect(skills.ReadDirectory(ctx, c, "skill://acme/pdf-processing/FORMS.md"))
			return err
		},
		func() error { _, err := mcpclient.Collect(skills.ReadDirectory(ctx, c, "skill://acme")); return err },
	} {
		var rpc *mcpclient.RPCError
		if err := bad(); !errors.As(err, &rpc) || rpc.Code != mcpclient.RPCInvalidParams {
			t.Errorf("got %v, want -32602", err)
		}
	}
}

func TestWithSkillRefusesWhatItCannotServe(t *testing.T) {
	for name, s := range map[string]mcptest.Skill{
		"empty path":        {},
		"dot-dot segment":   {Path: "a/../b"},
		"empty segment":     {Path: "a//b"},
		"file outside":      {Path: "a", Files: map[string][]byte{"../x": nil}},
		"second SKILL.md":   {Path: "a", Files: map[string][]byte{"SKILL.md": nil}},
		"frontmatter value": {Path: "a", Frontmatter: map[string]any{"f": func() {}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			mcptest.NewServer(mcptest.WithSkill(s)).Close()
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the same path twice: no panic")
			}
		}()
		mcptest.NewServer(mcptest.WithSkill(mcptest.Skill{Path: "a"}), mcptest.WithSkill(mcptest.Skill{Path: "a"})).Close()
	}()
}
