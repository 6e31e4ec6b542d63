package receipts_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

func admit(t *testing.T, k *receipts.Keeper, key receipts.Key, fp receipts.Fingerprint) receipts.Admission {
	t.Helper()
	a, err := k.Admit(context.Background(), key, fp)
	if err != nil {
		t.Fatalf("Admit(%v): %v", key, err)
	}
	return a
}

func TestKeeperAnswers(t *testing.T) {
	ctx := context.Background()
	var stats receipts.Stats
	k := receipts.NewKeeper(receipts.Options{Observe: stats.Observe})

	first := admit(t, k, key("1"), fpA)
	if first.Verdict != receipts.Run || first.Hold == nil {
		t.Fatalf("first Admit = %+v, want run with a hold", first)
	}
	response := []byte(`{"jsonrpc":"2.0","id":1,"result":{"n":1}}`)
	if err := first.Hold.Settle(ctx, response); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if err := first.Hold.Settle(ctx, response); !errors.Is(err, receipts.ErrHoldEnded) {
		t.Errorf("second Settle = %v, want ErrHoldEnded", err)
	}
	if err := first.Hold.Release(ctx); !errors.Is(err, receipts.ErrHoldEnded) {
		t.Errorf("Release after Settle = %v, want ErrHoldEnded", err)
	}

	replay := admit(t, k, key("1"), fpA)
	if replay.Verdict != receipts.Replay || string(replay.Response) != string(response) {
		t.Fatalf("resend = %+v, want the stored response", replay)
	}
	if got := admit(t, k, key("1"), fpB).Verdict; got != receipts.Reused {
		t.Fatalf("other bytes = %v, want reused", got)
	}
	other := admit(t, k, receipts.Key{Principal: "bob", ID: "1"}, fpA)
	if other.Verdict != receipts.Run {
		t.Fatalf("same id, other principal = %v, want its own run", other.Verdict)
	}
	other.Hold.Release(ctx)
	if got := admit(t, k, receipts.Key{Principal: "bob", ID: "1"}, fpB); got.Verdict != receipts.Run {
		t.Fatalf("after Release = %v, want the key unseen again", got.Verdict)
	} else {
		got.Hold.Release(ctx)
	}

	for kind, want := range map[receipts.EventKind]int64{
		receipts.EventClaimed: 3, receipts.EventSettled: 1, receipts.EventReplayed: 1,
		receipts.EventReused: 1, receipts.EventReleased: 2, receipts.EventInDoubt: 0,
	} {
		if got := stats.Count(kind); got != want {
			t.Errorf("%v events = %d, want %d", kind, got, want)
		}
	}
}

func TestKeeperWaitsForTheRunningRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := receipts.NewKeeper(receipts.Options{Wait: time.Minute})
		first := admit(t, k, key("1"), fpA)
		got := make(chan receipts.Admission)
		go func() { got <- admit(t, k, key("1"), fpA) }()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		select {
		case a := <-got:
			t.Fatalf("the resend was answered %v while the request runs", a.Verdict)
		default:
		}
		first.Hold.Settle(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		if a := <-got; a.Verdict != receipts.Replay || string(a.Response) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
			t.Fatalf("the waiting resend got %+v, want the response", a)
		}
	})
}

func TestKeeperInFlightPastTheWaitBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stats receipts.Stats
		k := receipts.NewKeeper(receipts.Options{Wait: 5 * time.Second, Lease: 3 * time.Second, Observe: stats.Observe})
		first := admit(t, k, key("1"), fpA)
		defer first.Hold.Release(context.Background())
		start := time.Now()
		if a := admit(t, k, key("1"), fpA); a.Verdict != receipts.InFlight {
			t.Fatalf("resend = %v, want in flight", a.Verdict)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("refused after %v, want the 5s bound (the lease is renewed meanwhile)", waited)
		}
		if stats.Count(receipts.EventWaited) != 1 || stats.Count(receipts.EventInFlight) != 1 {
			t.Errorf("waited %d, in flight %d; want 1 and 1", stats.Count(receipts.EventWaited), stats.Count(receipts.EventInFlight))
		}
	})
}

func TestKeeperWaiterRunsAfterARelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := receipts.NewKeeper(receipts.Options{})
		first := admit(t, k, key("1"), fpA)
		got := make(chan receipts.Admission)
		go func() { got <- admit(t, k, key("1"), fpA) }()
		synctest.Wait()
		first.Hold.Release(context.Background()) // it failed before it ran
		a := <-got
		if a.Verdict != receipts.Run {
			t.Fatalf("the waiter got %v after the release, want to run it itself", a.Verdict)
		}
		a.Hold.Release(context.Background())
	})
}

func TestKeeperWaiterLeavesWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := receipts.NewKeeper(receipts.Options{})
		first := admit(t, k, key("1"), fpA)
		defer first.Hold.Release(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := k.Admit(ctx, key("1"), fpA); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Admit = %v, want the caller's deadline", err)
		}
	})
}

func TestKeeperRenewsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := receipts.NewMemoryStore(receipts.MemoryOptions{})
		k := receipts.NewKeeper(receipts.Options{Store: store, Lease: 30 * time.Second})
		first := admit(t, k, key("1"), fpA)
		time.Sleep(5 * time.Minute) // a long handler
		if got := lookupState(t, store, key("1")); got != receipts.Running {
			t.Fatalf("after 5 minutes of a 30s lease: %v, want running", got)
		}
		if err := first.Hold.Settle(context.Background(), []byte(`{}`)); err != nil {
			t.Fatalf("Settle: %v", err)
		}
	})
}

func TestKeeperLapsedClaimIsInDoubt(t *testing.T) {
	clock := newFakeClock()
	store := receipts.NewMemoryStore(receipts.MemoryOptions{Now: clock.Now})
	var stats receipts.Stats
	k := receipts.NewKeeper(receipts.Options{Store: store, Observe: stats.Observe})
	// A holder that died: its claim is in the store, its lease ran out, no response.
	mustClaim(t, store, key("1"), fpA, time.Minute)
	clock.Advance(2 * time.Minute)
	if a := admit(t, k, key("1"), fpA); a.Verdict != receipts.InDoubt {
		t.Fatalf("resend = %v, want in doubt", a.Verdict)
	}
	if a := admit(t, k, key("1"), fpB); a.Verdict != receipts.Reused {
		t.Fatalf("other bytes = %v, want reused", a.Verdict)
	}
	if stats.Count(receipts.EventInDoubt) != 1 {
		t.Errorf("in-doubt events = %d, want 1", stats.Count(receipts.EventInDoubt))
	}
}

func TestKeeperLostLeaseCannotSettle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := newFakeClock()
		store := receipts.NewMemoryStore(receipts.MemoryOptions{Now: clock.Now})
		k := receipts.NewKeeper(receipts.Options{Store: store, Lease: 30 * time.Second, Logger: discardLogger()})
		first := admit(t, k, key("1"), fpA)
		// The store's clock jumps past the lease before the holder renews (a paused process).
		clock.Advance(time.Minute)
		if a := admit(t, k, key("1"), fpA); a.Verdict != receipts.InDoubt {
			t.Fatalf("resend = %v, want in doubt", a.Verdict)
		}
		if err := first.Hold.Settle(context.Background(), []byte(`{}`)); !errors.Is(err, receipts.ErrLeaseLost) {
			t.Fatalf("Settle after the lease was lost = %v, want ErrLeaseLost", err)
		}
		if a := admit(t, k, key("1"), fpA); a.Verdict != receipts.InDoubt {
			t.Fatalf("resend after the late Settle = %v, want still in doubt", a.Verdict)
		}
	})
}

