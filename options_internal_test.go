package mcpclient

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/northstar-mcp/mcpclient/internal/metakeys"
)

// A client configured with no handler and no test hook shares the package's empty sets, and the
// options that set them write into a set of the client's own: never into the shared ones, which
// every other client reads.
func TestOptionsLeaveTheSharedDefaultsAlone(t *testing.T) {
	hooksBefore := defaultHooks
	var plain config
	plain.apply(nil)
	if plain.handlers != &noHandlers || plain.testHooks != &defaultHooks {
		t.Fatal("a client without handlers or hooks does not share the defaults")
	}

	options := map[string]Option{
		"WithNotificationHandler":    WithNotificationHandler("notifications/message", func(context.Context, string, json.RawMessage) {}),
		"WithRequestHandler":         WithRequestHandler("x/y", func(context.Context, json.RawMessage) (any, error) { return nil, nil }),
		"WithSamplingHandler":        WithSamplingHandler(func(context.Context, *CreateMessageParams) (*CreateMessageResult, error) { return nil, nil }),
		"WithElicitationHandler":     WithElicitationHandler(func(context.Context, *ElicitParams) (*ElicitResult, error) { return nil, nil }),
		"WithURLElicitationHandler":  WithURLElicitationHandler(func(context.Context, *URLElicitParams) (*ElicitResult, error) { return nil, nil }),
		"WithRoots":                  WithRoots(Root{URI: "file:///tmp"}),
		"WithLogHandler":             WithLogHandler(func(context.Context, *LogMessage) {}),
		"WithResourceUpdatedHandler": WithResourceUpdatedHandler(func(context.Context, string) {}),
		"WithInterceptors":           WithInterceptors(func(next Handler) Handler { return next }),
		"WithAttemptHook":            WithAttemptHook(func(context.Context, AttemptEvent) {}),
		"WithInboxHardLimitForTest":  WithInboxHardLimitForTest(1),
		"WithJoinHookForTest":        WithJoinHookForTest(func(ID) {}),
		"WithSupersedeHookForTest":   WithSupersedeHookForTest(func() {}),
	}
	// Each alone, so that one option's own set cannot hide another writing into the shared one.
	for name, o := range options {
		var c config
		c.apply([]Option{o})
		if err := c.err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.handlers == &noHandlers && c.testHooks == &defaultHooks {
			t.Errorf("%s: the client has no set of its own for what it set", name)
		}
		if !noHandlers.none() {
			t.Fatalf("%s wrote the shared handler set: %+v", name, noHandlers)
		}
		if !reflect.DeepEqual(defaultHooks, hooksBefore) {
			t.Fatalf("%s wrote the shared hooks: %+v", name, defaultHooks)
		}
	}

	var full config
	full.apply(append(slices.Collect(maps.Values(options)), WithAttemptHook(func(context.Context, AttemptEvent) {})))
	h := full.handlers
	if h.notifications == nil || h.requestHandlers == nil || h.sampling == nil || h.elicitation == nil ||
		h.urlElicitation == nil || h.roots == nil || h.logHandler == nil || h.resourceUpdated == nil ||
		h.interceptors == nil || h.intercept == nil || h.onAttempt == nil {
		t.Errorf("the client's handlers miss some the options set: %+v", *h)
	}
	if hk := full.testHooks; hk.inbox.hardBytes != 1 || hk.inbox.soft != inboxSoftLimit || hk.onJoin == nil || hk.onSupersedeBuilt == nil {
		t.Errorf("the client's hooks: %+v", *hk)
	}

	// An option that sets nothing leaves the client on the shared sets.
	var none config
	none.apply([]Option{WithSamplingHandler(nil), WithAttemptHook(nil)})
	if none.handlers != &noHandlers || none.testHooks != &defaultHooks {
		t.Error("options that set no handler left a set of the client's own")
	}
}

// newConfig returns the configuration opts give, as Connect applies it to a Client.
func newConfig(opts []Option) config {
	var c config
	c.apply(opts)
	return c
}

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
			if got := m.Set[metakeys.ClientInfo]; string(got) != string(info) {
				t.Errorf("clientInfo %s, want %s", got, info)
			}
			if got := m.Set[metakeys.ProtocolVersion]; string(got) != string(rev) {
				t.Errorf("revision %s, want %s", got, rev)
			}
		}
	}
}

// The params of initialize of a client that declares only receipts under the default clientInfo
// are encoded once per revision, and must be what encoding them for the client would give; other
// clients encode their own.
func TestInitializeParamsOfTheDefaultClientAreTheEncodedOnes(t *testing.T) {
	for _, opts := range [][]Option{
		nil,
		{WithClientInfo(Implementation{Name: "other", Version: "1"})},
		{WithExtension("example/x", map[string]int{"n": 1})},
		{WithRoots(Root{URI: "file:///tmp"})},
	} {
		c := newConfig(opts)
		for _, v := range append(slices.Clone(supportedVersions), "1999-01-01") {
			got, err := c.initializeParams(v)
			if err != nil {
				t.Fatal(err)
			}
			caps, _ := json.Marshal(c.capabilities())
			want, _ := json.Marshal(initializeParams{ProtocolVersion: v, Capabilities: caps, ClientInfo: c.info})
			if string(got) != string(want) {
				t.Errorf("initialize params offering %s: %s, want %s", v, got, want)
			}
			if c.info == &defaultClientInfo && c.declaresOnlyReceipts() && slices.Contains(supportedVersions, v) && cap(got) != len(got) {
				t.Errorf("the shared initialize params offering %s have room to append into", v)
			}
		}
	}
}

// Clients that declare only receipts under the default clientInfo, with no log level, share
// one _meta per stateless revision; a client with a log level, or an identity of its own, has
// its own.
func TestDefaultClientsShareTheirStatelessMeta(t *testing.T) {
	a, b := &Client{cfg: newConfig(nil)}, &Client{cfg: newConfig(nil)}
	ma, err := a.statelessMeta("2026-07-28")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := b.statelessMeta("2026-07-28")
	if ma != mb {
		t.Error("two default clients encoded their _meta each")
	}
	for what, v := range ma.Set {
		if cap(v) != len(v) {
			t.Errorf("the shared _meta's %s has room to append into", what)
		}
	}
	level := "debug"
	b.logLevel.Store(&level)
	if mb, _ = b.statelessMeta("2026-07-28"); ma == mb || string(mb.Set[metakeys.LogLevel]) != `"debug"` {
		t.Errorf("a client with a log level shares the default _meta, or lacks its level: %s", mb.Set)
	}
	own := &Client{cfg: newConfig([]Option{WithClientInfo(Implementation{Name: "own", Version: "1"})})}
	if mo, _ := own.statelessMeta("2026-07-28"); ma == mo {
		t.Error("a client with its own clientInfo shares the default _meta")
	}
}
