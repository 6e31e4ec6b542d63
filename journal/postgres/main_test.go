package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient/internal/pgtest"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
)

// The tests run against a real PostgreSQL, which internal/pgtest provides: the server
// MCPCLIENT_PG_URL names, or one the tests start for themselves from a local installation.
// Without either they fail, unless MCPCLIENT_PG_SKIP=1 says to skip them.

// dbURL is the database the tests use; "" when they are skipped.
var dbURL string

// db is the server the tests use; its Crash fails when MCPCLIENT_PG_URL named it.
var db *pgtest.Server

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(child(role)) // a worker process of the multi-process tests: see workers_test.go
	}
	os.Exit(pgtest.Main(m, "postgres journal tests", "journal_test", func(srv *pgtest.Server) {
		if srv != nil {
			db, dbURL = srv, srv.URL
		}
	}))
}

// needDB skips t when the tests run without a database.
func needDB(t testing.TB) {
	t.Helper()
	if dbURL == "" {
		t.Skipf("no PostgreSQL (%s=1)", pgtest.EnvSkip)
	}
}

var tables atomic.Int64

// newTable returns a table name no other test uses, and drops it and its companions after t.
func newTable(t testing.TB) string {
	t.Helper()
	needDB(t)
	name := fmt.Sprintf("journal_%d_%d", os.Getpid(), tables.Add(1))
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), fmt.Sprintf("DROP TABLE IF EXISTS %[1]s, %[1]s_slots; DROP FUNCTION IF EXISTS %[1]s_held", name))
	})
	return name
}

// newPool returns a pool on the test database, closed after t.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	needDB(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// open opens a journal on table, closed after t.
func open(t testing.TB, table string, opts ...postgres.Option) *postgres.Journal {
	t.Helper()
	j, err := postgres.Connect(context.Background(), dbURL, append([]postgres.Option{postgres.WithTable(table)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
