package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The worker tests run this test binary again as worker processes (see TestMain) that share one
// journal and one server of the parent's. The environment tells a worker its part.
const (
	envRole   = "PGJOURNAL_ROLE" // "worker"
	envDB     = "PGJOURNAL_DB"
	envTable  = "PGJOURNAL_TABLE"
	envServer = "PGJOURNAL_SERVER"
	envName   = "PGJOURNAL_NAME"
	envCalls  = "PGJOURNAL_CALLS"
	envLease  = "PGJOURNAL_LEASE"
)

// workerConcurrency is the calls a worker has in flight at once.
const workerConcurrency = 4

// A line is what a worker prints, one JSON object a line: a call of its own and how it ended;
// a request it recovered, whoever made it, and how its recovery ended; or that its own calls
// are done.
type line struct {
	Kind    string       `json:"kind"` // "call", "recovered", "done", "fatal"
	By      string       `json:"by"`   // the worker that printed it
	Call    callArgs     `json:"call"`
	ID      mcpclient.ID `json:"id,omitzero"`
	Outcome string       `json:"outcome,omitempty"` // "answered", "unknown", "in flight", or "error: ..."
}

// callArgs are a call's arguments: the worker that made it and its number there.
type callArgs struct {
	W string `json:"w"`
	N int    `json:"n"`
}

func child(role string) int {
	if role != "worker" {
		fmt.Fprintln(os.Stderr, "unknown role", role)
		return 2
	}
	return worker()
}

// worker makes its calls through the shared journal, workerConcurrency at a time, the even ones
// idempotent; then recovers what the journal holds unresolved, again and again, resending what
// may be resent, until its standard input closes.
func worker() int {
	ctx := context.Background()
	name, url := os.Getenv(envName), os.Getenv(envServer)
	calls, _ := strconv.Atoi(os.Getenv(envCalls))
	lease, _ := time.ParseDuration(os.Getenv(envLease))
	var outMu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	say := func(l line) {
		l.By = name
		outMu.Lock()
		defer outMu.Unlock()
		enc.Encode(l)
	}
	j, err := postgres.Connect(ctx, os.Getenv(envDB), postgres.WithTable(os.Getenv(envTable)),
		postgres.WithLease(lease), postgres.WithWorker(name),
		postgres.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))))
	if err != nil {
		say(line{Kind: "fatal", Outcome: err.Error()})
		return 1
	}
	defer j.Close()
	c, err := mcpclient.Connect(ctx, &transport.HTTP{URL: url}, mcpclient.WithJournal(j), mcpclient.WithServerIdentity(url))
	if err != nil {
		say(line{Kind: "fatal", Outcome: err.Error()})
		return 1
	}
	defer c.Close()

	next := make(chan int)
	go func() {
		defer close(next)
		for n := range calls {
			next <- n
		}
	}()
	var wg sync.WaitGroup
	for range workerConcurrency {
		wg.Go(func() {
			for n := range next {
				var opts []mcpclient.CallOption
				if n%2 == 0 {
					opts = append(opts, mcpclient.WithIdempotent())
				}
				var resp mcpclient.Response
				opts = append(opts, mcpclient.WithResponse(&resp))
				_, err := c.CallTool(ctx, "book", callArgs{W: name, N: n}, opts...)
				var id mcpclient.ID
				if resp.Request != nil {
					id = resp.Request.ID()
				}
				say(line{Kind: "call", Call: callArgs{name, n}, ID: id, Outcome: outcomeOf(err)})
			}
		})
	}
	wg.Wait()
	say(line{Kind: "done"})

	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	told := map[mcpclient.ID]string{} // what this worker printed of each request it recovered
	for {
		for r, err := range c.Recover(ctx) {
			if r.Request == nil {
				say(line{Kind: "fatal", Outcome: err.Error()})
				return 1
			}
			if err == nil {
				_, err = c.Resend(ctx, r.Request)
			}
			var args struct {
				Arguments callArgs `json:"arguments"`
			}
			json.Unmarshal(r.Request.Params(), &args)
			if o := outcomeOf(err); told[r.Request.ID()] != o {
				told[r.Request.ID()] = o
				say(line{Kind: "recovered", Call: args.Arguments, ID: r.Request.ID(), Outcome: o})
			}
		}
		select {
		case <-stop:
			return 0
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "answered"
	case errors.Is(err, mcpclient.ErrOutcomeUnknown):
		return "unknown"
	case errors.Is(err, mcpclient.ErrRequestInFlight):
		return "in flight" // another worker holds it: its outcome is that worker's to learn
	}
	return "error: " + err.Error()
}

// overlapWatch serves an MCP server, counting the tools/call requests that arrive under an id
// while another request under the same id is still being served: two workers sending one id
// at once. It counts refusals of an id in flight (409) too.
type overlapWatch struct {
	h http.Handler

	mu       sync.Mutex
	inFlight map[string]int // guarded by mu
	since    map[string]time.Time
	overlaps []string // guarded by mu
	refused  int      // guarded by mu
}

