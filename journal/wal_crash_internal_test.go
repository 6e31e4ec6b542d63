//go:build unix

package journal

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
)

// The log's crash tests run this test binary again as a child that writes through a File and
// dies by SIGKILL: at a point of the writer's work on the log (walHook), or when the parent kills
// it. The child prints a line once each change it must keep is done: "C id" once a Claim
// returned, "F id" once a Forget did ("f id" before it calls Forget). The parent then opens the
// file and checks that each is kept.
const (
	envWALRole  = "JOURNAL_WAL_ROLE" // "work" or "settle"
	envWALPath  = "JOURNAL_WAL_PATH"
	envWALPoint = "JOURNAL_WAL_POINT" // a walHook point, or "" to be killed by the parent
	envWALNth   = "JOURNAL_WAL_NTH"   // at the point's nth time
	envWALFrame = "JOURNAL_WAL_FRAME" // bytes of padding in each frame
	walServer   = "http://127.0.0.1:1/wal"
)

func init() {
	switch os.Getenv(envWALRole) {
	case "work":
		os.Exit(walWorker())
	case "settle":
		os.Exit(walSettler())
	}
}

// killAt makes the writer kill the process at the nth time it reaches point; at walAppend it
// first writes half of the record, as a write the kill cut short.
func killAt(point string, nth int) {
	n := 0
	walHook = func(p string, j *File) {
		if p != point {
			return
		}
		if n++; n < nth {
			return
		}
		if p == walAppend {
			j.log.WriteAt(j.record[:len(j.record)/2], j.logEnd)
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}

func walRecord(id string, pad int) mcpclient.JournalRecord {
	now := time.Now()
	return mcpclient.JournalRecord{ID: mcpclient.StringID(id), Method: "tools/call",
		Frame:  []byte(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"pad":"` + strings.Repeat("p", pad) + `"}}`),
		Server: walServer, State: mcpclient.StatePending, Open: true, Created: now, Updated: now, Fingerprint: sha256.Sum256([]byte(id)),
		Receipts: mcpclient.ReceiptBinding{Scope: mcpclient.ReceiptScopeProcess, Epoch: "e"}}
}

// walWorker claims new requests from 16 goroutines until it is killed: it settles most, leaves
// some open, and forgets some settled ones.
func walWorker() int {
	if p := os.Getenv(envWALPoint); p != "" {
		nth, _ := strconv.Atoi(os.Getenv(envWALNth))
		killAt(p, nth)
	}
	pad, _ := strconv.Atoi(os.Getenv(envWALFrame))
	j, err := OpenFile(os.Getenv(envWALPath))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for n := 0; ; n++ {
				id := fmt.Sprintf("g%d-%d", g, n)
				c, err := j.Claim(ctx, walRecord(id, pad))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				fmt.Printf("C %s\n", id)
				switch n % 4 {
				case 0: // left open, as a request in flight
				case 1:
					c.Settle(mcpclient.StateAnswered, true, 1)
					fmt.Printf("f %s\n", id)
					if err := j.Forget(ctx, mcpclient.StringID(id)); err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
					fmt.Printf("F %s\n", id)
				default:
					c.Settle(mcpclient.StateAnswered, true, 1)
				}
			}
		})
	}
	wg.Wait()
	return 0
}

// walSettler settles every unresolved request it finds, then claims one more, whose write
// carries the settles, and is killed at the point given (closing the file, to reach those of a
// checkpoint), or once that claim returned.
func walSettler() int {
	if p := os.Getenv(envWALPoint); p != "" {
		nth, _ := strconv.Atoi(os.Getenv(envWALNth))
		killAt(p, nth)
	}
	j, err := OpenFile(os.Getenv(envWALPath))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	for rec, err := range j.Unresolved(ctx, walServer) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c, err := j.Claim(ctx, rec)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c.Settle(mcpclient.StateAnswered, true, 1)
		fmt.Printf("S %s\n", rec.ID.JSON())
	}
	if _, err := j.Claim(ctx, walRecord("last", 8)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("C last\n")
	if os.Getenv(envWALPoint) != "" {
		j.Close() // a checkpoint, for the points in one
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	return 0
}

// runChild runs the test binary as a child of role, killed by the parent after killAfter if it
// is not zero, and returns what it printed done, by kind. The child must die by SIGKILL.
func runChild(t *testing.T, role, path, point string, nth, pad int, killAfter time.Duration) map[string][]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWALRole+"="+role, envWALPath+"="+path, envWALPoint+"="+point,
		envWALNth+"="+strconv.Itoa(nth), envWALFrame+"="+strconv.Itoa(pad))
	var out, errOut bytes.Buffer
	// A kill at a random moment counts from the child's first report, not from its start: a
	// loaded machine may take longer than the whole delay to start a process.
	reports := &firstReport{w: &out}
	cmd.Stdout, cmd.Stderr = reports, &errOut
	if killAfter > 0 {
		reports.then = func() *time.Timer {
			return time.AfterFunc(killAfter, func() { cmd.Process.Signal(syscall.SIGKILL) })
		}
		defer reports.stop()
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		t.Fatalf("the child did not reach %s #%d", point, nth)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, not killed: %s", err, errOut.String())
	}
	lines := map[string][]string{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		kind, id, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue // a line the kill cut: not done
		}
		lines[kind] = append(lines[kind], id)
	}
	return lines
}

// firstReport writes a child's output to w and, at the first whole line, calls then (if set).
type firstReport struct {
	w    io.Writer
	then func() *time.Timer

	mu    sync.Mutex
	timer *time.Timer // what then started; guarded by mu
	seen  bool        // guarded by mu
}

func (r *firstReport) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen && r.then != nil && bytes.IndexByte(p, '\n') >= 0 {
		r.seen = true
		r.timer = r.then()
	}
	return r.w.Write(p)
}

// stop stops the timer then started, if it did.
func (r *firstReport) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil {
		r.timer.Stop()
	}
}

// checkKept opens the file at path and checks that each request claimed is there, with its exact
// bytes, and each forgotten one is not; it returns the unresolved requests' ids.
func checkKept(t *testing.T, path string, done map[string][]string, pad int) map[string]bool {
	t.Helper()
	j, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	forgotten := map[string]bool{}
	for _, id := range done["f"] { // forgotten or not, as the kill fell
		forgotten[id] = true
	}
	for _, id := range done["F"] {
		forgotten[id] = true
		if _, ok, err := j.Lookup(ctx, mcpclient.StringID(id)); ok || err != nil {
			t.Errorf("forgotten request %s found (%v)", id, err)
		}
	}
	for _, id := range done["C"] {
		if forgotten[id] {
			continue
		}
		got, ok, err := j.Lookup(ctx, mcpclient.StringID(id))
		if err != nil || !ok {
			t.Errorf("claimed request %s lost: %v, %v", id, ok, err)
			continue
		}
		want := walRecord(id, pad)
		if id == "last" {
			want = walRecord(id, 8)
		}
		if !bytes.Equal(got.Frame, want.Frame) || got.Fingerprint != want.Fingerprint || got.Method != want.Method || got.Server != want.Server {
			t.Errorf("request %s came back as %+v", id, got)
		}
	}
	unresolved := map[string]bool{}
	for rec, err := range j.Unresolved(ctx, walServer) {
		if err != nil {
			t.Fatalf("unresolved: %v", err)
		}
		unresolved[rec.ID.JSON()] = true
		want := walRecord(string(rec.ID.JSON()[1:len(rec.ID.JSON())-1]), pad)
		if rec.ID.JSON() == `"last"` {
			want = walRecord("last", 8)
		}
		if !bytes.Equal(rec.Frame, want.Frame) {
			t.Errorf("unresolved request %s came back with other bytes", rec.ID.JSON())
		}
	}
	if testing.Verbose() {
		t.Logf("%d claimed, %d forgotten, %d unresolved", len(done["C"]), len(done["F"]), len(unresolved))
	}
	return unresolved
}

// A process killed at any point of the writer's work on the log keeps every request whose Claim
// returned, with its bytes, and every Forget that returned; a second process that settles what
// the first left unresolved and is killed in turn does not find them unresolved again.
func TestLogCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, tc := range []struct {
		point string
		nth   int
	}{
		{walAppend, 1},         // the first record torn
		{walAppend, 40},        // a record torn after others
		{walSynced, 1},         // synced, not yet reported
		{walSynced, 40},        //
		{walCheckpoint, 1},     // before the checkpoint commits
		{walCheckpointed, 1},   // committed, the log still holding its records
		{walCheckpointed, 2},   //
		{walAppend, 1 << 30},   // never: killed by the parent at a random moment instead
		{walCheckpoint, 1e9},   //
		{walSynced, 1 << 30},   //
		{walAppend, 1 << 30},   //
		{walSynced, 1 << 30},   //
		{walCheckpoint, 1e9},   //
		{walCheckpointed, 1e9}, //
	} {
		name := fmt.Sprintf("%s#%d", tc.point, tc.nth)
		var killAfter time.Duration
		pad := 100
		if tc.nth >= 1e9 {
			name = fmt.Sprintf("random-%d", rand.IntN(1000))
			killAfter = time.Duration(100+rand.IntN(600)) * time.Millisecond
			pad = 8 << 10 // large checkpoints, for the kill to fall in one
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			done := runChild(t, "work", path, tc.point, tc.nth, pad, killAfter)
			if len(done["C"]) == 0 && tc.nth > 1 {
				t.Fatal("the child claimed nothing")
			}
			unresolved := checkKept(t, path, done, pad)
			// Settled and killed again: none of them is unresolved at the next open.
			settled := runChild(t, "settle", path, "", 0, pad, 0)
			if len(settled["S"]) != len(unresolved) || len(settled["C"]) != 1 {
				t.Fatalf("the settler settled %d of %d", len(settled["S"]), len(unresolved))
			}
			again := checkKept(t, path, map[string][]string{"C": append(done["C"], "last"), "F": done["F"], "f": done["f"]}, pad)
			if len(again) != 1 || !again[`"last"`] {
				t.Fatalf("after settling all, %d unresolved: %v", len(again), again)
			}
		})
	}
}

// The settler killed at each point of its own writes leaves each request it settled once
// unresolved at most: settled, or found again as it was.
func TestLogCrashWhileSettling(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for _, point := range []string{walAppend, walSynced, walCheckpoint, walCheckpointed} {
		t.Run(point, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			done := runChild(t, "work", path, walSynced, 30, 100, 0)
			unresolved := checkKept(t, path, done, 100)
			runChild(t, "settle", path, point, 1, 100, 0)
			after := checkKept(t, path, done, 100)
			for id := range after {
				if !unresolved[id] && id != `"last"` {
					t.Errorf("request %s unresolved after the settler, not before", id)
				}
			}
		})
	}
}
