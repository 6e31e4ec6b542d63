package postgres_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
)

// A proxy forwards connections on loopback to the test database and can stop forwarding: while
// it is paused, what is sent either way is held, neither delivered nor refused, as by a network
// that drops everything.
type proxy struct {
	l               net.Listener
	network, target string
	done            chan struct{} // closed by close
	wg              sync.WaitGroup

	mu     sync.Mutex
	paused chan struct{}     // guarded by mu; closed on resume, nil while forwarding
	conns  map[net.Conn]bool // guarded by mu
}

// startProxy starts a proxy to the database of dbURL, closed after t.
func startProxy(t *testing.T) *proxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{network: "tcp", target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		done: make(chan struct{}), conns: map[net.Conn]bool{}}
	if filepath.IsAbs(cfg.Host) {
		p.network, p.target = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	if p.l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// pool returns a pool on the database through the proxy, closed after t.
func (p *proxy) pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	addr := p.l.Addr().(*net.TCPAddr)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = addr.IP.String(), uint16(addr.Port), nil
	cfg.ConnConfig.TLSConfig = nil
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.resume() // so that the pool's goodbyes go through
		pool.Close()
	})
	return pool
}

func (p *proxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == nil {
		p.paused = make(chan struct{})
	}
}

func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
}

// gate waits while the proxy is paused; false once it is closed.
func (p *proxy) gate() bool {
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if paused != nil {
		select {
		case <-paused:
		case <-p.done:
		}
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		c.Close()
		return false
	default:
	}
	p.conns[c] = true
	return true
}

func (p *proxy) accept() {
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		p.wg.Go(func() {
			defer client.Close()
			if !p.gate() {
				return
			}
			server, err := net.Dial(p.network, p.target)
			if err != nil || !p.track(server) {
				return
			}
			defer server.Close()
			var pipes sync.WaitGroup
			pipes.Go(func() { p.pipe(server, client) })
			pipes.Go(func() { p.pipe(client, server) })
			pipes.Wait()
		})
	}
}

// pipe copies from src to dst while the gate lets it, and closes both when either ends.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	close(p.done)
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.l.Close()
	p.wg.Wait()
}

// A Settle returns at once when the database cannot be reached: its write gives up within the
// lease, counted and logged, and leaves the request open under a lease that lapses, for another
// worker to recover. Close waits for the write, and no longer than it takes.
func TestSettleUnreachable(t *testing.T) {
	table := newTable(t)
	p := startProxy(t)
	const lease = time.Second
	j, err := postgres.Open(context.Background(), p.pool(t), postgres.WithTable(table), postgres.WithLease(lease), postgres.WithWorker("cut"))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	other := open(t, table, postgres.WithWorker("other"))
	c := claim(t, j, record("x", "1"))

	p.pause()
	start := time.Now()
	c.Settle(mcpclient.StateAnswered, true, 1)
	if d := time.Since(start); d > lease/10 {
		t.Fatalf("Settle took %v with the database unreachable", d)
	}
	if !waitFor(3*lease, func() bool { return len(unresolved(t, other, "srv")) == 1 }) {
		t.Fatal("the request whose settle was lost is not recovered once its lease lapsed")
	}
	if got, _ := lookup(t, other, "x"); !got.Open || got.State != mcpclient.StatePending || got.Reached {
		t.Fatalf("the request whose settle was lost: %+v, want open and pending", got)
	}
	start = time.Now()
	j.Close()
	if d := time.Since(start); d > 2*lease {
		t.Fatalf("Close took %v", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if st, _ := j.Stats(ctx); st.SettleFailures != 1 {
		t.Fatalf("%d settle failures, want 1", st.SettleFailures)
	}
}
