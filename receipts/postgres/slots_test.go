package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/receipts/postgres"
)

// With a capacity split over every slot and then some, claims racing from four pools fill the
// table exactly: none past MaxReceipts, and none refused before it is full. Releases, settles and
// evictions keep the slots' counts equal to the rows.
func TestCapacityExactOverSlots(t *testing.T) {
	table := newTable(t)
	const max = 3*postgres.Slots + 7 // slots of unequal capacity
	var stores []*postgres.Store
	var pools []*pgxpool.Pool
	for range 4 {
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 8
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		pools = append(pools, pool)
		stores = append(stores, newStore(t, pool, postgres.Options{Table: table, MaxReceipts: max, Retention: time.Hour}))
	}
	var mu sync.Mutex
	var leases []receipts.Lease
	refused := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	for si, s := range stores {
		for g := range 16 {
			wg.Go(func() {
				<-start
				for i := 0; ; i++ {
					c, err := s.Claim(testCtx(t), key(fmt.Sprintf("%d-%d-%d", si, g, i)), fp, time.Minute)
					mu.Lock()
					switch {
					case errors.Is(err, receipts.ErrFull):
						refused++
					case err != nil:
						t.Error(err)
					case !c.Claimed:
						t.Errorf("a new key found a receipt: %+v", c)
					default:
						leases = append(leases, c.Lease)
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if len(leases) != max || refused != 64 {
		t.Fatalf("%d claimed, %d refused; want %d, each caller refused once when full", len(leases), refused, max)
	}
	if rows, counted := rowCount(t, pools[0], table); rows != max || counted != max {
		t.Fatalf("table holds %d rows, its counts say %d; want %d", rows, counted, max)
	}

	// Release a third and settle a third, from every pool at once: the released places are
	// claimed again, exactly, and the settled ones, within retention, are not evicted.
	for i, l := range leases {
		wg.Go(func() {
			var err error
			switch i % 3 {
			case 0:
				err = stores[i%4].Release(testCtx(t), l)
			case 1:
				err = stores[i%4].Settle(testCtx(t), l, []byte(`{}`))
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	released := (max + 2) / 3
	claims := make(chan error, 2*released)
	for i := range 2 * released {
		wg.Go(func() {
			c, err := stores[i%4].Claim(testCtx(t), key(fmt.Sprintf("again-%d", i)), fp, time.Minute)
			if err == nil && !c.Claimed {
				err = fmt.Errorf("a new key found a receipt: %+v", c)
			}
			claims <- err
		})
	}
	wg.Wait()
	close(claims)
	ok, full := 0, 0
	for err := range claims {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, receipts.ErrFull):
			full++
		default:
			t.Error(err)
		}
	}
	if ok != released || full != released {
		t.Fatalf("after %d releases: %d claimed, %d refused; want %d and %d", released, ok, full, released, released)
	}
	if rows, counted := rowCount(t, pools[0], table); rows != max || counted != max {
		t.Fatalf("table holds %d rows, its counts say %d; want %d", rows, counted, max)
	}

	// Past their retention, the settled receipts make room, one each for as many claims.
	short := newStore(t, pools[1], postgres.Options{Table: table, MaxReceipts: max, Retention: time.Millisecond})
	time.Sleep(10 * time.Millisecond)
	settled := max / 3
	claims = make(chan error, settled+8)
	for i := range settled + 8 {
		wg.Go(func() {
			_, err := short.Claim(testCtx(t), key(fmt.Sprintf("evicting-%d", i)), fp, time.Minute)
			claims <- err
		})
	}
	wg.Wait()
	close(claims)
	ok, full = 0, 0
	for err := range claims {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, receipts.ErrFull):
			full++
		default:
			t.Error(err)
		}
	}
	if ok != settled || full != 8 {
		t.Fatalf("with %d settled receipts past retention: %d claimed, %d refused; want %d and 8", settled, ok, full, settled)
	}
	if rows, counted := rowCount(t, pools[0], table); rows != max || counted != max {
		t.Fatalf("table holds %d rows, its counts say %d; want %d", rows, counted, max)
	}
	if n, err := short.Prune(testCtx(t), time.Hour); err != nil || n != 0 {
		t.Fatalf("Prune = %d, %v; want nothing to prune", n, err)
	}
}

// Settling or releasing a receipt that no one waits for notifies no one: a notification makes
// commits take turns. One a waiter watches is notified.
func TestNotifiesOnlyWatched(t *testing.T) {
	table := newTable(t)
	pool := newPool(t)
	s := newStore(t, pool, postgres.Options{Table: table, PollInterval: time.Minute})
	conn, err := pgx.Connect(testCtx(t), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(testCtx(t), "LISTEN "+pgx.Identifier{postgres.ChannelOf(table)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	notified := func(within time.Duration) bool {
		ctx, cancel := context.WithTimeout(testCtx(t), within)
		defer cancel()
		_, err := conn.WaitForNotification(ctx)
		return err == nil
	}
	for _, release := range []bool{false, true} {
		end := func(l receipts.Lease) error {
			if release {
				return s.Release(testCtx(t), l)
			}
			return s.Settle(testCtx(t), l, []byte(`{}`))
		}
		unwatched := mustClaim(t, s, key(fmt.Sprint("unwatched", release)), time.Minute)
		if err := end(unwatched); err != nil {
			t.Fatal(err)
		}
		if notified(300 * time.Millisecond) {
			t.Errorf("release %v: a receipt no one waited for notified", release)
		}

		k := key(fmt.Sprint("watched", release))
		watched := mustClaim(t, s, k, time.Minute)
		ctx, cancel := context.WithCancel(testCtx(t))
		waited := make(chan error, 1)
		go func() { waited <- s.Wait(ctx, k) }()
		for { // until the waiter marked it
			var w bool
			if err := pool.QueryRow(testCtx(t), `SELECT watched FROM `+table+` WHERE principal = $1 AND id = $2`, k.Principal, k.ID).Scan(&w); err != nil {
				t.Fatal(err)
			}
			if w {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := end(watched); err != nil {
			t.Fatal(err)
		}
		if !notified(5 * time.Second) {
			t.Errorf("release %v: a watched receipt did not notify", release)
		}
		cancel()
		<-waited
	}
}
