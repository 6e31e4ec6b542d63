package transport_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/internal/transporttest"
	"github.com/northstar-mcp/mcpclient/transport"
)

// streamConn returns a Stream connection over rwc, and what it delivers. The connection is closed
// at the end of the test.
func streamConn(t *testing.T, rwc io.ReadWriteCloser, max int) (transport.Conn, *transporttest.Queue) {
	t.Helper()
	q := new(transporttest.Queue)
	c, err := (&transport.Stream{MaxFrameSize: max, Open: func(context.Context) (io.ReadWriteCloser, error) {
		return rwc, nil
	}}).Connect(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, q
}

// streamPair returns a stream conn over one end of a net.Pipe, what it delivers, and the other
// end.
func streamPair(t *testing.T, max int) (transport.Conn, *transporttest.Queue, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { b.Close() })
	c, q := streamConn(t, a, max)
	return c, q, b
}

func streamSend(t *testing.T, c transport.Conn, frame string) {
	t.Helper()
	if err := c.Send(context.Background(), &transport.Message{Frame: []byte(frame)}); err != nil {
		t.Fatalf("Send(%s): %v", frame, err)
	}
}

// streamReceive returns the next frame delivered.
func streamReceive(t *testing.T, q *transporttest.Queue) string {
	t.Helper()
	b, err := receiveNext(q)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	return string(b)
}

// receiveNext returns the next frame or failure delivered, waiting for it up to 10s.
func receiveNext(q *transporttest.Queue) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return q.Receive(ctx)
}

// wantNothingMore checks that the connection delivers nothing more once its reader has ended.
func wantNothingMore(t *testing.T, c transport.Conn, q *transporttest.Queue) {
	t.Helper()
	select {
	case <-transport.ReadEnded(c):
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not end")
	}
	if n := q.Len(); n != 0 {
		frame, err := q.Receive(context.Background())
		t.Errorf("%d more deliveries, the first %q, %v", n, frame, err)
	}
}

// wantOutcome checks that err is a *transport.Error with the outcome, wrapping cause if not nil.
func wantOutcome(t *testing.T, err error, outcome transport.Outcome, cause error) *transport.Error {
	t.Helper()
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *transport.Error", err, err)
	}
	if te.Outcome != outcome {
		t.Errorf("Outcome = %v, want %v (err %v)", te.Outcome, outcome, err)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Errorf("error %v does not wrap %v", err, cause)
	}
	return te
}

// wantConnEnded checks that err, reported to the Receiver, ends the connection: not an *Error
// with an ID.
func wantConnEnded(t *testing.T, err error, cause error) {
	t.Helper()
	if err == nil {
		t.Fatal("nil error, want the end of the connection")
	}
	var te *transport.Error
	if errors.As(err, &te) && te.ID != "" {
		t.Errorf("failure %v names request %s; the end of a connection names none", err, te.ID)
	}
	if cause != nil && !errors.Is(err, cause) {
		t.Errorf("failure %v does not wrap %v", err, cause)
	}
}

func oversized(t *testing.T, c transport.Conn) int64 {
	t.Helper()
	o, ok := c.(interface{ OversizedFrames() int64 })
	if !ok {
		t.Fatalf("%T has no OversizedFrames method", c)
	}
	return o.OversizedFrames()
}

