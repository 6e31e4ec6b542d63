//go:build unix

package journal_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The crash tests run this test binary again as a child process (an agent) that calls a server of
// the parent's through a journal and dies by SIGKILL at a chosen point; a second child recovers
// from the journal. The environment tells a child its part.
const (
	envRole    = "JOURNAL_CRASH_ROLE" // "agent" or "recover"
	envURL     = "JOURNAL_CRASH_URL"
	envPath    = "JOURNAL_CRASH_PATH"
	envKillAt  = "JOURNAL_CRASH_KILL_AT" // a kill point, for the agent
	envVictim  = "JOURNAL_CRASH_VICTIM"  // the call the kill point waits for
	crashCalls = 8
)

// Kill points.
const (
	// killBeforeSend: the request is in the journal; none of its bytes went out.
	killBeforeSend = "before-send"
	// killMidCall: the server runs the request; no answer came back (the parent kills).
	killMidCall = "mid-call"
	// killAfterAnswer: the answer arrived; the journal does not have it yet.
	killAfterAnswer = "after-answer"
)

func init() {
	switch os.Getenv(envRole) {
	case "agent":
		os.Exit(crashAgent())
	case "recover":
		os.Exit(crashRecover())
	}
}

// crashAgent makes crashCalls concurrent calls and is killed at the kill point of its victim.
func crashAgent() int {
	victim, _ := strconv.Atoi(os.Getenv(envVictim))
	j, err := journal.OpenFile(os.Getenv(envPath))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	tr := &killingTransport{Transport: &transport.HTTP{URL: os.Getenv(envURL)}, at: os.Getenv(envKillAt), victim: victim}
	c, err := mcpclient.Connect(ctx, tr, mcpclient.WithJournal(j), mcpclient.WithServerIdentity(os.Getenv(envURL)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var wg sync.WaitGroup
	for n := range crashCalls {
		wg.Go(func() { c.CallTool(ctx, "book", map[string]any{"n": n}) })
	}
	wg.Wait()
	return 0 // the kill point was never reached: the parent fails the test
}

// crashRecover recovers what the journal holds unresolved, resends what can be resent, and
// prints one JSON line per request: its id, its call number and how it ended.
func crashRecover() int {
	j, err := journal.OpenFile(os.Getenv(envPath))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer j.Close()
	ctx := context.Background()
	url := os.Getenv(envURL)
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: url}, mcpclient.WithJournal(j), mcpclient.WithServerIdentity(url))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	out := json.NewEncoder(os.Stdout)
	for r, err := range c.Recover(ctx) {
		if r.Request == nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		outcome := "answered"
		if err == nil {
			_, err = c.Resend(ctx, r.Request)
		}
		if errors.Is(err, mcpclient.ErrOutcomeUnknown) {
			outcome = "unknown"
		} else if err != nil {
			outcome = "error: " + err.Error()
		}
		out.Encode(crashOutcome{ID: r.Request.ID(), N: callNumber(r.Request.Params()), Outcome: outcome})
	}
	return 0
}

type crashOutcome struct {
	ID      mcpclient.ID `json:"id"`
	N       int          `json:"n"`
	Outcome string       `json:"outcome"`
}

func callNumber(params []byte) int {
	var p struct {
		Arguments struct {
			N int `json:"n"`
		} `json:"arguments"`
	}
	json.Unmarshal(params, &p)
	return p.Arguments.N
}

// killingTransport kills its own process at a kill point of the victim call.
type killingTransport struct {
	transport.Transport
	at     string
	victim int
}

func (t *killingTransport) Connect(ctx context.Context, r transport.Receiver) (transport.Conn, error) {
	conn, err := t.Transport.Connect(ctx, r)
	if err != nil {
		return nil, err
	}
	return &killingConn{Conn: conn, t: t}, nil
}

type killingConn struct {
	transport.Conn
	t *killingTransport
}

func (c *killingConn) Send(ctx context.Context, msg *transport.Message) error {
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	victim := msg.Method == "tools/call" && json.Unmarshal(msg.Frame, &m) == nil && callNumber(m.Params) == c.t.victim
	if victim && c.t.at == killBeforeSend {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	err := c.Conn.Send(ctx, msg)
	if victim && c.t.at == killAfterAnswer {
		// An HTTP POST answered with JSON is read, and handed to the client, within Send.
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return err
}

// TestCrash kills an agent with calls in flight at each kill point, restarts it, and checks what
// the journal promises: every call that ran is answered exactly once or reported unknown, none
// runs twice, and none is lost.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, at := range []string{killBeforeSend, killMidCall, killAfterAnswer} {
		t.Run(at, func(t *testing.T) { crashOnce(t, at, false) })
	}
	t.Run("mid-call/server-restarted", func(t *testing.T) { crashOnce(t, killMidCall, true) })
}

