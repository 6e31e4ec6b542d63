package receipts_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// A tool call resent under the same id, with the same bytes, runs once: the second answer is
// the first one's receipt, marked as a replay.
func Example() {
	runs := 0
	// A stand-in for an SDK's Streamable HTTP handler (go-sdk's mcp.NewStreamableHTTPHandler,
	// mcp-go's server.NewStreamableHTTPServer, a reverse proxy).
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		runs++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"charged, run %d"}]}}`, req.ID, runs)
	})
	handler := receipts.HTTP(mcpHandler, receipts.Options{})

	call := `{"jsonrpc":"2.0","id":"9b1deb4d","method":"tools/call","params":{"name":"charge","arguments":{"cents":500}}}`
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(call))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set(receipts.HeaderOptIn, "1")
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		fmt.Printf("replay=%q %s\n", w.Header().Get(receipts.HeaderReplay), w.Body)
	}
	fmt.Println("runs:", runs)
	// Output:
	// replay="" {"jsonrpc":"2.0","id":"9b1deb4d","result":{"content":[{"type":"text","text":"charged, run 1"}]}}
	// replay="1" {"jsonrpc":"2.0","id":"9b1deb4d","result":{"_meta":{"io.github.northstar-mcp/request-receipts.replay":true},"content":[{"type":"text","text":"charged, run 1"}]}}
	// runs: 1
}

// Decide is the table of the receipt rules, from what a store holds under a request's key.
func ExampleDecide() {
	sent := receipts.FingerprintOf([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`))
	other := receipts.FingerprintOf([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	for _, state := range []receipts.State{receipts.Settled, receipts.Running, receipts.Lapsed} {
		held := receipts.Receipt{Fingerprint: sent, State: state}
		fmt.Printf("%s: same bytes %s, other bytes %s\n", state, receipts.Decide(held, sent), receipts.Decide(held, other))
	}
	// Output:
	// settled: same bytes replay, other bytes reused
	// running: same bytes wait, other bytes reused
	// lapsed: same bytes in doubt, other bytes reused
}
