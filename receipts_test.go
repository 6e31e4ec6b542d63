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
	}
	for _, tc := range cases {
		caps := mcpclient.ServerCapabilities{Experimental: map[string]json.RawMessage{mcpclient.RequestReceiptsKey: json.RawMessage(tc.decl)}}
		got, ok := caps.RequestReceipts()
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v %v, want %+v %v", tc.decl, got, ok, tc.want, tc.ok)
		}
	}
	var none mcpclient.ServerCapabilities
	if got, ok := none.RequestReceipts(); ok || got != (mcpclient.RequestReceipts{}) {
		t.Errorf("no declaration: %+v %v", got, ok)
	}
}
