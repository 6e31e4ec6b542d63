package main

import "github.com/northstar-mcp/mcpclient/mcptest"

// skillFixtures are the skills the Skills extension's scenarios list, get and read: one with
// files in subdirectories, for the directory reads, and one under a nested path.
func skillFixtures() []mcptest.Option {
	return []mcptest.Option{
		mcptest.WithSkill(mcptest.Skill{
			Path:        "pdf-processing",
			Description: "Extracts text and tables from PDF files and fills in PDF forms",
			Frontmatter: map[string]any{"license": "Apache-2.0", "metadata": map[string]string{"author": "mcpclient", "version": "1.0"}},
			Body:        "# PDF processing\n\nRun `scripts/extract.py FILE` to extract the text; see reference/FORMS.md for forms.\n",
			Files: map[string][]byte{
				"scripts/extract.py": []byte("import sys\n\nprint(open(sys.argv[1], 'rb').read()[:100])\n"),
				"reference/FORMS.md": []byte("# Forms\n\nFill in the fields in order.\n"),
			},
		}),
		mcptest.WithSkill(mcptest.Skill{
			Path:        "acme/release-notes",
			Description: "Writes release notes from a list of merged changes",
			Body:        "# Release notes\n\nGroup the changes by area, newest first.\n",
		}),
	}
}
