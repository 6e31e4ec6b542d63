package postgres_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient/internal/pgtest"
	"github.com/northstar-mcp/mcpclient/receipts/postgres"
)

// The tests run against a real PostgreSQL, which internal/pgtest provides: the server
// MCPCLIENT_PG_URL names, or one the tests start for themselves from a local installation.
// Without either they fail, unless MCPCLIENT_PG_SKIP=1 says to skip them.

// dbURL is the database the tests use; "" when they are skipped.
var dbURL string

func TestMain(m *testing.M) {
	if os.Getenv(envRole) == "server" {
		os.Exit(serveFleetMember()) // a server process of the fleet test: see fleet_test.go
	}
	os.Exit(pgtest.Main(m, "postgres receipts tests", "receipts_test", func(srv *pgtest.Server) {
		if srv != nil {
			dbURL = srv.URL
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
	name := fmt.Sprintf("receipts_%d_%d", os.Getpid(), tables.Add(1))
	t.Cleanup(func() { dropTable(t, name) })
	return name
}

func dropTable(t testing.TB, name string) {
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), fmt.Sprintf(`DROP TABLE IF EXISTS %[1]s, %[1]s_counts, %[1]s_epoch; DROP FUNCTION IF EXISTS %[1]s_count, %[1]s_claim, %[1]s_release, %[1]s_prune`, name)); err != nil {
		t.Error(err)
	}
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

// newStore returns a store on table over pool, closed after t.
func newStore(t testing.TB, pool *pgxpool.Pool, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.New(context.Background(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