func (o *overlapWatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var key string
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
			key = string(m.ID)
		}
	}
	if key != "" {
		o.mu.Lock()
		o.inFlight[key]++
		if o.inFlight[key] > 1 {
			o.overlaps = append(o.overlaps, fmt.Sprintf("%s at %s (first at %s, from %s)", key, time.Now().Format("15:04:05.000"), o.since[key].Format("15:04:05.000"), r.RemoteAddr))
		} else {
			o.since[key] = time.Now()
		}
		o.mu.Unlock()
		defer func() {
			o.mu.Lock()
			o.inFlight[key]--
			o.mu.Unlock()
		}()
	}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if sw.status == http.StatusConflict {
			o.mu.Lock()
			o.refused++
			o.mu.Unlock()
		}
	}()
	o.h.ServeHTTP(sw, r)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// A workerProc is a running worker and what it printed.
type workerProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when its output ends
	mu    sync.Mutex
	lines []timedLine // guarded by mu
	err   bytes.Buffer
}

type timedLine struct {
	line
	at time.Time
}

func (p *workerProc) printed() []timedLine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]timedLine(nil), p.lines...)
}

func startWorker(t *testing.T, name, url, table string, calls int, lease time.Duration) *workerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=worker", envDB+"="+dbURL, envTable+"="+table, envServer+"="+url,
		envName+"="+name, envCalls+"="+strconv.Itoa(calls), envLease+"="+lease.String())
	p := &workerProc{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.err
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = line{Kind: "fatal", Outcome: "printed " + sc.Text()}
			}
			p.mu.Lock()
			p.lines = append(p.lines, timedLine{l, time.Now()})
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		cmd.Wait()
	})
	return p
}

// TestWorkers runs worker processes that share the journal and a server that keeps receipts;
// kills one with SIGKILL while the server runs four of its calls, two idempotent and two not,
// after holding them past several lease renewals; starts a new worker; and checks what the
// journal promises a fleet: no call runs twice, none is lost (each that ran is answered in the
// journal or reported unknown by a recovery), and no two workers send one id at once (the
// server never sees an id arrive while it serves the same id).
func TestWorkers(t *testing.T) {
	needDB(t)
	for _, n := range []int{2, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { workers(t, n) })
	}
}

