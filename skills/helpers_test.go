package skills_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/northstar-mcp/mcpclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCtx is a context that bounds a test that hangs.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rpcError returns the *RPCError in err's chain, failing the test if there is none or if err is
// not a server error.
func rpcError(t *testing.T, err error) *mcpclient.RPCError {
	t.Helper()
	var rpc *mcpclient.RPCError
	if !errors.As(err, &rpc) {
		t.Fatalf("error %v carries no *RPCError", err)
	}
	if mcpclient.CodeOf(err) != mcpclient.CodeServerError {
		t.Errorf("error %v has code %v, want %v", err, mcpclient.CodeOf(err), mcpclient.CodeServerError)
	}
	return rpc
}