func TestKeeperFull(t *testing.T) {
	var stats receipts.Stats
	clock := newFakeClock()
	store := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: 1, Retention: time.Hour, Now: clock.Now})
	k := receipts.NewKeeper(receipts.Options{Store: store, Retention: time.Hour, Observe: stats.Observe})
	first := admit(t, k, key("1"), fpA)
	if a := admit(t, k, key("2"), fpA); a.Verdict != receipts.Full {
		t.Fatalf("second id = %v, want full", a.Verdict)
	}
	first.Hold.Settle(context.Background(), []byte(`{}`))
	// Settled, the first receipt still answers a resend for its retention: no room yet.
	if a := admit(t, k, key("2"), fpA); a.Verdict != receipts.Full {
		t.Fatalf("second id within the first's retention = %v, want full", a.Verdict)
	}
	clock.Advance(time.Hour)
	second := admit(t, k, key("2"), fpA)
	if second.Verdict != receipts.Run {
		t.Fatalf("second id past the first's retention = %v, want run", second.Verdict)
	}
	second.Hold.Release(context.Background())
	if stats.Count(receipts.EventFull) != 2 {
		t.Errorf("full events = %d, want 2", stats.Count(receipts.EventFull))
	}
}

func TestKeeperResponseTooLargeIsInDoubt(t *testing.T) {
	k := receipts.NewKeeper(receipts.Options{
		Store:  receipts.NewMemoryStore(receipts.MemoryOptions{MaxBytes: 2048}),
		Logger: discardLogger(),
	})
	first := admit(t, k, key("7"), fpA)
	big := []byte(`{"jsonrpc":"2.0","id":7,"result":{"text":"` + string(make([]byte, 4096)) + `"}}`)
	if err := first.Hold.Settle(context.Background(), big); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	a := admit(t, k, key("7"), fpA)
	if a.Verdict != receipts.Replay {
		t.Fatalf("resend = %v, want a replay of the in-doubt answer", a.Verdict)
	}
	if code, marker := errorOf(t, a.Response); code != receipts.RPCInDoubt || marker != receipts.CodeInDoubt {
		t.Fatalf("replayed %s, want an in-doubt error", a.Response)
	}
}

func TestKeeperPrunesPastRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := receipts.NewMemoryStore(receipts.MemoryOptions{})
		k := receipts.NewKeeper(receipts.Options{Store: store, Retention: time.Hour})
		first := admit(t, k, key("1"), fpA)
		first.Hold.Settle(context.Background(), []byte(`{}`))
		time.Sleep(2 * time.Hour)
		next := admit(t, k, key("2"), fpA)
		next.Hold.Release(context.Background())
		if got := lookupState(t, store, key("1")); got != 0 {
			t.Fatalf("a receipt past retention = %v, want pruned", got)
		}
		again := admit(t, k, key("1"), fpB)
		if again.Verdict != receipts.Run {
			t.Fatalf("a pruned id = %v, want unseen", again.Verdict)
		}
		again.Hold.Release(context.Background())
	})
}

func TestKeeperDeclaration(t *testing.T) {
	store := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: 9})
	d, err := receipts.NewKeeper(receipts.Options{Store: store}).Declaration(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sd, _ := store.Describe(context.Background())
	want := receipts.Declaration{Scope: receipts.ScopeProcess, Epoch: sd.Epoch, RetentionMs: receipts.DefaultRetention.Milliseconds(), MaxReceipts: 9, Disconnect: receipts.DisconnectContinue}
	if d != want {
		t.Fatalf("Declaration = %+v, want %+v", d, want)
	}
	b, _ := json.Marshal(d)
	var fields map[string]any
	json.Unmarshal(b, &fields)
	for _, f := range []string{"scope", "epoch", "retentionMs", "maxReceipts", "disconnect"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("declaration %s lacks %q", b, f)
		}
	}
}

