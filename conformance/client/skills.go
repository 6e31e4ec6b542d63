package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/skills"
)

// skillsOptions are the options of the client for scenario: a host that uses skills declares
// the Skills extension.
func skillsOptions(scenario string) []mcpclient.Option {
	if !strings.HasPrefix(scenario, "sep-2640-") {
		return nil
	}
	return []mcpclient.Option{mcpclient.WithExtension(skills.Extension, nil)}
}

// refusedCheck is, for the scenarios whose server tampers with SKILL.md, the check that must
// refuse it.
var refusedCheck = map[string]skills.Check{
	"sep-2640-client-verify-digest":      skills.CheckDigest,
	"sep-2640-client-verify-size":        skills.CheckSize,
	"sep-2640-client-verify-frontmatter": skills.CheckFrontmatter,
}

// runSkills runs the Skills extension's scenarios. no-prefetch lists the skills and reads none of
// their files, as a host does until a skill is needed. The verify scenarios then load each
// skill, reading its files one at a time: the server's SKILL.md does not match the entry, so
// the client must refuse it and read nothing after it.
func runSkills(ctx context.Context, c *mcpclient.Client, scenario string) error {
	listed, err := mcpclient.Collect(skills.List(ctx, c))
	if err != nil {
		return err
	}
	for _, s := range listed {
		fmt.Fprintf(os.Stderr, "skill %s (%s): %d files\n", s.Name(), s.URI, len(s.Files))
	}
	want, verify := refusedCheck[scenario]
	if !verify {
		return nil
	}
	for _, s := range listed {
		for f, err := range skills.Files(ctx, c, s) {
			var refusal *skills.VerificationError
			switch {
			case errors.As(err, &refusal) && refusal.Check == want:
				fmt.Fprintln(os.Stderr, "refused as expected:", err)
				return nil
			case err != nil:
				return err
			}
			fmt.Fprintf(os.Stderr, "read %s: %d bytes, verified\n", f.URI, len(f.Data))
		}
	}
	return fmt.Errorf("no skill file was refused by the %s check", want)
}
