package mcpclient_test

// The processes a stdio transport starts end with the client: after Close, Detach or a failed
// Connect, neither the server nor what it started lives on.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/transport"
)

func TestSecurityStdioChildrenDoNotOutliveTheClient(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("checks processes through /proc")
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command:", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	command := func(t *testing.T, mode string) (*transport.Command, string) {
		pidFile := t.TempDir() + "/pids"
		// A race-enabled binary sleeps a second at exit unless told not to.
		env := append(os.Environ(), stdioServerEnv+"="+mode, stdioServerEnv+"_PIDS="+pidFile, "GORACE=atexit_sleep_ms=0")
		return &transport.Command{Path: exe, Env: env}, pidFile
	}
	assertGone := func(t *testing.T, pidFile string, wantGrandchild bool) {
		t.Helper()
		pids := pidsIn(t, pidFile)
		if len(pids["server"]) == 0 || (wantGrandchild && len(pids["grandchild"]) == 0) {
			t.Fatalf("pids %v", pids)
		}
		for what, list := range pids {
			for _, pid := range list {
				waitFor(t, fmt.Sprintf("%s %d to end", what, pid), func() bool { return gone(pid) })
			}
		}
	}
	for _, end := range []string{"Close", "Detach"} {
		t.Run(end, func(t *testing.T) {
			cmd, pidFile := command(t, "ok")
			c := connect(t, cmd)
			if _, err := c.CallTool(testCtx(t), "spawn", nil); err != nil {
				t.Fatal(err)
			}
			pids := pidsIn(t, pidFile)
			if gone(pids["grandchild"][0]) {
				t.Fatal("the grandchild is not running")
			}
			if end == "Close" {
				c.Close()
			} else {
				c.Detach() // stdio has no session to leave behind: the process ends all the same
			}
			assertGone(t, pidFile, true)
		})
	}
	t.Run("failed connect", func(t *testing.T) {
		cmd, pidFile := command(t, "bad-version")
		_, err := mcpclient.Connect(testCtx(t), cmd, noWait)
		if !errors.Is(err, mcpclient.ErrUnsupportedVersion) {
			t.Fatalf("error %v, want ErrUnsupportedVersion", err)
		}
		assertGone(t, pidFile, false)
		// The transport is usable for a server that speaks a known revision.
		good, _ := command(t, "ok")
		stillUsable(t, connect(t, good))
	})
}

// stdioServerEnv makes the test binary run as a stdio MCP server (see runStdioServer).
const stdioServerEnv = "MCPCLIENT_SECURITY_STDIO_SERVER"

func init() {
	if mode := os.Getenv(stdioServerEnv); mode != "" {
		runStdioServer(mode, os.Getenv(stdioServerEnv+"_PIDS"))
		os.Exit(0)
	}
}

// runStdioServer answers initialize (with a revision nobody speaks if mode is "bad-version"),
// ping, and tools/call spawn, which starts a `sleep 300` in the server's process group. It
// appends "server <pid>" and "grandchild <pid>" lines to pidFile, and exits at the end of stdin.
func runStdioServer(mode, pidFile string) {
	note := func(what string, pid int) {
		f, err := os.OpenFile(pidFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%s %d\n", what, pid)
			f.Close()
		}
	}
	note("server", os.Getpid())
	version := "2025-11-25"
	if mode == "bad-version" {
		version = "1999-01-01"
	}
	testpeer.Serve(os.Stdin, os.Stdout, func(p *testpeer.Conn, m testpeer.Msg) bool {
		if m.Method != "tools/call" {
			return false
		}
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			p.Send(testpeer.Error(m.ID, -32603, "spawn failed"))
			return true
		}
		note("grandchild", cmd.Process.Pid)
		p.Send(testpeer.Result(m.ID, testpeer.ToolResult))
		return true
	}, testpeer.WithInit(`{"protocolVersion":"`+version+`","capabilities":{},"serverInfo":{"name":"stdio","version":"0"}}`))
}

// pidsIn reads the pids runStdioServer noted.
func pidsIn(t *testing.T, pidFile string) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pids := make(map[string][]int)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		what, n, _ := strings.Cut(line, " ")
		pid, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("pid file line %q", line)
		}
		pids[what] = append(pids[what], pid)
	}
	return pids
}

// gone reports whether pid no longer runs: it does not exist, or it is a zombie (a killed
// grandchild waits for init to reap it).
func gone(pid int) bool {
	if p, err := os.FindProcess(pid); err != nil || p.Signal(syscall.Signal(0)) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] == "Z"
}
