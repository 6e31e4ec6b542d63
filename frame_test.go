package mcpclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// CallTool writes a request's frame around its params, in the buffer the arguments were
// marshalled into. Every request it sends must still be exactly the JSON-RPC request of its id
// and params after later requests were built from the same call: the re-issue of a read-only
// call whose reply was lost starts from the same params under a new id.
func TestCallToolFramesStayWhatWasSent(t *testing.T) {
	for _, mode := range []struct {
		name string
		mode mcptest.Mode
		sent int // requests the call sends: a resend of the same id, or a re-issue
	}{{"receipts", mcptest.ModeReceipts, 2}, {"none", mcptest.ModeNone, 2}} {
		t.Run(mode.name, func(t *testing.T) {
			var k counter
			srv := mcptest.NewTestServer(t, mcptest.WithMode(mode.mode), mcptest.WithTool(readOnlyTool, k.tool),
				mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: readOnlyTool.Name}))
			type sending struct {
				req   *mcpclient.Request
				bytes []byte
			}
			var mu sync.Mutex
			var sent []sending
			record := func(next mcpclient.Handler) mcpclient.Handler {
				return func(ctx context.Context, x *mcpclient.Exchange) (*mcpclient.Response, error) {
					if x.Request.Method() == "tools/call" {
						mu.Lock()
						sent = append(sent, sending{x.Request, x.Request.Bytes()})
						mu.Unlock()
					}
					return next(ctx, x)
				}
			}
			c := mcptest.NewClient(t, srv, mcpclient.WithInterceptors(record))
			if _, err := c.CachedTools(context.Background()); err != nil { // learn the read-only hint
				t.Fatal(err)
			}
			args := map[string]any{"q": "a<b & c>d", "n": 1}
			if _, err := c.CallTool(context.Background(), readOnlyTool.Name, args); err != nil {
				t.Fatal(err)
			}
			if len(sent) != mode.sent {
				t.Fatalf("%d requests sent, want %d", len(sent), mode.sent)
			}
			wantParams, _ := json.Marshal(mcpclient.CallToolParams{Name: readOnlyTool.Name, Arguments: args})
			for i, s := range sent {
				now := s.req.Bytes()
				if !bytes.Equal(now, s.bytes) {
					t.Errorf("request %d changed after it was sent:\nsent %s\nnow  %s", i, s.bytes, now)
				}
				want := []byte(`{"jsonrpc":"2.0","id":` + s.req.ID().JSON() + `,"method":"tools/call","params":` + string(s.req.Params()) + `}`)
				if !bytes.Equal(now, want) {
					t.Errorf("request %d is\n%s\nwant\n%s", i, now, want)
				}
				if !bytes.Equal(s.req.Params(), wantParams) {
					t.Errorf("request %d params %s, encoding/json writes %s", i, s.req.Params(), wantParams)
				}
				if s.req.Fingerprint() != sha256.Sum256(now) {
					t.Errorf("request %d: the fingerprint is not that of its bytes", i)
				}
			}
			if mode.mode == mcptest.ModeNone && sent[0].req.ID() == sent[1].req.ID() {
				t.Errorf("without receipts the read-only call was resent under its id, not re-issued")
			}
		})
	}
}
