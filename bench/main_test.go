package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serverURL is the base URL of the echo server child process: /json and /sse below it.
var serverURL string

// TestMain starts cmd/echoserver in a child process, so that the server's CPU time is not the
// benchmark process's. ECHOSERVER_BIN names a prebuilt binary (run.sh builds one); without it,
// the command is built into a temporary directory. ECHOSERVER_URL uses a server already running.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	slog.SetDefault(discard) // mcp-go's stdio transport logs the end of its pipe at Close
	if u := os.Getenv("ECHOSERVER_URL"); u != "" {
		serverURL = u
		return m.Run()
	}
	bin := os.Getenv("ECHOSERVER_BIN")
	if bin == "" {
		dir, err := os.MkdirTemp("", "echoserver")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "echoserver")
		build := exec.Command("go", "build", "-o", bin, "./cmd/echoserver")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building echoserver:", err)
			return 1
		}
	}
	cmd := exec.Command(bin)
	stdin, _ := cmd.StdinPipe() // the child exits when this closes, with us
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting echoserver:", err)
		return 1
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "echoserver printed no URL:", err)
		cmd.Process.Kill()
		return 1
	}
	serverURL = line[:len(line)-1]
	code := m.Run()
	stdin.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	return code
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// An op is one call; it returns the length of the result text.
type op func(ctx context.Context) (int, error)

// measure runs op b.N times from callers goroutines (1: the benchmark's own) and reports the
// process's CPU time per op (cpu-ns/op) and the throughput (calls/s) besides the usual figures.
func measure(b *testing.B, callers int, call op, want int) {
	ctx := context.Background()
	check := func(n int, err error) error {
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("result of %d bytes, want %d", n, want)
		}
		return nil
	}
	// Warm up: fill the connection pools and let lazy initialization happen.
	warm := max(2*callers, 4)
	if want >= 1<<20 {
		warm = 2
	}
	var wg sync.WaitGroup
	for i := 0; i < min(callers, warm); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range max(warm/callers, 1) {
				if err := check(call(ctx)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, t0 := cpuTime(), time.Now()
	if callers == 1 {
		for range b.N {
			if err := check(call(ctx)); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		var next atomic.Int64
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(b.N) {
					if err := check(call(ctx)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
}

// idleConnsPerHost is what every client's pool keeps idle, above the most callers a benchmark
// runs, so that no client dials anew under load. Left to their defaults the clients would not
// compare alike: ours shares a pool keeping 64 idle connections per host, go-sdk's
// http.DefaultClient and mcp-go's zero http.Client net/http's DefaultTransport, which keeps 2.
const idleConnsPerHost = 256

// pooledClient returns an HTTP client of its own, with a pool of its own, built the same for
// every client under test: net/http's DefaultTransport settings but for idleConnsPerHost. wrap,
// if set, wraps its transport.
func pooledClient(wrap func(http.RoundTripper) http.RoundTripper) (*http.Client, func()) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = idleConnsPerHost
	t.MaxIdleConnsPerHost = idleConnsPerHost
	var rt http.RoundTripper = t
	if wrap != nil {
		rt = wrap(t)
	}
	return &http.Client{Transport: rt}, t.CloseIdleConnections
}

// counter is a RoundTripper that counts the requests it sends, by method.
type counter struct {
	next              http.RoundTripper
	post, get, delete atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodPost:
		c.post.Add(1)
	case http.MethodGet:
		c.get.Add(1)
	case http.MethodDelete:
		c.delete.Add(1)
	}
	return c.next.RoundTrip(r)
}

func (c *counter) total() int64 { return c.post.Load() + c.get.Load() + c.delete.Load() }

func drainClose(body io.ReadCloser) {
	io.Copy(io.Discard, body)
	body.Close()
}
