package mcpclient_test

import (
	"encoding/json"
	"testing"

	"github.com/northstar-mcp/mcpclient"
)

func TestRequestReceiptsDeclaration(t *testing.T) {
	cases := []struct {
		decl string
		want mcpclient.RequestReceipts
		ok   bool
	}{
		{`{"scope":"process","maxReceipts":5,"epoch":"e1"}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess, MaxReceipts: 5, Epoch: "e1"}, true},
		{`{"scope":"process"}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess}, true},
		{`{"scope":"session","epoch":"e1"}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeSession, Epoch: "e1"}, true},
		// An epoch that is no string names no process: the scope is still declared.
		{`{"scope":"process","epoch":42}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess}, true},
		{`{"scope":"process","epoch":{"id":"e1"}}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess}, true},
		{`{"scope":"process","epoch":null}`, mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeProcess}, true},
		{`{"scope":"forever","epoch":"e1"}`, mcpclient.RequestReceipts{}, false},
		{`{"scope":"process","maxReceipts":"many"}`, mcpclient.RequestReceipts{}, false},
		{`"process"`, mcpclient.RequestReceipts{}, false},
		{`{"scope":"store","epoch":"db1","retentionMs":3600000,"disconnect":"cancel"}`,
			mcpclient.RequestReceipts{Scope: mcpclient.ReceiptScopeStore, Epoch: "db1", RetentionMs: 3600000, Disconnect: "cancel"}, true},
	}
	for _, tc := range cases {
		caps := mcpclient.ServerCapabilities{Extensions: map[string]json.RawMessage{mcpclient.RequestReceiptsExtension: json.RawMessage(tc.decl)}}
		got, ok := caps.RequestReceipts()
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v %v, want %+v %v", tc.decl, got, ok, tc.want, tc.ok)
		}
	}
	var none mcpclient.ServerCapabilities
	if got, ok := none.RequestReceipts(); ok || got != (mcpclient.RequestReceipts{}) {
		t.Errorf("no declaration: %+v %v", got, ok)
	}
	// The experimental key the extension replaced is not read: a server must declare the
	// extension.
	old := mcpclient.ServerCapabilities{Experimental: map[string]json.RawMessage{"requestReceipts": json.RawMessage(`{"scope":"process","epoch":"e1"}`)}}
	if got, ok := old.RequestReceipts(); ok {
		t.Errorf("the experimental key read as a declaration: %+v", got)
	}
}
