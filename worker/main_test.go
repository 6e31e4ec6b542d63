package worker_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "charge" {
		os.Exit(chargeJob()) // a worker process of the crash tests
	}
	goleak.VerifyTestMain(m)
}

// The crash tests run a worker in a child process (this test binary again) that a test kills
// with SIGKILL while it charges a job: what it leaves in its journal file is what a real crash
// leaves.
const (
	envRole    = "WORKER_TEST_ROLE" // "charge": the child charges one job
	envURL     = "WORKER_TEST_URL"
	envJournal = "WORKER_TEST_JOURNAL"
	envJob     = "WORKER_TEST_JOB"
)

// chargeJob is the child: it charges the job under the id derived from its key, with a journal,
// and reports "claimed" once the call is under way. It is killed before it returns, or exits 0.
func chargeJob() int {
	j, err := journal.OpenFile(os.Getenv(envJournal))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: os.Getenv(envURL)}, mcpclient.WithJournal(j))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	job := os.Getenv(envJob)
	if _, err := c.CallTool(ctx, "charge", map[string]any{"job": job}, mcpclient.WithRequestID(mcpclient.IDFromKey("billing", job))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
