package receipts_test

import (
	"testing"

	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/receipts/receiptstest"
)

// MemoryStore keeps the contract every Store keeps.
func TestMemoryStoreContract(t *testing.T) {
	receiptstest.Run(t, func(t *testing.T) receipts.Store {
		return receipts.NewMemoryStore(receipts.MemoryOptions{})
	})
}
