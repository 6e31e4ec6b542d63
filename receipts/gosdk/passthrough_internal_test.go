package receiptsgosdk

import (
	"bytes"
	"crypto/sha256"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// rawConn is a conn whose server end the test reads and writes as bytes.
type rawConn struct {
	c      *conn
	client net.Conn // the test's end, as the client
}

func newRawConn(t *testing.T, opts receipts.Options) *rawConn {
	t.Helper()
	opts.Logger = slog.New(slog.DiscardHandler)
	client, adapterEnd := net.Pipe()
	c := newConn(receipts.NewKeeper(opts), "", stream{r: adapterEnd, w: adapterEnd, close: adapterEnd.Close})
	go c.readClient()
	t.Cleanup(func() {
		client.Close()
		c.Close()
	})
	return &rawConn{c: c, client: client}
}

// serverReads reads n bytes of what the server is given.
func (r *rawConn) serverReads(t *testing.T, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	if _, err := io.ReadFull(r.c.toServer, buf); err != nil {
		t.Fatalf("the server read: %v", err)
	}
	return buf
}

func (r *rawConn) send(t *testing.T, b []byte) {
	t.Helper()
	r.client.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.client.Write(b); err != nil {
		t.Fatalf("the client write: %v", err)
	}
}

// Every line the adapter does not answer reaches the server byte for byte, in order: malformed
// ones, notifications, the client's responses, batches, requests that did not opt in, CRLF
// endings, and a last line the stream ends without a newline.
func TestLinesPassThroughUnchanged(t *testing.T) {
	r := newRawConn(t, receipts.Options{})
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge"}}`,
		`{not json`,
		``,
		`   {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}  `,
		`{"jsonrpc":"2.0","id":"s-1","result":{"roots":[]}}`,
		`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}\r",
		`{"jsonrpc":"2.0","id":null,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{}}}}}`,
		`"a string"`,
	}, "\n") + "\n" + `{"jsonrpc":"2.0","method":"notifications/progress"}`
	go func() {
		r.send(t, []byte(in))
		r.client.Close() // so that the last line, without a newline, ends
	}()
	if got := r.serverReads(t, len(in)); string(got) != in {
		t.Fatalf("the server read\n%q\nwant\n%q", got, in)
	}
}

// A line far longer than MaxBodyBytes passes to the server piece by piece: no more than the
// limit and a read buffer of it is ever held.
func TestHugeLinePassesThroughInBoundedMemory(t *testing.T) {
	const max = 64 << 10
	r := newRawConn(t, receipts.Options{MaxBodyBytes: max})
	huge := append([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"charge","arguments":{"blob":"`),
		bytes.Repeat([]byte("x"), 32<<20)...)
	huge = append(huge, "\"}}}\n"...)
	after := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	go func() {
		r.send(t, huge)
		r.send(t, after)
	}()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := sha256.New()
	if _, err := io.CopyN(h, r.c.toServer, int64(len(huge))); err != nil {
		t.Fatal(err)
	}
	var afterStats runtime.MemStats
	runtime.ReadMemStats(&afterStats)
	if got, want := h.Sum(nil), sha256.Sum256(huge); !bytes.Equal(got, want[:]) {
		t.Fatal("the huge line reached the server changed")
	}
	if grown := afterStats.TotalAlloc - before.TotalAlloc; grown > 8<<20 {
		t.Fatalf("passing a %d MiB line allocated %d MiB", len(huge)>>20, grown>>20)
	}
	if got := r.serverReads(t, len(after)); !bytes.Equal(got, after) {
		t.Fatalf("the line after it: %q", got)
	}
}
