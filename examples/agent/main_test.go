package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// TestMain runs the test binary as the stdio server when run starts it so, as the example's
// main does; otherwise it runs the tests, and fails them if one leaves a goroutine behind.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == serveStdioArg {
		if err := serveStdio(); err != nil {
			fmt.Fprintln(os.Stderr, "agent server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// The demo, over both transports: the reply to the booking is lost after the table was booked,
// and the agent settles the call by inspection, so the bistro holds one reservation; the
// server's sampling and elicitation requests reached the client's handlers, and every progress
// report reached the call's handler.
func TestAgent(t *testing.T) {
	// The stdio server is this test binary, which sleeps a second at exit under -race unless told
	// not to.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	for _, over := range []string{"stdio", "http"} {
		t.Run(over, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			sum, err := run(ctx, &out, over)
			if err != nil {
				t.Fatalf("%v\n%s", err, &out)
			}
			got := out.String()
			if sum.Reservations != 1 || !strings.Contains(sum.Answer, "B-1: Trattoria Sole, 2 at 19:30, under Ada Lovelace") {
				t.Errorf("%d reservations, answer %q; want one booking, B-1", sum.Reservations, sum.Answer)
			}
			for _, want := range []string{
				"mcpclient: outcome unknown for request",
				"inspected: checked find_reservations",
				"it ran, and nothing holds its reply",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("the output lacks %q", want)
				}
			}
			// One question to the model (search), one to the user (the one booking), three
			// reports from each of search_restaurants and book_table.
			if sum.Samples != 1 || sum.Questions != 1 || sum.ProgressReports != 6 {
				t.Errorf("handlers saw %d samplings, %d elicitations, %d progress reports; want 1, 1, 6",
					sum.Samples, sum.Questions, sum.ProgressReports)
			}
			if t.Failed() {
				t.Logf("output:\n%s", got)
			}
		})
	}
}

// Each way on after an unknown outcome books the table once: a resend that the server's receipt
// answers, the reservation found when nothing holds the reply, and a new request under a new id
// when the first never ran.
func TestSettleAnUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  mcptest.Mode
		fault mcptest.FaultKind
		// retry is the client's policy; with receipts, RetryNever keeps the client from reading
		// the receipt by itself, which leaves it to the agent.
		retry mcpclient.RetryPolicy
		want  string
	}{
		{"receipts, reply lost: resend", mcptest.ModeReceipts, mcptest.DropAfterExecution,
			mcpclient.RetryPolicy{Mode: mcpclient.RetryNever}, "the server keeps receipts: resend request"},
		{"no receipts, reply lost: the reservation found", mcptest.ModeNone, mcptest.DropAfterExecution,
			mcptest.FastRetryPolicy(), "it ran, and nothing holds its reply"},
		{"no receipts, request lost: supersede", mcptest.ModeNone, mcptest.DropBeforeExecution,
			mcptest.FastRetryPolicy(), "it did not run: supersede request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &bistro{}
			srv := mcptest.NewTestHTTPServer(t, append(b.tools(), mcptest.WithMode(tc.mode), sseAnswers,
				mcptest.WithFault(mcptest.Fault{Kind: tc.fault, Tool: "book_table"}))...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			sum, err := runAgent(ctx, &printer{w: &out}, srv.Transport(), mcpclient.WithRetryPolicy(tc.retry))
			if err != nil {
				t.Fatalf("%v\n%s", err, &out)
			}
			got := out.String()
			if !strings.Contains(got, "mcpclient: outcome unknown for request") || !strings.Contains(got, tc.want) {
				t.Errorf("the output lacks the unknown outcome or %q", tc.want)
			}
			if n := srv.Executions("book_table"); n != 1 || sum.Reservations != 1 || !strings.Contains(sum.Answer, "B-1") {
				t.Errorf("book_table ran %d times, %d reservations, answer %q; want one booking, B-1", n, sum.Reservations, sum.Answer)
			}
			if t.Failed() {
				t.Logf("output:\n%s", got)
			}
		})
	}
}
