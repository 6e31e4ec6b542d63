package pgtest_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/pgtest"
)

// socketOf returns the unix socket a URL of Start names: host is the directory, and the socket
// is numbered by the port.
func socketOf(t *testing.T, url string) string {
	t.Helper()
	fields := map[string]string{}
	for _, kv := range strings.Fields(url) {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	if fields["host"] == "" || fields["port"] == "" || fields["dbname"] != "pgtest_db" || fields["user"] == "" {
		t.Fatalf("URL %q: want host, port, user and dbname pgtest_db", url)
	}
	return filepath.Join(fields["host"], ".s.PGSQL."+fields["port"])
}

// Start gives a server that accepts connections on its socket; Crash takes it down and brings
// it back; Stop removes everything.
func TestStartCrashStop(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skipf("%s names a server of its own", pgtest.EnvURL)
	}
	srv, err := pgtest.Start("pgtest_db")
	if err != nil {
		// The main module's tests run before CI installs PostgreSQL for the modules that need
		// it; those modules' tests run this code again.
		if pgtest.Skip() || errors.Is(err, pgtest.ErrNoBinaries) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer srv.Stop()
	sock := socketOf(t, srv.URL)
	dial := func() error {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("the server does not listen: %v", err)
	}
	if err := srv.Crash(); err != nil {
		t.Fatalf("Crash: %v", err)
	}
	if err := dial(); err != nil {
		t.Fatalf("the server does not listen after Crash: %v", err)
	}
	srv.Stop()
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Fatalf("Stop left %s: %v", filepath.Dir(sock), err)
	}
}

// A server named by MCPCLIENT_PG_URL is used as it is, and never crashed.
func TestNamedServer(t *testing.T) {
	t.Setenv(pgtest.EnvURL, "host=/nowhere dbname=x")
	srv, err := pgtest.Start("ignored")
	if err != nil || srv.URL != "host=/nowhere dbname=x" {
		t.Fatalf("Start = %+v, %v", srv, err)
	}
	if err := srv.Crash(); err != pgtest.ErrNotOwned {
		t.Fatalf("Crash = %v, want ErrNotOwned", err)
	}
	srv.Stop()
}
