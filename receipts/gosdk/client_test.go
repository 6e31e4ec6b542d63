package receiptsgosdk_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/transport"
)

// cuttable is the client's transport to s: every connection is a new server session, and cut
// breaks the last one opened.
type cuttable struct {
	s     *served
	mu    sync.Mutex
	conns []net.Conn
}

func (c *cuttable) transport() transport.Transport {
	return &transport.Stream{Open: func(ctx context.Context) (io.ReadWriteCloser, error) {
		conn, err := c.s.open(ctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
		return conn, nil
	}}
}

func (c *cuttable) cut() {
	c.mu.Lock()
	last := c.conns[len(c.conns)-1]
	c.mu.Unlock()
	last.Close()
}

func (c *cuttable) opened() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

func quickRetries(mode mcpclient.RetryMode) mcpclient.Option {
	return mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{
		Mode:       mode,
		NewBackOff: func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) },
	})
}

// chargeCutBeforeTheAnswer calls charge and breaks the connection after charge ran and before
// its answer was written.
func chargeCutBeforeTheAnswer(t *testing.T, b *booking, s *served, mode mcpclient.RetryMode, opts ...mcpclient.Option) (*mcpclient.Response, error, *cuttable) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cut := &cuttable{s: s}
	c, err := mcpclient.Connect(ctx, cut.transport(), append(opts, quickRetries(mode))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ran, release := b.holdNext()
	defer release()
	type outcome struct {
		resp *mcpclient.Response
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		var resp mcpclient.Response
		_, err := c.CallTool(ctx, "charge", map[string]int{"cents": 500}, mcpclient.WithResponse(&resp))
		done <- outcome{&resp, err}
	}()
	select {
	case <-ran:
	case o := <-done:
		t.Fatalf("the call ended before charge ran: %v", o.err)
	}
	cut.cut()
	release()
	o := <-done
	return o.resp, o.err, cut
}

// The go-sdk server speaks 2026-07-28 (per-request opt-in, the declaration in server/discover)
// and the revisions before it (opt-in and declaration in initialize).
var revisions = []string{"2026-07-28", "2025-11-25"}

func TestClientResendAfterACutConnectionIsReplayed(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) { testClientResendAfterACut(t, rev) })
	}
}

func testClientResendAfterACut(t *testing.T, rev string) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	resp, err, cut := chargeCutBeforeTheAnswer(t, b, s, mcpclient.RetryAuto, mcpclient.WithProtocolVersion(rev))
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if !resp.Replayed || resp.Attempts < 2 {
		t.Fatalf("response replayed=%v after %d attempts, want the receipt's answer to a resend", resp.Replayed, resp.Attempts)
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
	if cut.opened() < 2 {
		t.Fatalf("%d connections, want the resend on a new one", cut.opened())
	}
}

// Without the adapter, the cut leaves the outcome unknown, and the caller that tries again (a new
// request, the only way left) charges twice.
func TestWithoutTheAdapterTheOutcomeIsUnknownAndARetryRunsTwice(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, nil)
	_, err, cut := chargeCutBeforeTheAnswer(t, b, s, mcpclient.RetryAuto)
	if !errors.Is(err, mcpclient.ErrOutcomeUnknown) {
		t.Fatalf("call: %v, want ErrOutcomeUnknown", err)
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mcpclient.Connect(ctx, cut.transport(), quickRetries(mcpclient.RetryAuto))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CallTool(ctx, "charge", map[string]int{"cents": 500}); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if n := b.runs.Load(); n != 2 {
		t.Fatalf("charge ran %d times, want 2", n)
	}
}