func crashOnce(t *testing.T, at string, restartServer bool) {
	const victim = 3
	var mu sync.Mutex
	runs := map[int]int{} // executions by call number
	midCall := make(chan struct{})
	release := make(chan struct{})
	tool := func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		n := callNumber([]byte(`{"arguments":` + string(call.Arguments) + `}`))
		mu.Lock()
		runs[n]++
		first := runs[n] == 1
		mu.Unlock()
		if at == killMidCall && n == victim && first {
			close(midCall)
			<-release
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(fmt.Sprint("booked ", n))}}, nil
	}
	srv := mcptest.NewHTTPServer(mcptest.WithTool(echo, tool))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "journal.db")

	agent := child(t, "agent", srv.URL, path, at, victim)
	var stderr bytes.Buffer
	agent.Stderr = &stderr
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	if at == killMidCall {
		select {
		case <-midCall:
			agent.Process.Kill()
		case <-time.After(30 * time.Second):
			agent.Process.Kill()
			t.Fatal("the victim call never reached the server")
		}
	}
	err := agent.Wait()
	close(release)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the agent was not killed: %v; stderr: %s", err, stderr.String())
	}
	if restartServer {
		srv.Server.Restart()
	}

	recovery := child(t, "recover", srv.URL, path, "", 0)
	out, err := recovery.Output()
	if err != nil {
		t.Fatalf("recovery: %v: %s", err, out)
	}
	outcomes := map[int]crashOutcome{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var o crashOutcome
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("recovery printed %q", sc.Text())
		}
		outcomes[o.N] = o
	}

	byID := map[mcpclient.ID]crashOutcome{}
	for _, o := range outcomes {
		byID[o.ID] = o
	}
	idsOf := map[int][]mcpclient.ID{} // the ids the server received each call under
	for _, req := range srv.Requests() {
		if req.RPCMethod == "tools/call" && !req.ID.IsZero() {
			for _, frame := range srv.Received(req.ID)[:1] {
				n := callNumber(paramsOf(frame))
				idsOf[n] = append(idsOf[n], req.ID)
			}
		}
	}
	j := openJournal(t, path)
	ctx := context.Background()
	mu.Lock()
	defer mu.Unlock()
	for n := range crashCalls {
		if runs[n] > 1 {
			t.Errorf("call %d ran %d times", n, runs[n])
		}
		if o, ok := outcomes[n]; ok && o.Outcome != "answered" && o.Outcome != "unknown" {
			t.Errorf("call %d: recovery ended in %s", n, o.Outcome)
		}
		if runs[n] == 0 {
			continue
		}
		// It ran: the journal holds its answer, or recovery reported it.
		known := false
		for _, id := range idsOf[n] {
			rec, ok, err := j.Lookup(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			_, reported := byID[id]
			known = known || reported || (ok && rec.State == mcpclient.StateAnswered)
		}
		if !known {
			t.Errorf("call %d ran (ids %v) and neither the journal nor the recovery knows its outcome", n, idsOf[n])
		}
	}
	for rec, err := range j.Unresolved(ctx, srv.URL) {
		if err != nil {
			t.Fatal(err)
		}
		if byID[rec.ID].Outcome != "unknown" {
			t.Errorf("request %s is unresolved after recovery, which reported %+v", rec.ID, byID[rec.ID])
		}
	}
	v, recovered := outcomes[victim]
	switch {
	case at == killBeforeSend && (!recovered || v.Outcome != "answered" || runs[victim] != 1):
		t.Errorf("the victim, killed before sending: %+v, ran %d times; want resent and answered", v, runs[victim])
	case at == killMidCall && !restartServer && (!recovered || v.Outcome != "answered"):
		t.Errorf("the victim, killed mid-call: %+v; want its receipt to answer the resend", v)
	case restartServer && (!recovered || v.Outcome != "unknown" || runs[victim] != 1):
		t.Errorf("the victim, after the server restarted: %+v, ran %d times; want unknown, run once", v, runs[victim])
	}
	t.Logf("runs %v; recovered %v", runs, outcomes)
}

func paramsOf(frame []byte) []byte {
	var m struct {
		Params json.RawMessage `json:"params"`
	}
	json.Unmarshal(frame, &m)
	return m.Params
}

func child(t *testing.T, role, url, path, at string, victim int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"="+role, envURL+"="+url, envPath+"="+path,
		envKillAt+"="+at, envVictim+"="+strconv.Itoa(victim))
	return cmd
}
