package mcpdbos_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"

	"github.com/northstar-mcp/mcpclient"
	mcpdbos "github.com/northstar-mcp/mcpclient/dbos"
	"github.com/northstar-mcp/mcpclient/internal/pgtest"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// DBOS keeps its workflows in PostgreSQL, which internal/pgtest provides: the server
// MCPCLIENT_PG_URL names, or one the tests start for themselves from a local installation.
// Without either they fail, unless MCPCLIENT_PG_SKIP=1 says to skip them.

// dbURL is the database the tests use; "" when they are skipped.
var dbURL string

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "worker" {
		os.Exit(worker()) // the process a recovery test kills mid-step: see recovery_test.go
	}
	os.Exit(pgtest.Main(m, "dbos tests", "mcpdbos_test", func(srv *pgtest.Server) {
		if srv != nil {
			dbURL = srv.URL
		}
	}))
}

var schemas atomic.Int64

// newSchema returns a schema for DBOS's tables that no other test uses, dropped after t: each
// test recovers only its own workflows.
func newSchema(t *testing.T) string {
	t.Helper()
	if dbURL == "" {
		t.Skipf("no PostgreSQL (%s=1)", pgtest.EnvSkip)
	}
	name := fmt.Sprintf("mcpdbos_%d_%d", os.Getpid(), schemas.Add(1))
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	return name
}

// config is the DBOS configuration of every process of a test: one application, one version,
// one executor, so that a process started later recovers what an earlier one left pending.
func config(url, schema string) dbos.Config {
	return dbos.Config{
		AppName:            "mcpdbos-test",
		DatabaseURL:        url,
		DatabaseSchema:     schema,
		ApplicationVersion: "test",
		ExecutorID:         "test-executor",
		// DBOS logs from goroutines that may outlive a test; a test's log cannot take them.
		Logger: debugLogger(),
	}
}

// launch starts DBOS on schema with the workflows register registers, and shuts it down after t.
func launch(t *testing.T, schema string, register func(dbos.Context)) dbos.Context {
	t.Helper()
	ctx, err := dbos.NewContext(context.Background(), config(dbURL, schema))
	if err != nil {
		t.Fatal(err)
	}
	register(ctx)
	if err := dbos.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dbos.Shutdown(ctx, 10*time.Second); err != nil {
			t.Error(err)
		}
	})
	return ctx
}

// chargeTool is the tool the tests call: it answers with its arguments.
var chargeTool = mcpclient.Tool{Name: "charge"}

func answerCharge(_ context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
	return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged " + string(call.Arguments))}}, nil
}

// chargeWorkflow returns a workflow that charges each amount in a step of its own, through c.
// It is registered by name ("charge"): DBOS names a closure by where the compiler put it, which
// inlining changes, and the process that recovers a workflow must find it under its name.
func chargeWorkflow(c mcpclient.Caller, opts ...dbos.StepOption) dbos.Workflow[[]int, []string] {
	return func(ctx dbos.Context, amounts []int) ([]string, error) {
		var out []string
		for _, amount := range amounts {
			res, err := mcpdbos.CallTool(ctx, c, chargeTool.Name, map[string]int{"amount": amount}, opts...)
			if err != nil {
				return out, err
			}
			out = append(out, res.Text())
		}
		return out, nil
	}
}

// recorder is a Caller that records the request id of every tools/call it passes on.
type recorder struct {
	mcpclient.Caller
	mu  sync.Mutex
	ids []mcpclient.ID
}

func (r *recorder) CallTool(ctx context.Context, name string, args any, opts ...mcpclient.CallOption) (*mcpclient.CallToolResult, error) {
	r.mu.Lock()
	r.ids = append(r.ids, mcpclient.RequestIDOf(opts...))
	r.mu.Unlock()
	return r.Caller.CallTool(ctx, name, args, opts...)
}

func (r *recorder) seen() []mcpclient.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mcpclient.ID(nil), r.ids...)
}

func debugLogger() *slog.Logger {
	if os.Getenv("MCPDBOS_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