func workers(t *testing.T, n int) {
	const (
		calls = 12
		lease = 1500 * time.Millisecond
		dead  = "w0" // the worker killed
	)
	victims := map[int]bool{2: true, 3: true, 4: true, 5: true}
	var mu sync.Mutex
	runs := map[callArgs][]mcpclient.ID{} // the ids each call ran under, once each run
	arrived := make(chan int, len(victims))
	release := make(chan struct{})
	book := func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		var a callArgs
		if err := json.Unmarshal(call.Arguments, &a); err != nil {
			return nil, err
		}
		mu.Lock()
		runs[a] = append(runs[a], call.ID)
		first := len(runs[a]) == 1
		mu.Unlock()
		if a.W == dead && victims[a.N] && first {
			arrived <- a.N
			<-release
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(fmt.Sprintf("booked %s/%d", a.W, a.N))}}, nil
	}
	srv := mcptest.NewUnstartedHTTPServer(mcptest.WithTool(mcpclient.Tool{Name: "book", InputSchema: []byte(`{"type":"object"}`)}, book))
	watch := &overlapWatch{h: srv, inFlight: map[string]int{}, since: map[string]time.Time{}}
	hs := httptest.NewServer(watch)
	released := false
	defer func() {
		if !released {
			close(release)
		}
		hs.Close()
		srv.Close()
	}()
	url := hs.URL
	table := newTable(t)
	pool := newPool(t)

	procs := map[string]*workerProc{}
	for i := range n {
		name := fmt.Sprint("w", i)
		procs[name] = startWorker(t, name, url, table, calls, lease)
	}
	// The workers create the table between them: the parent opens it once they have.
	var j *postgres.Journal
	if !waitFor(10*time.Second, func() bool {
		var err error
		j, err = postgres.Connect(context.Background(), dbURL, postgres.WithTable(table), postgres.WithoutMigration())
		return err == nil
	}) {
		t.Fatal("the workers did not create the journal's table")
	}
	defer j.Close()

	for range victims {
		select {
		case <-arrived:
		case <-time.After(20 * time.Second):
			t.Fatalf("the calls to kill %s in did not all reach the server; its stderr: %s", dead, procs[dead].err.String())
		}
	}
	// Held past several renewals, while the other workers keep recovering: none may take them.
	time.Sleep(2 * lease)
	procs[dead].cmd.Process.Signal(syscall.SIGKILL)
	<-procs[dead].done
	err := procs[dead].cmd.Wait()
	killed := time.Now()
	t.Logf("killed at %s", killed.Format("15:04:05.000"))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s was not killed: %v; stderr: %s", dead, err, procs[dead].err.String())
	}
	close(release) // the server finishes the dead worker's calls, as a server does
	released = true
	procs[dead+"b"] = startWorker(t, dead+"b", url, table, calls, lease)

	// Every live worker finishes its calls, and every request of the journal that is still
	// unresolved has been reported unknown by one recovery.
	epoch := ""
	settled := func() bool {
		reported := map[mcpclient.ID]bool{}
		for name, p := range procs {
			if name == dead {
				continue
			}
			done := false
			for _, l := range p.printed() {
				done = done || l.Kind == "done"
				reported[l.ID] = reported[l.ID] || l.Kind == "recovered" && l.Outcome == "unknown"
			}
			if !done {
				return false
			}
		}
		// Read past the leases: a dead worker's request is unresolved before its lease lapses,
		// and open until it is settled.
		rows, err := pool.Query(context.Background(), "SELECT id FROM "+table+
			" WHERE superseded_by IS NULL AND (lease_token IS NOT NULL OR state IN ('pending', 'uncertain', 'conflict'))")
		if err != nil {
			return false
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return false
		}
		for _, raw := range ids {
			var id mcpclient.ID
			if id.UnmarshalJSON([]byte(raw)) != nil || !reported[id] {
				return false
			}
		}
		return true
	}
	if !waitFor(20*time.Second, settled) {
		t.Error("the journal did not settle")
	}
	for _, p := range procs {
		if p.name != dead {
			p.stdin.Close()
		}
	}
	for _, p := range procs {
		if p.name == dead {
			continue
		}
		<-p.done
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("%s: %v; stderr: %s", p.name, err, p.err.String())
		}
	}

	// What each request ended as, in the journal and by the workers' account.
	answered := map[mcpclient.ID]bool{}
	reported := map[mcpclient.ID][]timedLine{}
	ownCalls := 0
	for _, p := range procs {
		for _, l := range p.printed() {
			switch l.Kind {
			case "fatal":
				t.Errorf("%s: %s", p.name, l.Outcome)
			case "call":
				ownCalls++
				if l.Outcome != "answered" {
					t.Errorf("%s: call %d: %s", p.name, l.Call.N, l.Outcome)
				}
			case "recovered":
				reported[l.ID] = append(reported[l.ID], l)
				switch {
				case l.Call.W != dead:
					t.Errorf("%s recovered %+v, a call of a live worker", p.name, l.Call)
				case l.at.Before(killed):
					t.Errorf("%s recovered %+v while %s was alive", p.name, l.Call, dead)
				case l.Outcome != "answered" && l.Outcome != "unknown" && l.Outcome != "in flight":
					t.Errorf("%s recovered %+v: %s", p.name, l.Call, l.Outcome)
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for call, ids := range runs {
		if len(ids) > 1 {
			t.Errorf("call %+v ran %d times, under %v", call, len(ids), ids)
		}
		rec, ok, err := j.Lookup(context.Background(), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if rec.Receipts.Epoch != "" {
			epoch = rec.Receipts.Epoch
		}
		if ok && rec.State == mcpclient.StateAnswered {
			answered[ids[0]] = true
		}
		unknown := false
		for _, l := range reported[ids[0]] {
			unknown = unknown || l.Outcome == "unknown"
		}
		if !answered[ids[0]] && !unknown {
			t.Errorf("call %+v ran under %s, and neither the journal (%v, %v) nor a recovery knows its outcome", call, ids[0], rec.State, ok)
		}
	}
	// The dead worker's calls in flight: the idempotent ones are resent, and their receipts
	// answer; the others are resent only when the server declares an epoch that says the
	// receipts are those they were sent under, and are otherwise reported unknown.
	for v := range victims {
		call := callArgs{dead, v}
		ids := runs[call]
		if len(ids) != 1 {
			t.Errorf("victim %d ran %d times", v, len(ids))
			continue
		}
		want := "answered"
		if v%2 == 1 && epoch == "" {
			want = "unknown"
		}
		got := ""
		for _, l := range reported[ids[0]] {
			if l.Outcome != "in flight" {
				got = l.Outcome
			}
		}
		if got != want {
			t.Errorf("victim %d (idempotent %v): recovered as %q, want %q (epoch %q)", v, v%2 == 0, got, want, epoch)
		}
	}
	watch.mu.Lock()
	defer watch.mu.Unlock()
	if len(watch.overlaps) != 0 || watch.refused != 0 {
		t.Errorf("ids sent by two at once: %v; refused in flight: %d", watch.overlaps, watch.refused)
	}
	if t.Failed() {
		for _, p := range procs {
			t.Logf("%s's stderr:\n%s", p.name, p.err.String())
		}
		for id, ls := range reported {
			for _, l := range ls {
				t.Logf("%s: %s recovered %+v at %s: %s", id, l.By, l.Call, l.at.Format("15:04:05.000"), l.Outcome)
			}
		}
	}
	st, err := j.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for _, ls := range reported {
		for _, l := range ls {
			outcomes[l.Outcome]++
		}
	}
	t.Logf("%d workers and a replacement: %d calls of their own, %d ran, %d requests in the journal; recoveries of %d requests: %v",
		n, ownCalls, len(runs), st.Held, len(reported), outcomes)
}
