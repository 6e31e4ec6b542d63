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
		name      string
		mode      mcptest.Mode
		stateless bool // the 2026-07-28 revision: the client adds _meta to the params
		sent      int  // requests the call sends: a resend of the same id, or a re-issue
	}{{"receipts", mcptest.ModeReceipts, false, 2}, {"none", mcptest.ModeNone, false, 2},
		{"stateless/receipts", mcptest.ModeReceipts, true, 2}, {"stateless/none", mcptest.ModeNone, true, 2}} {
		t.Run(mode.name, func(t *testing.T) {
			var k counter
			opts := []mcptest.Option{mcptest.WithMode(mode.mode), mcptest.WithTool(readOnlyTool, k.tool),
				mcptest.WithFault(mcptest.Fault{Kind: mcptest.DropAfterExecution, Tool: readOnlyTool.Name})}
			var srv mcptest.Dialer = mcptest.NewTestServer(t, opts...)
			if mode.stateless {
				opts = append(opts, mcptest.WithProtocolVersions(mcpclient.ProtocolVersion20260728))
				srv = mcptest.NewTestHTTPServer(t, opts...)
			}
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
			wantArgs, _ := json.Marshal(args)
			for i, s := range sent {
				now := s.req.Bytes()
				if !bytes.Equal(now, s.bytes) {
					t.Errorf("request %d changed after it was sent:\nsent %s\nnow  %s", i, s.bytes, now)
				}
				want := []byte(`{"jsonrpc":"2.0","id":` + s.req.ID().JSON() + `,"method":"tools/call","params":` + string(s.req.Params()) + `}`)
				if !bytes.Equal(now, want) {
					t.Errorf("request %d is\n%s\nwant\n%s", i, now, want)
				}
				var params struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
					Meta      map[string]any  `json:"_meta"`
				}
				if err := json.Unmarshal(s.req.Params(), &params); err != nil || params.Name != readOnlyTool.Name || !bytes.Equal(params.Arguments, wantArgs) {
					t.Errorf("request %d params %s, want the name and the arguments %s (%v)", i, s.req.Params(), wantArgs, err)
				}
				if mode.stateless != (params.Meta != nil) {
					t.Errorf("request %d params %s: _meta in the stateless revision only", i, s.req.Params())
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
