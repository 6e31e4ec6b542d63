package mcpclient

import (
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
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
