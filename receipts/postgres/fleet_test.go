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
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/receipts/postgres"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The fleet test runs server processes of its own: the test binary again, told by these
// variables what to serve.
const (
	envRole     = "RECEIPTS_PG_ROLE" // "server"
	envDB       = "RECEIPTS_PG_DB"
	envTable    = "RECEIPTS_PG_TABLE"
	envExecs    = "RECEIPTS_PG_EXECS" // the table where the tool records its executions
	envAddr     = "RECEIPTS_PG_ADDR"  // where to listen: 127.0.0.1:0 at first, the same port on restart
	envVersions = "RECEIPTS_PG_VERSIONS"
)

// bookTool is not safe to repeat: it has no idempotentHint, so the client never re-issues it
// under a new id, and only receipts keep a resend from running it twice.
var bookTool = mcpclient.Tool{Name: "book"}

type bookArgs struct {
	N     int `json:"n"`
	Delay int `json:"delayMs"`
}

// fleetLease is the lease of the fleet's middleware: short, so that the claims of a killed
// process lapse soon.
const fleetLease = time.Second

// serveFleetMember is a server process of the fleet: mcptest in ModeNone (a server that keeps no
// receipts, standing for any SDK's) wrapped by receipts.HTTP over the shared store, serving
// Streamable HTTP until its stdin closes, or until it is killed. Its tool records each execution
// in the database, when it starts and when it ends, so that executions are counted across
// processes.
func serveFleetMember() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "fleet member:", err)
		return 1
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(envDB))
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	store, err := postgres.New(ctx, pool, postgres.Options{Table: os.Getenv(envTable)})
	if err != nil {
		return fail(err)
	}
	defer store.Close()
	execs, pid := os.Getenv(envExecs), os.Getpid()
	book := func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		var args bookArgs
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return nil, err
		}
		id := call.ID.JSON()
		if _, err := pool.Exec(ctx, `INSERT INTO `+execs+` (request_id, n, pid) VALUES ($1, $2, $3)`, id, args.N, pid); err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(args.Delay) * time.Millisecond)
		if _, err := pool.Exec(ctx, `UPDATE `+execs+` SET finished = true WHERE request_id = $1 AND pid = $2`, id, pid); err != nil {
			return nil, err
		}
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent(fmt.Sprintf("booked %d", args.N))}}, nil
	}
	inner := mcptest.NewUnstartedHTTPServer(mcptest.WithMode(mcptest.ModeNone),
		mcptest.WithProtocolVersions(strings.Split(os.Getenv(envVersions), ",")...), mcptest.WithTool(bookTool, book))
	defer inner.Close()
	h := receipts.HTTP(inner, receipts.Options{Store: store, Lease: fleetLease, Wait: 20 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", os.Getenv(envAddr))
	if err != nil {
		return fail(err)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	srv := &http.Server{Handler: h}
	go func() {
		io.Copy(io.Discard, os.Stdin) // the test closes it to stop the process
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fail(err)
	}
	return 0
}

// A member is a running server process of the fleet.
type member struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	pid   int
}

func startMember(t *testing.T, addr string, env []string) (*member, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), envRole+"=server", envAddr+"="+addr), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("fleet member did not start: %v", err)
	}
	return &member{cmd: cmd, stdin: stdin, addr: strings.TrimSpace(strings.TrimPrefix(line, "listening ")), pid: cmd.Process.Pid}, nil
}

// stop ends the process gently: it closes its listener and exits.
func (m *member) stop() {
	m.stdin.Close()
	m.cmd.Wait()
}

// kill ends it as a crash would: SIGKILL, mid-handler.
func (m *member) kill() {
	m.cmd.Process.Kill()
	m.cmd.Wait()
}

// fleetProxy is a round-robin load balancer in front of the fleet, without affinity but for
// sessions (a session lives in the process that opened it, as in most SDKs' servers). It loses
// the answer of every lossEvery-th tools/call after the handler ran, as a proxy whose connection
// to the client breaks at the worst moment; a process that is down gets 502.
type fleetProxy struct {
	backends  []string
	lossEvery int64
	client    *http.Client

	next        atomic.Uint64
	nextSession atomic.Uint64
	calls       atomic.Int64
	lost        atomic.Int64

	mu       sync.Mutex
	sessions map[string]string // session id -> backend
}