func TestStreamOrderBothWays(t *testing.T) {
	c, q, peer := streamPair(t, 0)
	const n = 20
	go func() {
		for i := range n {
			fmt.Fprintf(peer, `{"jsonrpc":"2.0","method":"m","params":{"i":%d}}`+"\n", i)
		}
	}()
	for i := range n {
		want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"m","params":{"i":%d}}`, i)
		if got := streamReceive(t, q); got != want {
			t.Fatalf("frame %d = %s, want %s", i, got, want)
		}
	}

	sc := bufio.NewScanner(peer)
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if !sc.Scan() {
				done <- fmt.Errorf("line %d: %v", i, sc.Err())
				return
			}
			if want := fmt.Sprintf(`{"i":%d}`, i); sc.Text() != want {
				done <- fmt.Errorf("line %d = %q, want %q", i, sc.Text(), want)
				return
			}
		}
		done <- nil
	}()
	for i := range n {
		streamSend(t, c, fmt.Sprintf(`{"i":%d}`, i))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStreamReceiveLineEndings(t *testing.T) {
	_, q, peer := streamPair(t, 0)
	go io.WriteString(peer, "\n\r\n   \n{\"a\":1}\r\n{\"b\":2}\n\n{\"c\":3}\n")
	for _, want := range []string{`{"a":1}`, `{"b":2}`, `{"c":3}`} {
		if got := streamReceive(t, q); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// TestStreamConcurrentSends sends large frames from many goroutines over an OS pipe, where
// unsynchronized writes of more than PIPE_BUF bytes could interleave, and checks every line.
func TestStreamConcurrentSends(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	c, _ := streamConn(t, struct {
		io.Reader
		io.WriteCloser
	}{eofReader{}, pw}, 0)

	const senders, size = 50, 100 << 10
	type line struct {
		I   int    `json:"i"`
		Pad string `json:"pad"`
	}
	got := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(pr, 1<<20)
		seen := map[int]bool{}
		for range senders {
			b, err := br.ReadBytes('\n')
			if err != nil {
				got <- err
				return
			}
			var l line
			if err := json.Unmarshal(b, &l); err != nil {
				got <- fmt.Errorf("line of %d bytes is no JSON (interleaved?): %v", len(b), err)
				return
			}
			if seen[l.I] || len(l.Pad) != size {
				got <- fmt.Errorf("line %d repeated or mangled", l.I)
				return
			}
			seen[l.I] = true
		}
		got <- nil
	}()
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			frame, _ := json.Marshal(line{I: i, Pad: strings.Repeat(string(rune('a'+i%26)), size)})
			if err := c.Send(context.Background(), &transport.Message{Frame: frame, ID: fmt.Sprint(i), Method: "m"}); err != nil {
				t.Errorf("Send %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// eofReader is an empty stream.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// fakeRWC is a ReadWriteCloser whose reads come from an io.Pipe (so Close unblocks them) and
// whose writes are recorded, and optionally cut short.
type fakeRWC struct {
	pr *io.PipeReader
	pw *io.PipeWriter

	mu      sync.Mutex
	written bytes.Buffer
	writes  int
	// cut makes every write store only the first half of its bytes and fail.
	cut    bool
	closed int
}

func newFakeRWC() *fakeRWC {
	pr, pw := io.Pipe()
	return &fakeRWC{pr: pr, pw: pw}
}

func (f *fakeRWC) Read(b []byte) (int, error) { return f.pr.Read(b) }

func (f *fakeRWC) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.cut {
		n := len(b) / 2
		f.written.Write(b[:n])
		return n, errors.New("connection reset halfway")
	}
	return f.written.Write(b)
}

func (f *fakeRWC) Close() error {
	f.mu.Lock()
	f.closed++
	f.mu.Unlock()
	f.pr.CloseWithError(io.ErrClosedPipe)
	return nil
}

func (f *fakeRWC) snapshot() (written string, writes, closed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.written.String(), f.writes, f.closed
}

func TestStreamSendRefusesLineBreaks(t *testing.T) {
	rwc := newFakeRWC()
	c, _ := streamConn(t, rwc, 0)
	for _, frame := range []string{"{\"a\":1}\n{\"b\":2}", "{\"a\":\r1}", "\n", ""} {
		err := c.Send(context.Background(), &transport.Message{Frame: []byte(frame), ID: `"r1"`, Method: "m"})
		te := wantOutcome(t, err, transport.NotDelivered, nil)
		if te.ID != `"r1"` {
			t.Errorf("error ID = %q, want %q", te.ID, `"r1"`)
		}
	}
	if written, writes, _ := rwc.snapshot(); writes != 0 || written != "" {
		t.Fatalf("refused frames wrote %q in %d writes", written, writes)
	}
	streamSend(t, c, `{"ok":true}`)
	if written, _, _ := rwc.snapshot(); written != "{\"ok\":true}\n" {
		t.Fatalf("written %q", written)
	}
}

func TestStreamPartialWriteIsUncertainAndEndsConn(t *testing.T) {
	rwc := newFakeRWC()
	rwc.cut = true
	c, q := streamConn(t, rwc, 0)

	err := c.Send(context.Background(), &transport.Message{Frame: []byte(`{"jsonrpc":"2.0","id":"x","method":"m"}`), ID: `"x"`, Method: "m"})
	te := wantOutcome(t, err, transport.Uncertain, nil)
	if te.ID != `"x"` {
		t.Errorf("error ID = %q", te.ID)
	}
	_, received := receiveNext(q)
	wantConnEnded(t, received, transport.ErrClosed)
	if _, _, closed := rwc.snapshot(); closed != 1 {
		t.Errorf("rwc closed %d times, want 1", closed)
	}
	wantOutcome(t, c.Send(context.Background(), &transport.Message{Frame: []byte(`{}`)}), transport.NotDelivered, transport.ErrClosed)
	if _, writes, _ := rwc.snapshot(); writes != 1 {
		t.Errorf("%d writes, want 1", writes)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after a broken stream: %v", err)
	}
	wantNothingMore(t, c, q)
}

// failingWriter fails every write before the first byte.
type failingWriter struct{ *fakeRWC }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestStreamWriteErrorBeforeAnyByteIsNotDelivered(t *testing.T) {
	rwc := newFakeRWC()
	c, q := streamConn(t, failingWriter{rwc}, 0)
	err := c.Send(context.Background(), &transport.Message{Frame: []byte(`{}`), ID: "1"})
	wantOutcome(t, err, transport.NotDelivered, nil)
	// The connection is not broken by it.
	go io.WriteString(rwc.pw, "{\"after\":1}\n")
	if got := streamReceive(t, q); got != `{"after":1}` {
		t.Fatalf("after a refused write: got %q", got)
	}
}

func TestStreamLargeLineArrivesWhole(t *testing.T) {
	_, q, peer := streamPair(t, 0) // the default limit
	line := `{"jsonrpc":"2.0","id":1,"result":{"data":"` + strings.Repeat("A", 10<<20) + `"}}`
	go io.WriteString(peer, line+"\n")
	if got := streamReceive(t, q); got != line {
		t.Fatalf("a line of %d bytes came back as %d bytes", len(line), len(got))
	}
}

func TestStreamOversizedAnswerEndsItsExchange(t *testing.T) {
	const max = 64
	c, q, peer := streamPair(t, max)
	exact := `{"s":"` + strings.Repeat("x", max-8) + `"}`
	justOver := `{"id":9,"result":"` + strings.Repeat("x", max-19) + `"}`
	if len(exact) != max || len(justOver) != max+1 {
		t.Fatalf("bad fixtures: %d and %d bytes", len(exact), len(justOver))
	}
	big := strings.Repeat(`y\"`, 100<<10)
	go func() {
		io.WriteString(peer, `{"jsonrpc":"2.0","id":"a","result":{"text":"`+big+`"}}`+"\n")
		io.WriteString(peer, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`+big+`"}}`+"\n")
		io.WriteString(peer, exact+"\r\n")
		// The id after the result, as some SDKs write it.
		io.WriteString(peer, `{"result":{"text":"`+big+`","id":"inner"},"jsonrpc":"2.0","id":7}`+"\n")
		io.WriteString(peer, justOver+"\r\n")
		io.WriteString(peer, `{"last":1}`+"\n")
	}()
	receiveFailure := func(wantID string) {
		t.Helper()
		_, err := receiveNext(q)
		if te := wantOutcome(t, err, transport.Uncertain, transport.ErrMessageTooLarge); te.ID != wantID {
			t.Fatalf("the failure names request %q, want %q", te.ID, wantID)
		}
	}
	receiveFailure(`"a"`)
	// The notification was dropped.
	if got := streamReceive(t, q); got != exact {
		t.Fatalf("a line of exactly the limit: got %.80q", got)
	}
	receiveFailure(`7`)
	receiveFailure(`9`)
	if got := streamReceive(t, q); got != `{"last":1}` {
		t.Fatalf("got %.80q, want the frame after the oversized lines", got)
	}
	if n := oversized(t, c); n != 4 {
		t.Errorf("OversizedFrames = %d, want 4", n)
	}
}

// A line over the limit that may answer a request it does not name ends the connection: the
// requests awaiting answers must not wait for one that was thrown away.
func TestStreamOversizedLineNamingNoRequestEndsTheConnection(t *testing.T) {
	big := strings.Repeat("y", 100<<10)
	for name, line := range map[string]string{
		"no id":       `{"jsonrpc":"2.0","result":{"text":"` + big + `"}}`,
		"null id":     `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"` + big + `"}}`,
		"fraction id": `{"jsonrpc":"2.0","id":1.5,"result":"` + big + `"}`,
		"no JSON-RPC": `{"big":"` + big + `"}`,
		"no JSON":     big,
	} {
		t.Run(name, func(t *testing.T) {
			c, q, peer := streamPair(t, 1024)
			go func() {
				io.WriteString(peer, line+"\n")
				io.WriteString(peer, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n")
			}()
			_, err := receiveNext(q)
			wantConnEnded(t, err, transport.ErrMessageTooLarge)
			err = c.Send(context.Background(), &transport.Message{Frame: []byte(`{}`), ID: "2"})
			wantOutcome(t, err, transport.NotDelivered, transport.ErrClosed)
			// The answer that followed may answer nothing any more: the connection ended.
			wantNothingMore(t, c, q)
		})
	}
}

func TestStreamSendHonorsContext(t *testing.T) {
	c, _, peer := streamPair(t, 0) // net.Pipe: a write blocks until the peer reads, and has deadlines
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := c.Send(ctx, &transport.Message{Frame: []byte(`{"blocked":1}`), ID: "7", Method: "m"})
	wantOutcome(t, err, transport.NotDelivered, context.DeadlineExceeded)

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	wantOutcome(t, c.Send(ctx, &transport.Message{Frame: []byte(`{}`)}), transport.NotDelivered, context.Canceled)

	// The deadline was cleared: the next Send goes through once the peer reads.
	got := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(peer).ReadString('\n')
		got <- l
	}()
	streamSend(t, c, `{"after":1}`)
	if l := <-got; l != "{\"after\":1}\n" {
		t.Fatalf("peer read %q", l)
	}
}

// Close unblocks a Send and the reader, and the end it causes is not reported to the Receiver.
func TestStreamCloseUnblocksAndIsIdempotent(t *testing.T) {
	c, q, _ := streamPair(t, 0)
	sent := make(chan error, 1)
	go func() { // blocks: the peer never reads
		sent <- c.Send(context.Background(), &transport.Message{Frame: []byte(`{"x":1}`), ID: "1"})
	}()
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
	wantNothingMore(t, c, q)
	wantOutcome(t, <-sent, transport.NotDelivered, transport.ErrClosed)
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	wantOutcome(t, c.Send(context.Background(), &transport.Message{Frame: []byte(`{}`)}), transport.NotDelivered, transport.ErrClosed)
}

func TestStreamEOFEndsConn(t *testing.T) {
	c, q, peer := streamPair(t, 0)
	go func() {
		io.WriteString(peer, "{\"a\":1}\n{\"tail\":1}")
		peer.Close()
	}()
	if got := streamReceive(t, q); got != `{"a":1}` {
		t.Fatalf("got %q", got)
	}
	if got := streamReceive(t, q); got != `{"tail":1}` {
		t.Fatalf("a last line without newline: got %q", got)
	}
	_, err := receiveNext(q)
	wantConnEnded(t, err, io.EOF)
	c.Close()
	wantNothingMore(t, c, q) // the end is reported once
}

func TestStreamTransportConnect(t *testing.T) {
	var peers []net.Conn
	s := &transport.Stream{Open: func(ctx context.Context) (io.ReadWriteCloser, error) {
		a, b := net.Pipe()
		peers = append(peers, b)
		return a, nil
	}}
	q := new(transporttest.Queue)
	c, err := s.Connect(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	go io.WriteString(peers[0], "{\"hello\":1}\n")
	if got := streamReceive(t, q); got != `{"hello":1}` {
		t.Fatalf("got %q", got)
	}
	c.Close()
	peers[0].Close()

	refused := errors.New("connection refused")
	_, err = (&transport.Stream{Open: func(context.Context) (io.ReadWriteCloser, error) { return nil, refused }}).Connect(context.Background(), q)
	wantOutcome(t, err, transport.NotDelivered, refused)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Connect(ctx, q)
	wantOutcome(t, err, transport.NotDelivered, context.Canceled)
	if len(peers) != 1 {
		t.Errorf("Open called %d times, want 1 (not with a done context)", len(peers))
	}

	_, err = (&transport.Stream{}).Connect(context.Background(), q)
	wantOutcome(t, err, transport.NotDelivered, nil)
}
