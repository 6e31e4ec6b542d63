package mcpclient

import (
	"testing"

	"github.com/northstar-mcp/mcpclient/receipts"
)

// The client and the server half of the receipts extension name the same things.
func TestClientAndMiddlewareAgreeOnTheWire(t *testing.T) {
	if requestReceiptsExtension != receipts.ExtensionID || receiptInDoubtMarker != receipts.CodeInDoubt ||
		reusedIDMarker != receipts.CodeIDReused {
		t.Error("the client and the receipts package disagree on the extension's names")
	}
}

// Only receipts kept for the process, under one epoch declared on both sides, outlive a session.
func TestReceiptsSurvive(t *testing.T) {
	s := func(scope ReceiptScope, epoch string) *session {
		return &session{receipts: scope, receiptEpoch: epoch}
	}
	cases := []struct {
		name      string
		old, next *session
		want      bool
	}{
		{"process, same epoch", s(ReceiptScopeProcess, "e1"), s(ReceiptScopeProcess, "e1"), true},
		{"process, new epoch", s(ReceiptScopeProcess, "e1"), s(ReceiptScopeProcess, "e2"), false},
		{"process, no epoch", s(ReceiptScopeProcess, ""), s(ReceiptScopeProcess, ""), false},
		{"process, epoch gone", s(ReceiptScopeProcess, "e1"), s(ReceiptScopeProcess, ""), false},
		{"process, epoch come", s(ReceiptScopeProcess, ""), s(ReceiptScopeProcess, "e1"), false},
		{"session scope, same epoch", s(ReceiptScopeSession, "e1"), s(ReceiptScopeSession, "e1"), false},
		{"scope narrowed", s(ReceiptScopeProcess, "e1"), s(ReceiptScopeSession, "e1"), false},
		{"scope widened", s(ReceiptScopeSession, "e1"), s(ReceiptScopeProcess, "e1"), false},
		{"no receipts now", s(ReceiptScopeProcess, "e1"), s("", "e1"), false},
	}
	for _, tc := range cases {
		if got := receiptsHeld(bindingOf(tc.old), bindingOf(tc.next)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
