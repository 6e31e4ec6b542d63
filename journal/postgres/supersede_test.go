package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
)

// superseding returns a request under id that supersedes older.
func superseding(id, older string) mcpclient.JournalRecord {
	rec := record(id, "1")
	rec.Supersedes, rec.Reason = mcpclient.StringID(older), "checked the seat"
	return rec
}

// Two workers superseding one recovered request at once: one links it, the other is refused
// with ErrAlreadySuperseded naming the winner, and records nothing.
func TestSupersedeOnceAcrossWorkers(t *testing.T) {
	table := newTable(t)
	js := []*postgres.Journal{open(t, table, postgres.WithWorker("a")), open(t, table, postgres.WithWorker("b"))}
	ctx := context.Background()
	for round := range 10 {
		old := fmt.Sprint("old-", round)
		claim(t, js[0], record(old, "1")).Settle(mcpclient.StateUncertain, true, 1)
		awaitSettles(t, js[0])
		type result struct {
			id  string
			err error
		}
		results := make([]result, len(js))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, j := range js {
			wg.Go(func() {
				id := fmt.Sprint(old, "-by-", j.Worker())
				<-start
				c, err := j.Claim(ctx, superseding(id, old))
				if err == nil {
					c.Settle(mcpclient.StateAnswered, true, 1)
				}
				results[i] = result{id, err}
			})
		}
		close(start)
		wg.Wait()
		var winner, loser result
		switch {
		case results[0].err == nil && results[1].err != nil:
			winner, loser = results[0], results[1]
		case results[1].err == nil && results[0].err != nil:
			winner, loser = results[1], results[0]
		default:
			t.Fatalf("round %d: %+v: want one supersession", round, results)
		}
		if !errors.Is(loser.err, mcpclient.ErrAlreadySuperseded) || !strings.Contains(loser.err.Error(), mcpclient.StringID(winner.id).JSON()) {
			t.Fatalf("round %d: the loser's error %v, want ErrAlreadySuperseded naming %s", round, loser.err, winner.id)
		}
		if got, _ := lookup(t, js[0], old); got.SupersededBy != mcpclient.StringID(winner.id) {
			t.Fatalf("round %d: %s superseded by %v, want %s", round, old, got.SupersededBy, winner.id)
		}
		if _, ok := lookup(t, js[0], loser.id); ok {
			t.Fatalf("round %d: the refused request %s was recorded", round, loser.id)
		}
	}
}

// A request another worker holds under a live lease (it may be resending it) is not superseded:
// the supersession is refused with ErrRequestInFlight and records nothing; once the holder
// settles, it goes through.
func TestSupersedeHeldByAnotherWorker(t *testing.T) {
	table := newTable(t)
	a, b := open(t, table, postgres.WithWorker("a")), open(t, table, postgres.WithWorker("b"))
	claim(t, a, record("old", "1")).Settle(mcpclient.StateUncertain, true, 1)
	held := claim(t, b, record("old", "1")) // b resends it
	_, err := a.Claim(context.Background(), superseding("new", "old"))
	if !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("err = %v, want ErrRequestInFlight", err)
	}
	if got, _ := lookup(t, a, "old"); !got.SupersededBy.IsZero() {
		t.Fatalf("linked while held: %+v", got)
	}
	if _, ok := lookup(t, a, "new"); ok {
		t.Fatal("the refused request was recorded")
	}
	held.Settle(mcpclient.StateUncertain, true, 1)
	awaitSettles(t, b)
	claim(t, a, superseding("new", "old")).Settle(mcpclient.StateAnswered, true, 1)
	if got, _ := lookup(t, a, "old"); got.SupersededBy != mcpclient.StringID("new") {
		t.Fatalf("not linked once released: %+v", got)
	}
}

// The attempt loop that holds a request may re-issue it under a new id (rec.Reissue): the link
// is made under its own live lease, and its Settle of the original then closes a record that is
// settled, as superseded. A re-issue from a worker that does not hold the original is refused.
func TestReissueUnderOwnLease(t *testing.T) {
	table := newTable(t)
	j, other := open(t, table, postgres.WithWorker("holder")), open(t, table, postgres.WithWorker("other"))
	orig := claim(t, j, record("orig", "1"))
	next := superseding("next", "orig")
	next.Reissue = true
	if _, err := other.Claim(context.Background(), next); !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("a re-issue by a worker that does not hold the original: %v, want ErrRequestInFlight", err)
	}
	c := claim(t, j, next)
	got, _ := lookup(t, j, "orig")
	if got.SupersededBy != mcpclient.StringID("next") || !got.Open {
		t.Fatalf("the original under its lease: %+v", got)
	}
	orig.Settle(mcpclient.StateUncertain, true, 1)
	c.Settle(mcpclient.StateAnswered, true, 1)
	got, _ = lookup(t, j, "orig")
	if got.Open || got.State != mcpclient.StateUncertain || !got.Settled() || got.Unresolved() {
		t.Fatalf("the original settled: %+v", got)
	}
	var settled bool
	if err := newPool(t).QueryRow(context.Background(), "SELECT settled_at IS NOT NULL FROM "+table+" WHERE id = $1", `"orig"`).Scan(&settled); err != nil || !settled {
		t.Fatalf("settled_at set: %v, %v", settled, err)
	}
}

// A superseded request is not claimed again, by a resend or a recovery, in any worker: sent
// again, it could run beside its replacement. Nor is it superseded a second time.
func TestClaimOfSupersededRefused(t *testing.T) {
	table := newTable(t)
	a, b := open(t, table, postgres.WithWorker("a")), open(t, table, postgres.WithWorker("b"))
	claim(t, a, record("old", "1")).Settle(mcpclient.StateUncertain, true, 1)
	claim(t, a, superseding("new", "old")).Settle(mcpclient.StateAnswered, true, 1)
	for _, j := range []*postgres.Journal{a, b} {
		_, err := j.Claim(context.Background(), record("old", "1"))
		if !errors.Is(err, mcpclient.ErrAlreadySuperseded) || !strings.Contains(err.Error(), `"new"`) {
			t.Fatalf("%s: err = %v, want ErrAlreadySuperseded naming the replacement", j.Worker(), err)
		}
		_, err = j.Claim(context.Background(), superseding("newer", "old"))
		if !errors.Is(err, mcpclient.ErrAlreadySuperseded) || !strings.Contains(err.Error(), `"new"`) {
			t.Fatalf("%s: a second supersession: err = %v, want ErrAlreadySuperseded naming the first", j.Worker(), err)
		}
	}
	if got, _ := lookup(t, b, "old"); got.SupersededBy != mcpclient.StringID("new") || got.Open {
		t.Fatalf("the refusals changed the record: %+v", got)
	}
}

// Forget refuses a request that a live lease holds, in this worker or another.
func TestForgetHeldByAnotherWorker(t *testing.T) {
	table := newTable(t)
	a, b := open(t, table, postgres.WithWorker("a")), open(t, table, postgres.WithWorker("b"))
	c := claim(t, b, record("x", "1"))
	if err := a.Forget(context.Background(), mcpclient.StringID("x")); !errors.Is(err, mcpclient.ErrRequestInFlight) {
		t.Fatalf("err = %v, want ErrRequestInFlight", err)
	}
	if _, ok := lookup(t, a, "x"); !ok {
		t.Fatal("forgotten while held")
	}
	c.Settle(mcpclient.StateAnswered, true, 1)
	if err := b.Forget(context.Background(), mcpclient.StringID("x")); err != nil {
		t.Fatal(err) // the settle under way is waited for
	}
}
