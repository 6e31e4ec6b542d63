package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/journal"
	"github.com/northstar-mcp/mcpclient/mcptest"
	"github.com/northstar-mcp/mcpclient/worker"
)

// A worker charges each invoice once: the request id comes from the invoice's key, the journal
// keeps the request through a crash, and a recovery pass at start (then Run, beside the work)
// resends what an earlier process left unresolved.
func Example() {
	dir, _ := os.MkdirTemp("", "worker")
	defer os.RemoveAll(dir)
	var charges atomic.Int32
	srv := mcptest.NewServer(mcptest.WithTool(mcpclient.Tool{Name: "charge"}, func(ctx context.Context, call *mcptest.ToolCall) (*mcpclient.CallToolResult, error) {
		charges.Add(1)
		return &mcpclient.CallToolResult{Content: []mcpclient.Content{mcpclient.TextContent("charged " + string(call.Arguments))}}, nil
	}))
	defer srv.Close()

	j, err := journal.OpenFile(filepath.Join(dir, "journal.db"))
	if err != nil {
		panic(err)
	}
	defer j.Close()
	ctx := context.Background()
	c, err := mcpclient.Connect(ctx, srv.Transport(), mcpclient.WithJournal(j))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	// What an earlier process left: nothing here, on a fresh journal.
	s, err := worker.Pass(ctx, c)
	fmt.Println("recovered:", s.Found, err)

	for _, invoice := range []string{"inv-1", "inv-2", "inv-1"} {
		res, err := c.CallTool(ctx, "charge", map[string]any{"invoice": invoice},
			mcpclient.WithRequestID(mcpclient.IDFromKey("billing", invoice)))
		if err != nil {
			fmt.Println(invoice, err)
			continue
		}
		fmt.Println(invoice, res.Text())
	}
	fmt.Println("charges:", charges.Load()) // inv-1's second call was answered from its receipt
	// Output:
	// recovered: 0 <nil>
	// inv-1 charged {"invoice":"inv-1"}
	// inv-2 charged {"invoice":"inv-2"}
	// inv-1 charged {"invoice":"inv-1"}
	// charges: 2
}
