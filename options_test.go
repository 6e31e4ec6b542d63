package mcpclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/testpeer"
	"github.com/northstar-mcp/mcpclient/transport"
)

// An option value that cannot be used fails Connect before anything is dialled, rather than
// being quietly replaced by a default the caller did not ask for.
func TestInvalidOptionValuesFailConnect(t *testing.T) {
	cases := map[string]mcpclient.Option{
		"ledger capacity 0":  mcpclient.WithLedgerCapacity(0),
		"ledger capacity -1": mcpclient.WithLedgerCapacity(-1),
		"id version 5":       mcpclient.WithIDVersion(mcpclient.IDVersion(5)),
		"receipt scope":      mcpclient.WithReceipts("forever"),
		"keepalive":          mcpclient.WithKeepalive(-time.Second),
		"protocol version":   mcpclient.WithProtocolVersion("2099-01-01"),
		"retry mode":         mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{Mode: mcpclient.RetryMode(9)}),
		"retry attempts":     mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxAttempts: -1}),
		"retry server delay": mcpclient.WithRetryPolicy(mcpclient.RetryPolicy{MaxServerDelay: -time.Second}),
		"inside WithOptions": mcpclient.WithOptions(mcpclient.WithLedgerCapacity(-5)),
		"extension settings": mcpclient.WithExtension("io.example/x", []int{1}),
		"extension nil map":  mcpclient.WithExtension("io.example/x", (*struct{})(nil)),
		"extension no id":    mcpclient.WithExtension("", nil),
		"extension marshal":  mcpclient.WithExtension("io.example/x", map[string]any{"f": func() {}}),
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			dials := 0
			tr := transport.DialFunc(func(context.Context, transport.Receiver) (transport.Conn, error) {
				dials++
				return nil, errors.New("dialled")
			})
			c, err := mcpclient.Connect(context.Background(), tr, opt)
			if c != nil || mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
				t.Fatalf("Connect: %v (client %v), want CodeInvalidArgument", err, c)
			}
			if dials != 0 {
				t.Errorf("Connect dialled %d times with an invalid option", dials)
			}
		})
	}
}

func TestInvalidCallOptionValuesRefuseTheRequest(t *testing.T) {
	c := connect(t, testpeer.NewPipe(t, nil).Transport())
	if _, err := c.NewRequest("ping", nil, mcpclient.WithTimeouts(-time.Second, 0)); mcpclient.CodeOf(err) != mcpclient.CodeInvalidArgument {
		t.Errorf("NewRequest with a negative timeout: %v, want CodeInvalidArgument", err)
	}
}
