package durable_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/durable"
	"github.com/northstar-mcp/mcpclient/mcptest"
)

// classes is the verdict of every Code when ctx is live and the error names no context ending.
var classes = map[mcpclient.Code]string{
	mcpclient.CodeOutcomeUnknown:     durable.TypeOutcomeUnknown,
	mcpclient.CodeNotDelivered:       durable.TypeNotDelivered,
	mcpclient.CodeRequestInFlight:    durable.TypeInFlight,
	mcpclient.CodeRequestIDReused:    durable.TypeConflict,
	mcpclient.CodeLedgerFull:         durable.TypeNotDelivered,
	mcpclient.CodeServerError:        durable.TypeFailed,
	mcpclient.CodeUnsupportedVersion: durable.TypeFailed,
	mcpclient.CodeProtocol:           durable.TypeFailed,
	mcpclient.CodeInvalidArgument:    durable.TypeFailed,
	mcpclient.CodeClosed:             durable.TypeNotDelivered,
	mcpclient.CodeStructuredContent:  durable.TypeFailed,
	mcpclient.CodeRefused:            durable.TypeFailed,
	mcpclient.CodeUnauthorized:       durable.TypeNotDelivered,
	mcpclient.CodeSkillVerification:  durable.TypeFailed,
	mcpclient.CodeJournal:            durable.TypeNotDelivered,
	mcpclient.CodeSuperseded:         durable.TypeConflict,
	mcpclient.CodeAlreadyAnswered:    durable.TypeConflict,
}

var retries = map[string]bool{
	durable.TypeOutcomeUnknown: false,
	durable.TypeInterrupted:    true,
	durable.TypeInFlight:       true,
	durable.TypeConflict:       false,
	durable.TypeNotDelivered:   true,
	durable.TypeFailed:         false,
}

// TestClassifyEveryCode fails when mcpclient gains a Code this table does not classify on
// purpose: it would otherwise fall to TypeFailed unseen.
func TestClassifyEveryCode(t *testing.T) {
	for c := mcpclient.Code(1); !strings.HasPrefix(c.String(), "Code("); c++ {
		want, ok := classes[c]
		if !ok {
			t.Errorf("Code %d (%s) is not classified", int(c), c)
			continue
		}
		v := durable.Classify(context.Background(), &mcpclient.Error{Code: c, Err: fmt.Errorf("cause")})
		if v.Type != want || v.Code != c || (v.Class == durable.Retry) != retries[want] {
			t.Errorf("Classify(%s) = %+v, want type %s, retry %v", c, v, want, retries[want])
		}
	}
}

func TestClassifyOutcomeUnknown(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"the client gave up", context.Background(),
			&mcpclient.Error{Code: mcpclient.CodeOutcomeUnknown, Err: mcpclient.ErrSessionLost}, durable.TypeOutcomeUnknown},
		{"the caller's context ended", cancelled,
			&mcpclient.Error{Code: mcpclient.CodeOutcomeUnknown, Err: context.Canceled}, durable.TypeInterrupted},
		{"the call's own bound passed", context.Background(),
			&mcpclient.Error{Code: mcpclient.CodeOutcomeUnknown, Err: fmt.Errorf("%w: %w", mcpclient.ErrCallTimeout, context.DeadlineExceeded)}, durable.TypeInterrupted},
		{"a transport's timeout under a live context", context.Background(),
			&mcpclient.Error{Code: mcpclient.CodeOutcomeUnknown, Err: context.DeadlineExceeded}, durable.TypeOutcomeUnknown},
		{"a context that ended for no part of the call", cancelled,
			&mcpclient.Error{Code: mcpclient.CodeOutcomeUnknown, Err: mcpclient.ErrMalformedResponse}, durable.TypeOutcomeUnknown},
		{"no *mcpclient.Error", context.Background(), fmt.Errorf("not in an activity"), durable.TypeFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := durable.Classify(tt.ctx, tt.err)
			if v.Type != tt.want || (v.Class == durable.Retry) != retries[tt.want] {
				t.Errorf("Classify = %+v, want %s", v, tt.want)
			}
		})
	}
}

func TestClassifyNamesTheRequest(t *testing.T) {
	c := mcptest.NewClient(t, mcptest.NewTestServer(t))
	id := mcpclient.IDFromKey("durable test", "job")
	req, err := c.NewRequest("tools/call", map[string]any{"name": "t"}, mcpclient.WithRequestID(id))
	if err != nil {
		t.Fatal(err)
	}
	v := durable.Classify(context.Background(), fmt.Errorf("wrapped: %w",
		&mcpclient.Error{Code: mcpclient.CodeRequestIDReused, Request: req, Err: mcpclient.ErrRequestIDReused}))
	if v.RequestID != id || v.Type != durable.TypeConflict {
		t.Errorf("Classify = %+v, want id %s and %s", v, id, durable.TypeConflict)
	}
}

func TestKeyKeepsPartsApart(t *testing.T) {
	if durable.Key("a/b", "c") == durable.Key("a", "b/c") || durable.Key("a", "") == durable.Key("a") {
		t.Error("two lists of parts give one key")
	}
	if durable.Key("w", "r", "1") != durable.Key("w", "r", "1") {
		t.Error("one list of parts gives two keys")
	}
}
