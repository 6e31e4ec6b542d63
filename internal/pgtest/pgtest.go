// Package pgtest starts a throwaway PostgreSQL server for the tests of the modules that keep
// state in PostgreSQL (journal/postgres, receipts/postgres), from the binaries of a local
// installation. It depends on no database driver: it runs initdb and pg_ctl and hands back a
// connection string, so that the main module stays free of one.
//
// The server is the one MCPCLIENT_PG_URL names, or else one started from the binaries in
// MCPCLIENT_PG_BIN, on PATH, or where Debian's postgresql package puts them
// (/usr/lib/postgresql/VERSION/bin), in a temporary directory, listening on a unix socket there
// only, with PostgreSQL's default settings: fsync and synchronous commits stay on, as the
// durability of what the tests check needs.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Environment variables that steer Start and Skip.
const (
	EnvURL  = "MCPCLIENT_PG_URL"  // a database to test against instead of starting one
	EnvBin  = "MCPCLIENT_PG_BIN"  // the directory of initdb, pg_ctl and postgres
	EnvSkip = "MCPCLIENT_PG_SKIP" // "1": tests without a PostgreSQL skip instead of failing
)

// superuser is the role initdb creates, which the tests connect as.
const superuser = "mcpclient"

// A Server is a PostgreSQL the tests use.
type Server struct {
	// URL is the connection string of the test database, in key=value form.
	URL string

	// run runs a binary of the installation as the user the server runs as; nil when the
	// server is one EnvURL named.
	run             func(name string, args ...string) *exec.Cmd
	dir             string
	data, log, opts string
}

// Skip reports whether tests may skip when no PostgreSQL can be had (EnvSkip=1).
func Skip() bool { return os.Getenv(EnvSkip) == "1" }

// Start returns the server EnvURL names, or starts one with a database named dbname (created
// unless it is "postgres", which initdb makes). Stop it when the tests are done.
func Start(dbname string) (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &Server{URL: u}, nil
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mcpclient-pg-") // short: a socket's path must fit in 107 bytes
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "log")}
	if err := s.setUp(bin, dbname); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) setUp(bin, dbname string) error {
	// PostgreSQL refuses to run as root: as root, its binaries run as the postgres user, who
	// must own the directory.
	s.run = func(name string, args ...string) *exec.Cmd { return exec.Command(filepath.Join(bin, name), args...) }
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root, and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
		s.run = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	// --no-sync only skips initdb's own flush of the new files, which a throwaway cluster does
	// not need; the server's durability settings stay the defaults.
	if out, err := s.run("initdb", "-D", s.data, "-U", superuser, "-A", "trust", "--no-sync", "-E", "UTF8", "--no-instructions").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	if dbname != "postgres" {
		// The single-user backend creates the database before the server starts, so that no
		// client library is needed for it.
		cmd := s.run("postgres", "--single", "-D", s.data, "postgres")
		cmd.Stdin = strings.NewReader("CREATE DATABASE " + quoteIdent(dbname) + ";\n")
		if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "ERROR") {
			return fmt.Errorf("creating database %s: %v: %s", dbname, err, out)
		}
	}
	s.opts = fmt.Sprintf("-k %s -p %d -c listen_addresses=''", s.dir, port)
	if err := s.start(); err != nil {
		return err
	}
	s.URL = fmt.Sprintf("host=%s port=%d user=%s dbname=%s", s.dir, port, superuser, dbname)
	return nil
}

func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func (s *Server) start() error {
	if out, err := s.run("pg_ctl", "start", "-w", "-t", "60", "-D", s.data, "-l", s.log, "-o", s.opts).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(s.log)
		return fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	return nil
}

// ErrNoBinaries reports that no PostgreSQL installation was found to start a server from.
var ErrNoBinaries = errors.New("pgtest: no initdb on PATH nor in /usr/lib/postgresql/*/bin")

// ErrNotOwned reports an operation on a server the tests did not start (EnvURL named it).
var ErrNotOwned = errors.New("pgtest: the server was not started by the tests")

// Crash stops the server as a crash would (immediate shutdown: no checkpoint, whatever the WAL
// writer has not flushed is lost), and starts it again, which recovers from the WAL.
func (s *Server) Crash() error {
	if s.run == nil {
		return ErrNotOwned
	}
	if out, err := s.run("pg_ctl", "stop", "-m", "immediate", "-D", s.data).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return s.start()
}

// Stop stops a server the tests started and removes its files; it does nothing to one EnvURL
// named.
func (s *Server) Stop() {
	if s.dir == "" {
		return
	}
	if s.run != nil {
		s.run("pg_ctl", "stop", "-m", "fast", "-D", s.data).Run()
	}
	os.RemoveAll(s.dir)
}

// binDir finds the directory of initdb and pg_ctl.
func binDir() (string, error) {
	if dir := os.Getenv(EnvBin); dir != "" {
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", ErrNoBinaries
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

// Main is what a test binary's TestMain does with a throwaway server: start it (with database
// dbname), hand it to use, run the tests, stop it, and fail a passing run that left goroutines
// behind. Without a PostgreSQL the tests fail with a message saying how to get one, unless
// EnvSkip=1 says to skip them: use then gets nil. what names the tests in messages. It returns
// the exit code for os.Exit.
func Main(m *testing.M, what, dbname string, use func(*Server)) int {
	srv, err := Start(dbname)
	if err != nil {
		if Skip() {
			fmt.Fprintf(os.Stderr, "%s skipped (%s=1): %v\n", what, EnvSkip, err)
			use(nil)
			return m.Run()
		}
		fmt.Fprintf(os.Stderr, "%s need a PostgreSQL: %v\n"+
			"Install one (apt-get install -y postgresql), set %s to a database URL, or set %s=1 to skip.\n", what, err, EnvURL, EnvSkip)
		return 1
	}
	use(srv)
	code := m.Run()
	srv.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	return code
}
