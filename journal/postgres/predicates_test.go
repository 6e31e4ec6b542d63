package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal/postgres"
)

// cases is a table made through the journal with a request in each combination of state,
// reached, lease (none, lapsed: its holder is gone, live) and supersession, and their
// replacements.
type cases struct {
	table string
	j     *postgres.Journal
	keys  []string        // every row's id, as the table holds it
	live  map[string]bool // the rows a live lease holds
}

func makeCases(t *testing.T) *cases {
	t.Helper()
	table := newTable(t)
	cs := &cases{table: table, j: open(t, table), live: map[string]bool{}}
	holder := open(t, table, postgres.WithWorker("holder"))
	dead := open(t, table, postgres.WithWorker("dead"))
	var lapsed, replaced []string
	for state := mcpclient.StatePending; state <= mcpclient.StateConflict; state++ {
		for _, reached := range []bool{false, true} {
			for _, lease := range []string{"none", "lapsed", "live"} {
				for _, superseded := range []bool{false, true} {
					id := fmt.Sprintf("%s-%v-%s-%v", state, reached, lease, superseded)
					cs.keys = append(cs.keys, mcpclient.StringID(id).JSON())
					claim(t, cs.j, record(id, "1")).Settle(state, reached, 1)
					awaitSettles(t, cs.j)
					switch lease {
					case "lapsed":
						claim(t, dead, record(id, "1"))
						lapsed = append(lapsed, mcpclient.StringID(id).JSON())
					case "live":
						claim(t, holder, record(id, "1"))
						cs.live[mcpclient.StringID(id).JSON()] = true
					}
					if superseded {
						replaced = append(replaced, id)
					}
				}
			}
		}
	}
	// The dead worker's leases lapse, as when it is gone for longer than a lease.
	dead.Close()
	execSQL(t, "UPDATE "+table+" SET lease_expires = now() - interval '1 second' WHERE id = ANY($1)", lapsed)
	for _, id := range replaced {
		rec, by := superseding("by-"+id, id), cs.j
		if strings.Contains(id, "-live-") { // the holder's own loop re-issues it
			rec.Reissue, by = true, holder
		}
		claim(t, by, rec).Settle(mcpclient.StateAnswered, true, 1)
		cs.keys = append(cs.keys, rec.ID.JSON())
	}
	awaitSettles(t, cs.j)
	awaitSettles(t, holder)
	return cs
}

// records reads every row back through the journal.
func (cs *cases) records(t *testing.T) map[string]mcpclient.JournalRecord {
	t.Helper()
	recs := map[string]mcpclient.JournalRecord{}
	for _, key := range cs.keys {
		var id mcpclient.ID
		if err := id.UnmarshalJSON([]byte(key)); err != nil {
			t.Fatal(err)
		}
		rec, ok, err := cs.j.Lookup(context.Background(), id)
		if err != nil || !ok {
			t.Fatalf("%s: %v, %v", key, ok, err)
		}
		recs[key] = rec
	}
	return recs
}

// where returns the keys of recs for which pred holds, sorted.
func where(recs map[string]mcpclient.JournalRecord, pred func(key string, rec mcpclient.JournalRecord) bool) []string {
	var keys []string
	for key, rec := range recs {
		if pred(key, rec) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// queryKeys returns the ids a query selects, sorted.
func queryKeys(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// The SQL that decides what is unresolved and what is settled (the unresolved statement and the
// partial index it reads, settled_at that eviction and pruning go by) agrees with
// JournalRecord.Unresolved and Settled, on a row in each combination of state, reached, lease
// and supersession; and no row a live lease holds is listed, evicted or pruned.
func TestPredicatesMatchGo(t *testing.T) {
	cs := makeCases(t)
	pool := newPool(t)
	recs := cs.records(t)
	for key, rec := range recs {
		leased := !strings.HasPrefix(key, `"by-`) && (strings.Contains(key, "-lapsed-") || strings.Contains(key, "-live-"))
		if rec.Open != leased {
			t.Errorf("%s: open %v, want %v", key, rec.Open, leased)
		}
	}
	unresolved := where(recs, func(_ string, r mcpclient.JournalRecord) bool { return r.Unresolved() })
	settled := where(recs, func(_ string, r mcpclient.JournalRecord) bool { return r.Settled() })
	free := func(pred func(mcpclient.JournalRecord) bool) []string {
		return where(recs, func(k string, r mcpclient.JournalRecord) bool { return pred(r) && !cs.live[k] })
	}
	if len(unresolved) == 0 || len(settled) == 0 {
		t.Fatalf("the cases do not cover the predicates: %d unresolved, %d settled of %d", len(unresolved), len(settled), len(recs))
	}

	var listed []string
	for rec, err := range cs.j.Unresolved(context.Background(), "srv") {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, rec.ID.JSON())
	}
	slices.Sort(listed)
	if want := free(func(r mcpclient.JournalRecord) bool { return r.Unresolved() }); !slices.Equal(listed, want) {
		t.Errorf("Unresolved lists %v, want the unresolved that no live lease holds %v", listed, want)
	}

	var pred string
	if err := pool.QueryRow(context.Background(), "SELECT pg_get_expr(indpred, indrelid) FROM pg_index WHERE indexrelid = to_regclass($1)",
		cs.table+"_unresolved").Scan(&pred); err != nil {
		t.Fatal(err)
	}
	if got := queryKeys(t, pool, "SELECT id FROM "+cs.table+" WHERE "+pred); !slices.Equal(got, unresolved) {
		t.Errorf("the unresolved index (WHERE %s) covers %v, want %v", pred, got, unresolved)
	}
	if got := queryKeys(t, pool, "SELECT id FROM "+cs.table+" WHERE settled_at IS NOT NULL"); !slices.Equal(got, settled) {
		t.Errorf("settled_at is set on %v, want %v", got, settled)
	}

	// Pruning takes the settled requests that no live lease holds, once old enough.
	execSQL(t, "UPDATE "+cs.table+" SET settled_at = settled_at - interval '1 hour'")
	pruner := open(t, cs.table, postgres.WithRetention(time.Minute))
	if _, err := pruner.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	kept := queryKeys(t, pool, "SELECT id FROM "+cs.table)
	want := free(func(r mcpclient.JournalRecord) bool { return r.Settled() })
	if pruned := where(recs, func(k string, _ mcpclient.JournalRecord) bool { return !slices.Contains(kept, k) }); !slices.Equal(pruned, want) {
		t.Errorf("pruned %v, want the settled that no live lease holds %v", pruned, want)
	}
}

// A full table makes room by evicting the settled requests that no live lease holds, and no
// other: once they are gone, a new request is refused.
func TestEvictionMatchesGo(t *testing.T) {
	cs := makeCases(t)
	pool := newPool(t)
	recs := cs.records(t)
	want := where(recs, func(k string, r mcpclient.JournalRecord) bool { return r.Settled() && !cs.live[k] })
	full := open(t, cs.table, postgres.WithCapacity(len(recs)), postgres.WithWorker("full"))
	for i := 0; ; i++ {
		if i > 2*len(recs) {
			t.Fatal("the table never filled")
		}
		_, err := full.Claim(context.Background(), record(fmt.Sprint("fill-", i), "1")) // held until the end
		if errors.Is(err, mcpclient.ErrLedgerFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	kept := queryKeys(t, pool, "SELECT id FROM "+cs.table)
	if evicted := where(recs, func(k string, _ mcpclient.JournalRecord) bool { return !slices.Contains(kept, k) }); !slices.Equal(evicted, want) {
		t.Errorf("evicted %v, want the settled that no live lease holds %v", evicted, want)
	}
}