func TestErrorResponse(t *testing.T) {
	tests := []struct {
		v      receipts.Verdict
		code   int
		marker string
	}{
		{receipts.InFlight, -32600, "MCP_REQUEST_IN_FLIGHT"},
		{receipts.Reused, -32600, "MCP_REQUEST_ID_REUSED"},
		{receipts.InDoubt, -31000, "MCP_RECEIPT_IN_DOUBT"},
		{receipts.Full, -31001, "MCP_RECEIPTS_FULL"},
	}
	for _, tt := range tests {
		resp, ok := receipts.ErrorResponse(tt.v, `"abc"`)
		if !ok {
			t.Fatalf("ErrorResponse(%v) refused", tt.v)
		}
		var m struct {
			JSONRPC string
			ID      string
		}
		if json.Unmarshal(resp, &m) != nil || m.JSONRPC != "2.0" || m.ID != "abc" {
			t.Errorf("ErrorResponse(%v) = %s, want a response to id \"abc\"", tt.v, resp)
		}
		if code, marker := errorOf(t, resp); code != tt.code || marker != tt.marker {
			t.Errorf("ErrorResponse(%v) = %d %s, want %d %s", tt.v, code, marker, tt.code, tt.marker)
		}
	}
	for _, v := range []receipts.Verdict{receipts.Run, receipts.Replay, receipts.Wait} {
		if _, ok := receipts.ErrorResponse(v, "1"); ok {
			t.Errorf("ErrorResponse(%v) answered; it is no refusal", v)
		}
	}
}

// errorOf returns the code and data.code of a JSON-RPC error response.
func errorOf(t *testing.T, response []byte) (int, string) {
	t.Helper()
	var m struct {
		Error *struct {
			Code int
			Data struct{ Code string }
		}
	}
	if err := json.Unmarshal(response, &m); err != nil || m.Error == nil {
		t.Fatalf("%s is no JSON-RPC error response (%v)", response, err)
	}
	return m.Error.Code, m.Error.Data.Code
}

func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2lnbmF0dXJl"
}

func TestBearerPrincipal(t *testing.T) {
	principal := func(auth string) string {
		r := httptest.NewRequest("POST", "/mcp", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return receipts.BearerPrincipal(r)
	}
	alice1 := principal("Bearer " + jwt(`{"iss":"https://idp","sub":"alice","exp":1}`))
	alice2 := principal("bearer " + jwt(`{"iss":"https://idp","sub":"alice","exp":2}`))
	bob := principal("Bearer " + jwt(`{"iss":"https://idp","sub":"bob","exp":1}`))
	otherIssuer := principal("Bearer " + jwt(`{"iss":"https://other","sub":"alice"}`))
	opaque1 := principal("Bearer opaque-token-1")
	opaque2 := principal("Bearer opaque-token-2")
	noSub := principal("Bearer " + jwt(`{"iss":"https://idp"}`))

	if alice1 == "" || alice1 != alice2 {
		t.Errorf("two tokens of one subject: %q and %q, want one principal", alice1, alice2)
	}
	seen := map[string]string{}
	for name, p := range map[string]string{"alice": alice1, "bob": bob, "other issuer": otherIssuer, "opaque 1": opaque1, "opaque 2": opaque2, "no sub": noSub} {
		if p == "" {
			t.Errorf("%s: no principal", name)
		}
		if other, dup := seen[p]; dup {
			t.Errorf("%s and %s share principal %q", name, other, p)
		}
		seen[p] = name
	}
	for _, auth := range []string{"", "Basic YWxpY2U6c2VjcmV0", "Bearer ", "Bearer"} {
		if p := principal(auth); p != "" {
			t.Errorf("Authorization %q: principal %q, want none", auth, p)
		}
	}
	if p := principal("Bearer " + jwt(`{"sub":"alice"}`)); p == alice1 {
		t.Errorf("a subject without issuer shares the principal of the same subject with one")
	}
}
