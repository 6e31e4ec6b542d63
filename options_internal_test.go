package mcpclient

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/northstar-mcp/mcpclient/internal/metakeys"
)

// The capabilities of a client that declares nothing but the receipts extension are encoded once,
// and must read as the maps they stand for would encode, in initialize and in a stateless
// revision's _meta alike; a client that declares more has its capabilities encoded in full.
func TestOnlyReceiptsCapabilitiesAreTheEncodedOnes(t *testing.T) {
	plain := newConfig(nil)
	if !plain.declaresOnlyReceipts() {
		t.Fatal("a client without handlers or extensions declares more than receipts")
	}
	initialize, err := json.Marshal(plain.capabilities())
	if err != nil {
		t.Fatal(err)
	}
	stateless, err := json.Marshal(plain.statelessCapabilities())
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string][]byte{"initialize": initialize, "stateless": stateless} {
		if string(got) != string(onlyReceiptsCapabilities) {
			t.Errorf("%s capabilities %s, the shortcut says %s", what, got, onlyReceiptsCapabilities)
		}
	}
	for name, o := range map[string]Option{
		"WithRoots":                 WithRoots(Root{URI: "file:///tmp"}),
		"WithSamplingHandler":       WithSamplingHandler(func(context.Context, *CreateMessageParams) (*CreateMessageResult, error) { return nil, nil }),
		"WithElicitationHandler":    WithElicitationHandler(func(context.Context, *ElicitParams) (*ElicitResult, error) { return nil, nil }),
		"WithURLElicitationHandler": WithURLElicitationHandler(func(context.Context, *URLElicitParams) (*ElicitResult, error) { return nil, nil }),
		"WithExtension":             WithExtension("example/x", map[string]int{"n": 1}),
		"WithExtension(receipts)":   WithExtension(requestReceiptsExtension, map[string]int{"n": 1}),
	} {
		c := newConfig([]Option{o})
		got, err := c.initializeCapabilities()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, _ := json.Marshal(c.capabilities())
		if c.declaresOnlyReceipts() || string(got) != string(want) {
			t.Errorf("%s: initialize capabilities %s, want %s", name, got, want)
		}
	}
}

// A stateless revision's _meta carries the client's clientInfo and revision as json.Marshal
// encodes them, whether the client's clientInfo is the default one, encoded once, or its own.
func TestStatelessMetaEncodesInfoAndRevision(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithClientInfo(Implementation{Name: "a<b>\"c", Version: "1"})}} {
		c := &Client{cfg: newConfig(opts)}
		for _, v := range []string{"2026-07-28", "x\"<y>"} {
			m, err := c.statelessMeta(v)
			if err != nil {
				t.Fatal(err)
			}
			info, _ := json.Marshal(c.cfg.info)
			rev, _ := json.Marshal(v)
			if got := m[metakeys.ClientInfo]; string(got) != string(info) {
				t.Errorf("clientInfo %s, want %s", got, info)
			}
			if got := m[metakeys.ProtocolVersion]; string(got) != string(rev) {
				t.Errorf("revision %s, want %s", got, rev)
			}
		}
	}
}
