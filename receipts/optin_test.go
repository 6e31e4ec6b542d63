package receipts_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/northstar-mcp/mcpclient/receipts"
)

func TestReceipted(t *testing.T) {
	for method, want := range map[string]bool{
		"tools/call": true, "resources/read": true, "tasks/update": true,
		"initialize": false, "server/discover": false, "ping": false, "subscriptions/listen": false,
	} {
		if got := receipts.Receipted(method); got != want {
			t.Errorf("Receipted(%q) = %v, want %v", method, got, want)
		}
	}
}

func TestRequestOptsIn(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   bool
	}{
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{}}}}}`, true},
		{`{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":null}}}}`, true},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"other":{}}}}}`, false},
		{`{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"Extensions":{"io.github.northstar-mcp/request-receipts":{}}}}}`, false},
		{`{"capabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{}}}}`, false},
		{`{}`, false},
		{``, false},
		{`[1]`, false},
	} {
		if got := receipts.RequestOptsIn(json.RawMessage(tc.params)); got != tc.want {
			t.Errorf("RequestOptsIn(%s) = %v, want %v", tc.params, got, tc.want)
		}
	}
}

func TestInitializeOptsIn(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   bool
	}{
		{`{"protocolVersion":"2025-11-25","capabilities":{"extensions":{"io.github.northstar-mcp/request-receipts":{}}}}`, true},
		{`{"capabilities":{"experimental":{"io.github.northstar-mcp/request-receipts":{}}}}`, false},
		{`{"capabilities":{}}`, false},
		{`null`, false},
	} {
		if got := receipts.InitializeOptsIn(json.RawMessage(tc.params)); got != tc.want {
			t.Errorf("InitializeOptsIn(%s) = %v, want %v", tc.params, got, tc.want)
		}
	}
}

func TestCancelledResponse(t *testing.T) {
	var resp struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(receipts.CancelledResponse(`"a-1"`), &resp); err != nil {
		t.Fatal(err)
	}
	if string(resp.ID) != `"a-1"` || resp.Error.Code != receipts.RPCCancelled {
		t.Fatalf("id %s code %d, want \"a-1\" %d", resp.ID, resp.Error.Code, receipts.RPCCancelled)
	}
}

func TestKeeperOptionsHaveDefaults(t *testing.T) {
	o := receipts.NewKeeper(receipts.Options{Wait: time.Second}).Options()
	if o.Wait != time.Second || o.Store == nil || o.Lease != receipts.DefaultLease ||
		o.DetachedTimeout != receipts.DefaultDetachedTimeout || o.MaxBodyBytes != receipts.DefaultMaxBodyBytes ||
		o.MaxResponseBytes != receipts.DefaultMaxResponseBytes || o.Disconnect != receipts.DisconnectContinue || o.Logger == nil {
		t.Fatalf("Options() = %+v, want the defaults beside Wait", o)
	}
}
