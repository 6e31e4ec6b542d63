package interop_test

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
	mgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/pgtest"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/receipts/postgres"
	"github.com/northstar-mcp/mcpclient/transport"
)

// TestFleet runs server processes of its own: the test binary again, told by these variables
// what to serve (TestMain hands over to serveFleetMember when fleetEnvRole is set).
const (
	fleetEnvRole  = "MCPCLIENT_INTEROP_FLEET_ROLE" // "server"
	fleetEnvSDK   = "MCPCLIENT_INTEROP_FLEET_SDK"  // which SDK's stateless handler: fleetGoSDK or fleetMCPGo
	fleetEnvDB    = "MCPCLIENT_INTEROP_FLEET_DB"
	fleetEnvTable = "MCPCLIENT_INTEROP_FLEET_TABLE"
	fleetEnvExecs = "MCPCLIENT_INTEROP_FLEET_EXECS" // the table where the tool records its executions
	fleetEnvAddr  = "MCPCLIENT_INTEROP_FLEET_ADDR"  // where to listen: 127.0.0.1:0 at first, the same port on restart
)

// fleetEnv names the file to which TestFleet appends its rows, or why it skipped (see run.sh).
const fleetEnv = "MCPCLIENT_INTEROP_FLEET"

const (
	fleetGoSDK = "go-sdk"
	fleetMCPGo = "mcp-go"
)

// fleetTool is the fleet's unsafe tool: it declares no idempotentHint, so the client never
// re-issues it under a new id, and only receipts keep a resend from running it twice.
const fleetTool = "book"

type fleetArgs struct {
	N       int `json:"n"`
	DelayMs int `json:"delayMs"`
}

// fleetLease is the lease of the fleet's middleware: short, so that the claims of a killed
// process lapse soon.
const fleetLease = time.Second

// headerRequestID carries the JSON-RPC id of a request from stampRequestID to the tool, which
// neither SDK hands its handlers, through the HTTP headers both do hand them.
const headerRequestID = "X-Interop-Fleet-Request-Id"

// stampRequestID sets headerRequestID to the compact JSON text of the id of the request in the
// body, and removes whatever a client sent under that name.
func stampRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(headerRequestID)
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				ID json.RawMessage `json:"id"`
			}
			var id bytes.Buffer
			if json.Unmarshal(body, &msg) == nil && len(msg.ID) > 0 && json.Compact(&id, msg.ID) == nil {
				r.Header.Set(headerRequestID, id.String())
			}
		}
		next.ServeHTTP(w, r)
	})
}

// fleetRecorder records the executions of the tool in the shared database, when each starts
// and when it ends, so that executions are counted across processes.
type fleetRecorder struct {
	pool  *pgxpool.Pool
	execs string
	pid   int
}

// book is the tool's body. Its records outlive a cancelled call, so that what the table says
// ran did run, as long as the process lives.
func (rec *fleetRecorder) book(ctx context.Context, requestID string, args fleetArgs) (string, error) {
	ctx = context.WithoutCancel(ctx)
	if requestID == "" {
		return "", errors.New("no request id")
	}
	if _, err := rec.pool.Exec(ctx, `INSERT INTO `+rec.execs+` (request_id, n, pid) VALUES ($1, $2, $3)`, requestID, args.N, rec.pid); err != nil {
		return "", err
	}
	time.Sleep(time.Duration(args.DelayMs) * time.Millisecond)
	if _, err := rec.pool.Exec(ctx, `UPDATE `+rec.execs+` SET finished = true WHERE request_id = $1 AND pid = $2`, requestID, rec.pid); err != nil {
		return "", err
	}
	return fmt.Sprintf("booked %d", args.N), nil
}

