package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient/journal/postgres"
)

// The tests run against a real PostgreSQL: the server MCPCLIENT_PG_URL names, or else one they
// start for themselves from the binaries of a local installation (Debian's postgresql package
// puts them in /usr/lib/postgresql/VERSION/bin; MCPCLIENT_PG_BIN names another directory), in
// a temporary directory, listening on a unix socket there only, with PostgreSQL's default
// settings: fsync and synchronous commits stay on, as the journal's durability needs. Without
// either the tests fail, unless MCPCLIENT_PG_SKIP=1 says to skip them.
const (
	envURL  = "MCPCLIENT_PG_URL"
	envBin  = "MCPCLIENT_PG_BIN"
	envSkip = "MCPCLIENT_PG_SKIP"
)

// dbURL is the database the tests use; "" when they are skipped.
var dbURL string

// db is the server the tests started; nil when MCPCLIENT_PG_URL named one.
var db *server

// A server is a PostgreSQL the tests run.
type server struct {
	run             func(name string, args ...string) *exec.Cmd
	data, log, opts string
}

// crash stops the server as a crash would (immediate shutdown: no checkpoint, whatever the WAL
// writer has not flushed is lost), and starts it again, which recovers from the WAL.
func (s *server) crash() error {
	if out, err := s.run("pg_ctl", "stop", "-m", "immediate", "-D", s.data).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return s.start()
}

func (s *server) start() error {
	if out, err := s.run("pg_ctl", "start", "-w", "-t", "60", "-D", s.data, "-l", s.log, "-o", s.opts).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(s.log)
		return fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	return nil
}

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(child(role)) // a worker process of the multi-process tests: see workers_test.go
	}
	stop, err := startDB()
	if err != nil {
		if os.Getenv(envSkip) == "1" {
			fmt.Fprintf(os.Stderr, "postgres journal tests skipped (%s=1): %v\n", envSkip, err)
			os.Exit(m.Run())
		}
		fmt.Fprintf(os.Stderr, "postgres journal tests need a PostgreSQL: %v\n"+
			"Install one (apt-get install -y postgresql), set %s to a database URL, or set %s=1 to skip.\n", err, envURL, envSkip)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// startDB sets dbURL, starting a server if none was named, and returns what stops it.
func startDB() (stop func(), err error) {
	if u := os.Getenv(envURL); u != "" {
		dbURL = u
		return func() {}, nil
	}
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mcpclient-pg-") // short: a socket's path must fit in 107 bytes
	if err != nil {
		return nil, err
	}
	// PostgreSQL refuses to run as root: as root, its binaries run as the postgres user, who
	// must own the directory.
	run := func(name string, args ...string) *exec.Cmd { return exec.Command(filepath.Join(bin, name), args...) }
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root, and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		run = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
	}
	data, logFile := filepath.Join(dir, "data"), filepath.Join(dir, "log")
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// --no-sync only skips initdb's own flush of the new files, which a test's throwaway
	// cluster does not need; the server's durability settings stay the defaults.
	if out, err := run("initdb", "-D", data, "-U", "journal", "-A", "trust", "--no-sync", "-E", "UTF8", "--no-instructions").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	srv := &server{run: run, data: data, log: logFile, opts: fmt.Sprintf("-k %s -p %d -c listen_addresses=''", dir, port)}
	if err := srv.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop = func() {
		run("pg_ctl", "stop", "-m", "fast", "-D", data).Run()
		os.RemoveAll(dir)
	}
	ctx := context.Background()
	admin := fmt.Sprintf("host=%s port=%d user=journal dbname=postgres", dir, port)
	conn, err := pgx.Connect(ctx, admin)
	if err == nil {
		_, err = conn.Exec(ctx, "CREATE DATABASE journal_test")
		conn.Close(ctx)
	}
	if err != nil {
		stop()
		return nil, err
	}
	dbURL = fmt.Sprintf("host=%s port=%d user=journal dbname=journal_test", dir, port)
	db = srv
	return stop, nil
}

// pgBin finds the directory of initdb and pg_ctl.
func pgBin() (string, error) {
	if dir := os.Getenv(envBin); dir != "" {
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", errors.New("no initdb on PATH nor in /usr/lib/postgresql/*/bin")
	}
	slices.SortFunc(found, func(a, b string) int { return versionOf(b) - versionOf(a) }) // the newest
	return filepath.Dir(found[0]), nil
}

func versionOf(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// freePort returns a TCP port no one listens on now, to number the server's socket by.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// needDB skips t when the tests run without a database.
func needDB(t testing.TB) {
	t.Helper()
	if dbURL == "" {
		t.Skipf("no PostgreSQL (%s=1)", envSkip)
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
