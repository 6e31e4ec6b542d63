// Command receipts runs conformance scenarios of the request receipts extension
// (docs/request-receipts.md) on both sides of the wire, and compares the outcome with a baseline
// of the runs expected to fail.
//
//   - Server side: raw HTTP exchanges, every body written by hand, against a server that keeps
//     receipts: by default the in-process targets (mcptest in ModeNone wrapped by receipts.HTTP,
//     and mcptest's own receipts, each answering with JSON and with event streams), or the server
//     at --url, which must have the fixtures the scenarios call (see fixtures.go).
//   - Client side: this module's client against scripted servers that play exact exchanges and
//     check every byte the client sends.
//
// Usage: receipts [--side server|client|all] [--url URL] [--only SUBSTRING] [--baseline FILE] [-v]
//
// Each side prints its runs and "N passed, M failed"; with the in-process targets, failures the
// baseline lists are expected, and the command exits 1 when a run outside it fails or one inside
// it passes (the baseline is stale). With --url the server side is only reported.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

func main() {
	side := flag.String("side", "all", "server, client or all")
	url := flag.String("url", "", "run the server scenarios against the server at this URL instead of the in-process targets")
	only := flag.String("only", "", "run only the scenarios whose run name contains this")
	baseline := flag.String("baseline", "", "file of the runs expected to fail, one a line: NAME REASON")
	verbose := flag.Bool("v", false, "print every check of every run")
	flag.Parse()
	expected := map[string]string{}
	if *baseline != "" {
		var err error
		if expected, err = readBaseline(*baseline); err != nil {
			fmt.Fprintln(os.Stderr, "receipts:", err)
			os.Exit(2)
		}
	}
	cfg := config{side: *side, url: *url, only: *only, expected: expected, verbose: *verbose}
	bad, err := runSuite(context.Background(), cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "receipts:", err)
		os.Exit(2)
	}
	if bad > 0 {
		os.Exit(1)
	}
}

type config struct {
	side     string
	url      string
	only     string
	expected map[string]string // run name -> why it fails
	verbose  bool
	parallel int
}

// readBaseline reads a baseline file: one run a line, its name then the reason; # comments.
func readBaseline(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, " ")
		out[name] = strings.TrimSpace(reason)
	}
	return out, sc.Err()
}

// runSuite runs the selected sides and reports to w; bad counts the runs that contradict the
// baseline: failures outside it, passes inside it.
func runSuite(ctx context.Context, cfg config, w io.Writer) (bad int, err error) {
	if cfg.parallel == 0 {
		cfg.parallel = 8
	}
	defer httpClient.CloseIdleConnections()
	if cfg.side != "all" && cfg.side != "server" && cfg.side != "client" {
		return 0, fmt.Errorf("--side %q: server, client or all", cfg.side)
	}
	if cfg.side != "client" {
		var jobs []job
		compare := cfg.url == ""
		if cfg.url != "" {
			jobs = serverJobs("url", cfg.url)
		} else {
			targets, stop := startTargets()
			defer stop()
			for _, t := range targets {
				jobs = append(jobs, serverJobs(t.name, t.url)...)
			}
		}
		bad += report(w, "server", runAll(ctx, selected(jobs, cfg.only), cfg.parallel), cfg, compare)
	}
	if cfg.side != "server" {
		bad += report(w, "client", runAll(ctx, selected(clientJobs(), cfg.only), cfg.parallel), cfg, true)
	}
	return bad, nil
}

// report prints the outcomes of one side and returns how many contradict the baseline (none
// when !compare).
func report(w io.Writer, side string, outcomes []*outcome, cfg config, compare bool) (bad int) {
	passed, failed, xfail, skipped := 0, 0, 0, 0
	for _, o := range outcomes {
		reason, listed := cfg.expected[o.name]
		switch {
		case o.skipped != "":
			skipped++
			fmt.Fprintf(w, "SKIP  %s (%s)\n", o.name, o.skipped)
			if compare && listed {
				bad++
				fmt.Fprintf(w, "      the baseline lists it, but it did not run: remove it\n")
			}
			continue
		case o.passed():
			passed++
			if compare && listed {
				bad++
				fmt.Fprintf(w, "STALE %s passes now: remove it from the baseline\n", o.name)
			} else {
				fmt.Fprintf(w, "PASS  %s\n", o.name)
			}
		default:
			failed++
			switch {
			case compare && listed:
				xfail++
				fmt.Fprintf(w, "xfail %s (%s)\n", o.name, reason)
			case compare:
				bad++
				fmt.Fprintf(w, "FAIL  %s: a regression\n", o.name)
			default:
				fmt.Fprintf(w, "FAIL  %s\n", o.name)
			}
			for _, f := range o.failures(must) {
				fmt.Fprintf(w, "      MUST   %s\n", f)
			}
		}
		for _, f := range o.failures(should) {
			fmt.Fprintf(w, "      SHOULD %s\n", f)
		}
		if cfg.verbose {
			for _, c := range o.checks {
				fmt.Fprintf(w, "      %v %s\n", map[bool]string{true: "ok  ", false: "FAIL"}[c.ok], c.name)
			}
		}
	}
	if compare {
		// A listed run of this side that did not run at all is stale too, unless --only left it out.
		ran := map[string]bool{}
		for _, o := range outcomes {
			ran[o.name] = true
		}
		var missing []string
		for name := range cfg.expected {
			if strings.HasPrefix(name, side+":") && !ran[name] && cfg.only == "" && (side != "server" || cfg.url == "") {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		for _, name := range missing {
			bad++
			fmt.Fprintf(w, "STALE %s is no run of this suite: remove it from the baseline\n", name)
		}
	}
	fmt.Fprintf(w, "%s: %d passed, %d failed", side, passed, failed)
	if compare {
		fmt.Fprintf(w, " (%d as the baseline expects)", xfail)
	}
	fmt.Fprintf(w, ", %d skipped\n", skipped)
	return bad
}
