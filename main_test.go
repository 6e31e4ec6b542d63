package mcpclient_test

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
)

// TestMain fails the run when a test leaks a goroutine or the Client returned an error that is
// not an *mcpclient.Error.
func TestMain(m *testing.M) {
	// The parallel tests wait on sockets and timers, not on the CPU: run more of them at once
	// than -parallel's default, the number of CPUs, unless the flag says otherwise.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", strconv.Itoa(max(8, 4*runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	if code == 0 {
		if bad := mcpclient.UntypedErrors(); len(bad) > 0 {
			fmt.Fprintf(os.Stderr, "errors returned that are not *mcpclient.Error:\n%v\n", bad)
			code = 1
		}
		// Idle pooled HTTP connections keep net/http's goroutines; they are the pool's, not ours.
		if err := goleak.Find(
			goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goroutine leak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
