package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestSuiteMatchesBaseline runs both sides in-process, as conformance/run-receipts.sh does: every
// run passes or fails as the baseline says.
func TestSuiteMatchesBaseline(t *testing.T) {
	expected, err := readBaseline("../receipts-baseline.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	bad, err := runSuite(context.Background(), config{side: "all", expected: expected}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("%d runs contradict the baseline:\n%s", bad, out.String())
	}
	for _, side := range []string{"server: ", "client: "} {
		if !strings.Contains(out.String(), side) {
			t.Errorf("no summary for %q:\n%s", side, out.String())
		}
	}
}

// TestServerWithoutReceiptsFails runs the server side against a server that keeps no receipts
// and declares none: the declaration fails, the scenarios that need receipts are skipped, and
// the pass-through one passes.
func TestServerWithoutReceiptsFails(t *testing.T) {
	inner := mcptest.NewUnstartedHTTPServer(append(fixtureTools(&counters{runs: map[string]int{}}),
		mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125))...)
	defer inner.Close()
	ts := httptest.NewServer(inner)
	defer ts.Close()
	var out bytes.Buffer
	bad, err := runSuite(context.Background(), config{side: "server", url: ts.URL + "/mcp"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("--url compares with no baseline, yet %d runs count as unexpected", bad)
	}
	for _, want := range []string{
		"FAIL  server:url/declaration@2025-11-25",
		"FAIL  server:url/declaration@2026-07-28",
		"PASS  server:url/not-opted-in-passes-through@2026-07-28",
		"SKIP  server:url/replay-meta-opt-in@2026-07-28",
		"server: 2 passed, 2 failed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the report:\n%s", want, out.String())
		}
	}
}

// TestBaselineStaleness: a run the baseline lists that passes, and a listed name that is no run,
// both count against the baseline.
func TestBaselineStaleness(t *testing.T) {
	var out bytes.Buffer
	bad, err := runSuite(context.Background(), config{side: "client", only: "client:in-doubt@2026-07-28",
		expected: map[string]string{"client:in-doubt@2026-07-28": "listed for the test"}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 1 || !strings.Contains(out.String(), "STALE client:in-doubt@2026-07-28") {
		t.Errorf("a passing listed run: %d unexpected\n%s", bad, out.String())
	}
	out.Reset()
	bad, _ = runSuite(context.Background(), config{side: "client", expected: map[string]string{
		"client:no-such-scenario@2026-07-28": "x"}}, &out)
	if bad != 1 || !strings.Contains(out.String(), "STALE client:no-such-scenario@2026-07-28 is no run") {
		t.Errorf("a listed name that is no run: %d unexpected\n%s", bad, out.String())
	}
}