// fleetGoSDKHandler is go-sdk's Streamable HTTP handler, stateless: a fleet without affinity
// cannot share the SDK's in-process sessions.
func fleetGoSDKHandler(rec *fleetRecorder) (http.Handler, func()) {
	s := mcp.NewServer(&mcp.Implementation{Name: "interop-fleet-gosdk", Version: "1.0.0"}, nil)
	destructive := true
	mcp.AddTool(s, &mcp.Tool{Name: fleetTool, Description: "Books; not safe to repeat.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		func(ctx context.Context, req *mcp.CallToolRequest, in fleetArgs) (*mcp.CallToolResult, any, error) {
			var id string
			if req.Extra != nil {
				id = req.Extra.Header.Get(headerRequestID)
			}
			text, err := rec.book(ctx, id, in)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	return h, func() {
		for ss := range s.Sessions() {
			ss.Close()
		}
	}
}

// fleetMCPGoHandler is mcp-go's Streamable HTTP server, stateless.
func fleetMCPGoHandler(rec *fleetRecorder) (http.Handler, func()) {
	s := mcpgoserver.NewMCPServer("interop-fleet-mcpgo", "1.0.0", mcpgoserver.WithToolCapabilities(false))
	s.AddTool(mgo.NewTool(fleetTool, mgo.WithDescription("Books; not safe to repeat."),
		mgo.WithNumber("n", mgo.Required()), mgo.WithNumber("delayMs"),
		mgo.WithDestructiveHintAnnotation(true), mgo.WithIdempotentHintAnnotation(false)),
		func(ctx context.Context, req mgo.CallToolRequest) (*mgo.CallToolResult, error) {
			text, err := rec.book(ctx, req.Header.Get(headerRequestID), fleetArgs{N: req.GetInt("n", -1), DelayMs: req.GetInt("delayMs", 0)})
			if err != nil {
				return nil, err
			}
			return mgo.NewToolResultText(text), nil
		})
	h := mcpgoserver.NewStreamableHTTPServer(s, mcpgoserver.WithStateLess(true))
	return h, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h.Shutdown(ctx)
	}
}

// serveFleetMember is a server process of the fleet: one SDK's stateless handler wrapped by
// receipts.HTTP over the shared store, serving until its stdin closes, or until it is killed.
func serveFleetMember() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "fleet member:", err)
		return 1
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(fleetEnvDB))
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	store, err := postgres.New(ctx, pool, postgres.Options{Table: os.Getenv(fleetEnvTable)})
	if err != nil {
		return fail(err)
	}
	defer store.Close()
	rec := &fleetRecorder{pool: pool, execs: os.Getenv(fleetEnvExecs), pid: os.Getpid()}
	var inner http.Handler
	var closeInner func()
	switch sdk := os.Getenv(fleetEnvSDK); sdk {
	case fleetGoSDK:
		inner, closeInner = fleetGoSDKHandler(rec)
	case fleetMCPGo:
		inner, closeInner = fleetMCPGoHandler(rec)
	default:
		return fail(fmt.Errorf("%s=%q: want %s or %s", fleetEnvSDK, sdk, fleetGoSDK, fleetMCPGo))
	}
	defer closeInner()
	h := receipts.HTTP(stampRequestID(inner), receipts.Options{Store: store, Lease: fleetLease, Wait: 20 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	ln, err := net.Listen("tcp", os.Getenv(fleetEnvAddr))
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

// A fleetMember is a running server process of the fleet.
type fleetMember struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	pid   int
}

func startFleetMember(addr string, env []string) (*fleetMember, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), fleetEnvRole+"=server", fleetEnvAddr+"="+addr), env...)
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
	return &fleetMember{cmd: cmd, stdin: stdin, addr: strings.TrimSpace(strings.TrimPrefix(line, "listening ")), pid: cmd.Process.Pid}, nil
}

// stop ends the process gently: it closes its listener and exits.
func (m *fleetMember) stop() {
	m.stdin.Close()
	m.cmd.Wait()
}

// kill ends it as a crash would: SIGKILL, mid-handler.
func (m *fleetMember) kill() {
	m.cmd.Process.Kill()
	m.cmd.Wait()
}

// roundRobinProxy is a load balancer in front of the fleet without any affinity: each request
// goes to the next process. It loses the answer of every lossEvery-th tools/call after the
// handler ran, as a proxy whose connection to the client breaks at the worst moment; a process
// that is down gets 502.
type roundRobinProxy struct {
	backends  []string
	lossEvery int64
	client    *http.Client

	next  atomic.Uint64
	calls atomic.Int64
	lost  atomic.Int64
}

