package postgres_test

import (
	"testing"

	"github.com/northstar-mcp/mcpclient/receipts"
	"github.com/northstar-mcp/mcpclient/receipts/postgres"
	"github.com/northstar-mcp/mcpclient/receipts/receiptstest"
)

// The store keeps the contract every receipts.Store keeps.
func TestContract(t *testing.T) {
	receiptstest.Run(t, func(t *testing.T) receipts.Store {
		return newStore(t, newPool(t), postgres.Options{Table: newTable(t)})
	})
}
