package receipts

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/northstar-mcp/mcpclient/internal/sse"
)

func TestEventData(t *testing.T) {
	tests := []struct {
		raw, data string
		ok        bool
	}{
		{"data: {}\n\n", "{}", true},
		{"id: 1\r\nevent: message\r\ndata: {\"a\":\r\ndata:  1}\r\n\r\n", "{\"a\":\n 1}", true},
		{": comment\rdata:x\r\r", "x", true},
		{"data\n\n", "", true},
		{"id: 7\n\n", "", false},
		{"event: x\ndatum: y\n\n", "", false},
	}
	for _, tt := range tests {
		data, ok := eventData([]byte(tt.raw))
		if string(data) != tt.data || ok != tt.ok {
			t.Errorf("eventData(%q) = %q, %v; want %q, %v", tt.raw, data, ok, tt.data, tt.ok)
		}
	}
}

func TestReplaceData(t *testing.T) {
	tests := []struct{ raw, data, want string }{
		{"id: 2\r\nevent: message\r\ndata: {}\r\n\r\n", `{"a":1}`, "id: 2\r\nevent: message\r\ndata: {\"a\":1}\n\r\n"},
		{"data: {\ndata: }\nid: 3\n\n", "{\n\"b\":2}", "data: {\ndata: \"b\":2}\nid: 3\n\n"},
		{": keep\rdata:x\r\r", "y", ": keep\rdata: y\n\r"},
	}
	for _, tt := range tests {
		got := string(replaceData([]byte(tt.raw), []byte(tt.data)))
		if got != tt.want {
			t.Errorf("replaceData(%q, %q) = %q, want %q", tt.raw, tt.data, got, tt.want)
		}
		if data, _ := eventData([]byte(got)); string(data) != tt.data {
			t.Errorf("replaceData(%q, %q) reads back as %q", tt.raw, tt.data, data)
		}
	}
}

// FuzzEventStream writes an event stream, cut in three pieces anywhere, through the
// interceptor. Forwarded as it comes, or held event by event, the stream reaches the client
// byte for byte unless an event carried the response it rewrites; the events it reads are the
// ones the client's own event reader reads.
func FuzzEventStream(f *testing.F) {
	for _, s := range []string{
		"id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nid: 2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\r\n\r\n",
		": keepalive\r\rdata: {\"jsonrpc\":\"2.0\",\"id\":7,\r\ndata: \"result\":{}}\r\r",
		"data: partial event never ended",
		"id: 9\n\n\n\ndata:\ndata:\n\n",
		"\ufeffdata: bom\n\n",
		"retry: 100\ndata: a\rdata: b\r\n\r\n",
	} {
		f.Add([]byte(s), uint16(3), uint16(40))
	}
	f.Fuzz(func(t *testing.T, stream []byte, cut1, cut2 uint16) {
		a := min(int(cut1), len(stream))
		b := max(a, min(int(cut2), len(stream)))
		pieces := [][]byte{stream[:a], stream[a:b], stream[b:]}
		const id = "7"

		for _, hold := range []bool{false, true} {
			rec := httptest.NewRecorder()
			rec.Header().Set("Content-Type", "text/event-stream")
			iw := newInterceptor(rec, context.Background(), id, 1<<20)
			if hold {
				iw.holding(MarkReplay)
			}
			var blocks [][]byte
			read := iw.events.block
			iw.events.block = func(raw []byte) {
				if data, ok := eventData(raw); ok && len(data) > 0 {
					blocks = append(blocks, data)
				}
				read(raw)
			}
			for _, p := range pieces {
				iw.Write(p)
			}
			iw.finish()
			if (!hold || iw.response == nil) && !bytes.Equal(rec.Body.Bytes(), stream) {
				t.Fatalf("hold %v: the client got %q, want %q", hold, rec.Body.Bytes(), stream)
			}
			if iw.response != nil && !isResponseTo(iw.response, id) {
				t.Fatalf("read %q as the response to %s", iw.response, id)
			}

			if bytes.HasPrefix(stream, []byte("\ufeff")) {
				continue // the client's reader drops a byte order mark; nothing else sends one
			}
			var want [][]byte
			events := sse.NewReader(bytes.NewReader(stream), 1<<20)
			for {
				ev, err := events.Next()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("reference reader: %v", err)
					}
					break
				}
				want = append(want, ev.Data)
			}
			if len(blocks) != len(want) {
				t.Fatalf("read %d events %q, the client's reader %d %q", len(blocks), blocks, len(want), want)
			}
			for i := range want {
				if !bytes.Equal(blocks[i], want[i]) {
					t.Fatalf("event %d: read %q, the client's reader %q", i, blocks[i], want[i])
				}
			}
		}
	})
}