func (p *fleetProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		// No standalone event streams through this proxy: the client does without them.
		http.Error(w, "no event stream here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	next := &p.next
	if bytes.Contains(body, []byte(`"initialize"`)) {
		// Sessions opened in turn: a client's other requests without a session (a discovery it
		// tries first) must not bring every session to the same process.
		next = &p.nextSession
	}
	backend := p.backends[next.Add(1)%uint64(len(p.backends))]
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		p.mu.Lock()
		if b, ok := p.sessions[sid]; ok {
			backend = b
		}
		p.mu.Unlock()
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+backend+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, "bad gateway: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, "bad gateway: "+err.Error(), http.StatusBadGateway)
		return
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		p.mu.Lock()
		p.sessions[sid] = backend
		p.mu.Unlock()
	}
	if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(answer, []byte(`booked`)) &&
		p.calls.Add(1)%p.lossEvery == 0 {
		p.lost.Add(1)
		panic(http.ErrAbortHandler) // the tool ran; its answer never reaches the client
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// TestFleet: three server processes share the store behind a round-robin proxy that loses
// answers after the handler ran, and one of them is killed mid-handler and restarted. The client
// calls a tool that is not safe to repeat, many times concurrently. Every request runs at most
// once across the fleet; every call is answered, but for those whose handler ran in the killed
// process, which end ErrOutcomeUnknown; and every request that ran has its receipt.
func TestFleet(t *testing.T) {
	for _, c := range []struct {
		name     string
		versions []string
	}{
		{"stateless revision", []string{mcpclient.ProtocolVersion20260728, mcpclient.ProtocolVersion20251125}},
		{"session revision", []string{mcpclient.ProtocolVersion20251125}},
	} {
		t.Run(c.name, func(t *testing.T) { testFleet(t, c.versions) })
	}
}

func testFleet(t *testing.T, versions []string) {
	table, execs := newTable(t), newTable(t)+"_execs"
	pool := newPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+execs+` (request_id text NOT NULL, n int NOT NULL, pid int NOT NULL,
		finished boolean NOT NULL DEFAULT false)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+execs) })
	// The schema exists before the processes start, as a deployment's migration would make it.
	newStore(t, pool, postgres.Options{Table: table})

	env := []string{envDB + "=" + dbURL, envTable + "=" + table, envExecs + "=" + execs, envVersions + "=" + strings.Join(versions, ",")}
	var mu sync.Mutex // guards members
	members := make([]*member, 3)
	for i := range members {
		m, err := startMember(t, "127.0.0.1:0", env)
		if err != nil {
			t.Fatal(err)
		}
		members[i] = m
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range members {
			if m != nil {
				m.stop()
			}
		}
	}()
	proxy := &fleetProxy{lossEvery: 4, client: &http.Client{Transport: &http.Transport{}}, sessions: map[string]string{}}
	for _, m := range members {
		proxy.backends = append(proxy.backends, m.addr)
	}
	defer proxy.client.CloseIdleConnections()
	front := httptest.NewServer(proxy)
	defer front.Close()

	policy := mcpclient.RetryPolicy{
		MaxAttempts:    60,
		NewBackOff:     func() backoff.BackOff { return backoff.NewConstantBackOff(50 * time.Millisecond) },
		MaxServerDelay: 100 * time.Millisecond,
	}
	// Several clients: in a session revision each session lives in one process, so that one
	// client alone would keep one process busy.
	clients := make([]*mcpclient.Client, 6)
	for i := range clients {
		cl, err := mcpclient.Connect(ctx, &transport.HTTP{URL: front.URL}, mcpclient.WithRetryPolicy(policy))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		caps := cl.ServerCapabilities()
		if d, ok := caps.RequestReceipts(); !ok || string(d.Scope) != string(receipts.ScopeStore) {
			t.Fatalf("the fleet declares %+v (%v), want scope store", d, ok)
		}
		clients[i] = cl
	}

	// The killer: once the victim runs two handlers, SIGKILL it, and restart it on its port.
	victim := 1
	var killedPID atomic.Int64
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for ctx.Err() == nil {
			var running int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+execs+` WHERE pid = $1 AND NOT finished`, members[victim].pid).Scan(&running); err != nil {
				t.Error(err)
				return
			}
			if running >= 2 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		old := members[victim]
		members[victim] = nil
		mu.Unlock()
		old.kill()
		killedPID.Store(int64(old.pid))
		time.Sleep(300 * time.Millisecond) // down for a while: the proxy answers 502
		for range 50 {
			m, err := startMember(t, old.addr, env)
			if err == nil {
				mu.Lock()
				members[victim] = m
				mu.Unlock()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Error("the killed member did not restart")
	}()

	const calls, concurrency = 60, 12
	type outcome struct {
		n        int
		id       string
		text     string
		replayed bool
		err      error
	}
	outcomes := make([]outcome, calls)
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var resp mcpclient.Response
			res, err := clients[i%len(clients)].CallTool(ctx, bookTool.Name, bookArgs{N: i, Delay: 300}, mcpclient.WithResponse(&resp))
			o := outcome{n: i, err: err}
			if err == nil {
				o.id, o.text, o.replayed = resp.Request.ID().JSON(), res.Text(), resp.Replayed
			} else if e := (*mcpclient.Error)(nil); errors.As(err, &e) && e.Request != nil {
				o.id = e.Request.ID().JSON()
			}
			outcomes[i] = o
		})
	}
	wg.Wait()
	<-killed
	if t.Failed() {
		return
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second) // for the checks
	defer cancel()

	// At most one execution per request id across the fleet, and no call ran under two ids.
	for _, q := range []string{
		`SELECT request_id, count(*) FROM ` + execs + ` GROUP BY request_id HAVING count(*) > 1`,
		`SELECT n::text, count(*) FROM ` + execs + ` GROUP BY n HAVING count(*) > 1`,
	} {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var what string
			var n int
			rows.Scan(&what, &n)
			t.Errorf("%s executed %d times", what, n)
		}
		rows.Close()
	}
	// Nothing lost: every request that ran has its receipt, settled when its handler finished,
	// unless the kill came between the handler's end and the settlement: that receipt is in
	// doubt, as it should be.
	var unreceipted, unsettled int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE r.id IS NULL), count(*) FILTER (WHERE e.finished AND r.settled_at IS NULL AND e.pid <> $1)
		FROM `+execs+` e LEFT JOIN `+table+` r ON r.id = e.request_id`, killedPID.Load()).Scan(&unreceipted, &unsettled); err != nil {
		t.Fatal(err)
	}
	if unreceipted != 0 || unsettled != 0 {
		t.Errorf("%d executions without a receipt, %d finished ones whose receipt is not settled", unreceipted, unsettled)
	}

	var answered, unknown, replayed int
	for _, o := range outcomes {
		switch {
		case o.err == nil:
			answered++
			if o.replayed {
				replayed++
			}
			if o.text != fmt.Sprintf("booked %d", o.n) {
				t.Errorf("call %d answered %q", o.n, o.text)
			}
		case errors.Is(o.err, mcpclient.ErrOutcomeUnknown):
			unknown++
			// Only where the handler's process died: its claim lapsed without a response, and
			// whatever ran of it ran in the killed process (finished or not: the kill may come
			// after the handler's end and before its response was settled).
			var settled bool
			if err := pool.QueryRow(ctx, `SELECT settled_at IS NOT NULL FROM `+table+` WHERE id = $1`, o.id).Scan(&settled); err != nil || settled {
				t.Errorf("call %d (%s) ended %v, but its receipt is settled (%v, %v)", o.n, o.id, o.err, settled, err)
				continue
			}
			var elsewhere int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+execs+` WHERE request_id = $1 AND pid <> $2`, o.id, killedPID.Load()).Scan(&elsewhere); err != nil || elsewhere != 0 {
				t.Errorf("call %d (%s) ended %v, but ran outside the killed process (%d, %v)", o.n, o.id, o.err, elsewhere, err)
			}
		default:
			t.Errorf("call %d: %v", o.n, o.err)
		}
	}
	var diedMidHandler int
	pool.QueryRow(ctx, `SELECT count(*) FROM `+execs+` WHERE pid = $1 AND NOT finished`, killedPID.Load()).Scan(&diedMidHandler)
	t.Logf("%d calls: %d answered (%d replayed), %d outcome unknown; %d answers lost by the proxy; %d handlers died with the killed process",
		calls, answered, replayed, unknown, proxy.lost.Load(), diedMidHandler)
	if diedMidHandler == 0 || unknown == 0 {
		t.Errorf("the kill hit no handler (%d died, %d unknown): the test proved nothing about it", diedMidHandler, unknown)
	}
	if proxy.lost.Load() == 0 || replayed == 0 {
		t.Errorf("%d answers lost, %d replayed: the test proved nothing about lost answers", proxy.lost.Load(), replayed)
	}
}
