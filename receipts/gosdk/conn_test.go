package receiptsgosdk_test

import (
	"encoding/json"
	"testing"

	"github.com/northstar-mcp/mcpclient/receipts"
)

func TestInitializeCarriesTheDeclaration(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	r := l.open(initOptedIn)
	raw, ok := r.Result.Capabilities.Extensions[receipts.ExtensionID]
	if !ok {
		t.Fatalf("initialize result without the declaration: %+v", r.Result.Capabilities)
	}
	var d receipts.Declaration
	if err := json.Unmarshal(raw, &d); err != nil || d.Scope != receipts.ScopeProcess || d.Epoch == "" || d.Disconnect != receipts.DisconnectContinue {
		t.Fatalf("declaration %s (%v), want scope process with an epoch", raw, err)
	}
}

func TestResendOnTheSameConnectionIsReplayed(t *testing.T) {
	b := newBooking()
	s := serve(t, b.srv, through(adapterFor(receipts.Options{})))
	l := dialLines(t, s)
	l.open(initOptedIn)
	l.send(charge(`"c-1"`, 500))
	first := parseReply(t, l.recv())
	l.send(charge(`"c-1"`, 500))
	second := parseReply(t, l.recv())
	if first.replayed() || !second.replayed() || first.text() != second.text() || first.text() == "" {
		t.Fatalf("first %+v replayed=%v, second %+v replayed=%v", first.Result, first.replayed(), second.Result, second.replayed())
	}
	if n := b.runs.Load(); n != 1 {
		t.Fatalf("charge ran %d times, want 1", n)
	}
}
