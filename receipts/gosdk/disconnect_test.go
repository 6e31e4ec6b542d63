package receiptsgosdk_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// Under DisconnectCancel the server's stream ends with the client's: go-sdk cancels the request,
// and its receipt keeps the cancellation, which the resend gets.
func TestDisconnectCancelKeepsTheCancellation(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{Disconnect: receipts.DisconnectCancel})))
	ran, release := b.holdNext()
	defer release()
	first := dialLines(t, s)
	first.open(initOptedIn)
	first.send(charge(`"c-1"`, 500))
	<-ran
	first.conn.Close()
	second := dialLines(t, s)
	second.open(initOptedIn)
	second.send(charge(`"c-1"`, 500))
	r := parseReply(t, second.recv())
	if r.Error == nil || r.Error.Code != receipts.RPCCancelled {
		t.Fatalf("resend: %+v, want the cancellation %d", r.Error, receipts.RPCCancelled)
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
}

// Under DisconnectContinue a request that runs on past DetachedTimeout after its client left is
// ended, and its receipt says its outcome is unknown.
func TestDetachedDeadlineLeavesTheOutcomeInDoubt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBooking()
		s := serve(t, b.srv, through(adapterFor(receipts.Options{DetachedTimeout: time.Minute})))
		ran, release := b.holdNext()
		defer release()
		first := dialLines(t, s)
		first.open(initOptedIn)
		first.send(charge(`"c-1"`, 500))
		<-ran
		first.conn.Close()
		time.Sleep(59 * time.Second)
		synctest.Wait()
		b.mu.Lock()
		ctx := b.lastCtx
		b.mu.Unlock()
		if ctx.Err() != nil {
			t.Fatal("the request was cancelled before the detached deadline")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if ctx.Err() == nil {
			t.Fatal("the request runs on past the detached deadline")
		}
		second := dialLines(t, s)
		second.open(initOptedIn)
		second.send(charge(`"c-1"`, 500))
		r := parseReply(t, second.recv())
		if r.Error == nil || r.Error.Data.Code != receipts.CodeInDoubt {
			t.Fatalf("resend: %+v, want %s", r.Error, receipts.CodeInDoubt)
		}
	})
}