func (p *roundRobinProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		// No standalone event streams through this proxy: the client does without them.
		http.Error(w, "no event stream here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	backend := p.backends[p.next.Add(1)%uint64(len(p.backends))]
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

// recordFleet logs one line and appends a row to $fleetEnv: the variant and its counts, or
// "skipped" and why.
func recordFleet(t *testing.T, fields ...string) {
	t.Helper()
	for i, f := range fields {
		fields[i] = strings.Join(strings.Fields(f), " ") // one line, no tabs: run.sh splits on them
	}
	t.Logf("FLEET %s", strings.Join(fields, " | "))
	path := os.Getenv(fleetEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("fleet file: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, strings.Join(fields, "\t"))
}

// TestFleet: three server processes, each one SDK's stateless Streamable HTTP handler wrapped
// by receipts.HTTP over a store in a shared PostgreSQL, behind a round-robin proxy that loses
// answers after the handler ran; one of them is killed mid-handler and restarted on its port.
// The client calls a tool that is not safe to repeat, many times concurrently. Every request
// runs at most once across the fleet; every call is answered, but for those whose handler ran in
// the killed process, which end ErrOutcomeUnknown; and every request that ran has its receipt.
//
// It needs a PostgreSQL (internal/pgtest): the one MCPCLIENT_PG_URL names, or one it starts from
// a local installation; without either it skips.
func TestFleet(t *testing.T) {
	noOrphans(t)
	srv, err := pgtest.Start("interop_fleet")
	if err != nil {
		if errors.Is(err, pgtest.ErrNoBinaries) || pgtest.Skip() {
			reason := fmt.Sprintf("no PostgreSQL: install one (apt-get install -y postgresql) or set %s: %v", pgtest.EnvURL, err)
			recordFleet(t, "skipped", reason)
			t.Skip(reason)
		}
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	pool, err := pgxpool.New(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, sdk := range []struct{ name, role string }{
		{gosdkServerName + " stateless", fleetGoSDK},
		{mcpgoServerName + " stateless", fleetMCPGo},
	} {
		t.Run(sdk.name, func(t *testing.T) { testFleet(t, srv.URL, pool, sdk.name, sdk.role) })
	}
}

var fleetTables atomic.Int64

func testFleet(t *testing.T, dbURL string, pool *pgxpool.Pool, name, sdk string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	table := fmt.Sprintf("interop_fleet_%d_%d", os.Getpid(), fleetTables.Add(1))
	execs := table + "_execs"
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), fmt.Sprintf(`DROP TABLE IF EXISTS %[1]s, %[1]s_counts, %[1]s_epoch, %[2]s;
			DROP FUNCTION IF EXISTS %[1]s_count, %[1]s_claim, %[1]s_release, %[1]s_prune`, table, execs)); err != nil {
			t.Error(err)
		}
	})
	if _, err := pool.Exec(ctx, `CREATE TABLE `+execs+` (request_id text NOT NULL, n int NOT NULL, pid int NOT NULL,
		finished boolean NOT NULL DEFAULT false)`); err != nil {
		t.Fatal(err)
	}
	// The schema exists before the processes start, as a deployment's migration would make it.
	schemaStore, err := postgres.New(ctx, pool, postgres.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	schemaStore.Close()

	env := []string{fleetEnvSDK + "=" + sdk, fleetEnvDB + "=" + dbURL, fleetEnvTable + "=" + table, fleetEnvExecs + "=" + execs}
	var mu sync.Mutex // guards members
	members := make([]*fleetMember, 3)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range members {
			if m != nil {
				m.stop()
			}
		}
	}()
	for i := range members {
		m, err := startFleetMember("127.0.0.1:0", env)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		members[i] = m
		mu.Unlock()
	}
	proxy := &roundRobinProxy{lossEvery: 4, client: &http.Client{Transport: &http.Transport{}}}
	for _, m := range members {
		proxy.backends = append(proxy.backends, m.addr)
	}
	defer proxy.client.CloseIdleConnections()
	front := httptest.NewServer(proxy)
	defer front.Close()

	clientPool := &http.Transport{}
	defer clientPool.CloseIdleConnections()
	cl, err := mcpclient.Connect(ctx, &transport.HTTP{URL: front.URL, Client: &http.Client{Transport: clientPool}},
		mcpclient.WithProtocolVersion(mcpclient.ProtocolVersion20251125),
		mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
			MaxAttempts:    60,
			NewBackOff:     func() backoff.BackOff { return backoff.NewConstantBackOff(50 * time.Millisecond) },
			MaxServerDelay: 100 * time.Millisecond,
		}))
	if err != nil {
		t.Fatalf("Connect: %s", errorChain(err))
	}
	defer cl.Close()
	if d, ok := cl.ServerCapabilities().RequestReceipts(); !ok || d.Scope != mcpclient.ReceiptScopeStore {
		t.Fatalf("the fleet declares %+v (%v), want scope store", d, ok)
	}

	// The killer: once the victim runs two handlers, SIGKILL it, and restart it on its port. If
	// the calls end first, it kills nothing, and the checks say the test proved nothing.
	const victim = 1
	var killedPID atomic.Int64
	killed, callsDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(killed)
		mu.Lock()
		target := members[victim]
		mu.Unlock()
		for {
			var running int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+execs+` WHERE pid = $1 AND NOT finished`, target.pid).Scan(&running); err != nil {
				t.Error(err)
				return
			}
			if running >= 2 {
				break
			}
			select {
			case <-callsDone:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		mu.Lock()
		members[victim] = nil
		mu.Unlock()
		target.kill()
		killedPID.Store(int64(target.pid))
		time.Sleep(300 * time.Millisecond) // down for a while: the proxy answers 502
		for range 50 {
			m, err := startFleetMember(target.addr, env)
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

	const calls, concurrency = 48, 10
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
			res, err := cl.CallTool(ctx, fleetTool, fleetArgs{N: i, DelayMs: 300}, mcpclient.WithResponse(&resp))
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
	close(callsDone)
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
			if err := rows.Scan(&what, &n); err != nil {
				t.Error(err)
			}
			t.Errorf("%s executed %d times", what, n)
		}
		rows.Close()
	}
	// Nothing lost: every request that ran has its receipt, settled when its handler finished,
	// but in the killed process, which may have died between the two.
	var executions, unreceipted, unsettled int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE r.id IS NULL),
		count(*) FILTER (WHERE e.finished AND r.settled_at IS NULL AND e.pid <> $1)
		FROM `+execs+` e LEFT JOIN `+table+` r ON r.id = e.request_id`, killedPID.Load()).Scan(&executions, &unreceipted, &unsettled); err != nil {
		t.Fatal(err)
	}
	if unreceipted != 0 || unsettled != 0 {
		t.Errorf("%d executions without a receipt, %d finished outside the killed process whose receipt is not settled", unreceipted, unsettled)
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
			// An answer is the outcome of the one execution of its id, which finished.
			var finished int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+execs+` WHERE request_id = $1 AND n = $2 AND finished`, o.id, o.n).Scan(&finished); err != nil || finished != 1 {
				t.Errorf("call %d (%s) answered, but %d finished executions of it are recorded (%v)", o.n, o.id, finished, err)
			}
		case errors.Is(o.err, mcpclient.ErrOutcomeUnknown):
			unknown++
			// Only where the handler's process died: its claim lapsed without a response, and
			// whatever ran of it ran in the killed process (which may have finished the
			// handler, but not settled its response, when the kill came).
			var settled bool
			if err := pool.QueryRow(ctx, `SELECT settled_at IS NOT NULL FROM `+table+` WHERE id = $1`, o.id).Scan(&settled); err != nil || settled {
				t.Errorf("call %d (%s) ended %v, but its receipt is settled (%v, %v)", o.n, o.id, o.err, settled, err)
				continue
			}
			var elsewhere int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+execs+` WHERE request_id = $1 AND pid <> $2`, o.id, killedPID.Load()).Scan(&elsewhere); err != nil || elsewhere != 0 {
				t.Errorf("call %d (%s) ended %v, but ran outside the killed process (%d times, %v)", o.n, o.id, o.err, elsewhere, err)
			}
		default:
			t.Errorf("call %d: %s", o.n, errorChain(o.err))
		}
	}
	var diedMidHandler int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+execs+` WHERE pid = $1 AND NOT finished`, killedPID.Load()).Scan(&diedMidHandler); err != nil {
		t.Error(err)
	}
	count := func(label string, n int64) string { return fmt.Sprintf("%s %d", label, n) }
	recordFleet(t, name, count("calls", calls), count("executions", int64(executions)), count("answered", int64(answered)),
		count("replayed", int64(replayed)), count("unknown", int64(unknown)), count("answers lost", proxy.lost.Load()),
		count("handlers killed", int64(diedMidHandler)))
	if diedMidHandler == 0 || unknown == 0 {
		t.Errorf("the kill hit no handler (%d died, %d unknown): the test proved nothing about it", diedMidHandler, unknown)
	}
	if proxy.lost.Load() == 0 || replayed == 0 {
		t.Errorf("%d answers lost, %d replayed: the test proved nothing about lost answers", proxy.lost.Load(), replayed)
	}
}
