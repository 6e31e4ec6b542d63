package mcptemporal

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/durable"
)

// idNamespace sets this package's ids apart from those other programs derive with IDFromKey.
// Changing it changes every id: it is fixed for good.
const idNamespace = "github.com/northstar-mcp/mcpclient/temporal"

// The types of the *temporal.ApplicationError CallTool returns (see the package documentation).
const (
	TypeOutcomeUnknown = durable.TypeOutcomeUnknown
	TypeInterrupted    = durable.TypeInterrupted
	TypeInFlight       = durable.TypeInFlight
	TypeConflict       = durable.TypeConflict
	TypeNotDelivered   = durable.TypeNotDelivered
	TypeFailed         = durable.TypeFailed
)

// Details are the details of the errors CallTool returns: read them with
// (*temporal.ApplicationError).Details.
type Details struct {
	// RequestID is the id the call was made under, as its JSON text ("..." for a string id);
	// empty when the error is about no request.
	RequestID string `json:"requestId,omitempty"`
	// Code is the mcpclient Code of the failure, as its String names it; empty when the error
	// was no *mcpclient.Error.
	Code string `json:"code,omitempty"`
}

// ErrNotInActivity is the cause of the error CallTool and RequestID return outside an activity.
var ErrNotInActivity = errors.New("mcptemporal: not called from a Temporal activity")

// RequestID returns the request id of the call named key made by the activity running under ctx:
// the same on every attempt of the activity, and different for every other activity and run
// (see the package documentation). CallTool uses the tool's name as key.
func RequestID(ctx context.Context, key string) (mcpclient.ID, error) {
	if !activity.IsActivity(ctx) {
		return mcpclient.ID{}, ErrNotInActivity
	}
	return requestID(activity.GetInfo(ctx), key), nil
}

func requestID(info activity.Info, key string) mcpclient.ID {
	if info.WorkflowExecution.ID == "" {
		return mcpclient.IDFromKey(idNamespace, durable.Key("activity", info.Namespace, info.ActivityID, info.ActivityRunID, key))
	}
	return mcpclient.IDFromKey(idNamespace, durable.Key("workflow", info.Namespace,
		info.WorkflowExecution.ID, info.WorkflowExecution.RunID, info.ActivityID, key))
}

// CallTool calls the tool name with args through c, from the activity running under ctx, under
// the request id RequestID(ctx, name), or the one opts pin with mcpclient.WithRequestID. Its
// error is a *temporal.ApplicationError, retryable or not by what it says of the request (see
// the package documentation); with CodeStructuredContent the result comes with it.
func CallTool(ctx context.Context, c mcpclient.Caller, name string, args any, opts ...mcpclient.CallOption) (*mcpclient.CallToolResult, error) {
	if mcpclient.RequestIDOf(opts...).IsZero() {
		id, err := RequestID(ctx, name)
		if err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), TypeFailed, err)
		}
		opts = append(opts[:len(opts):len(opts)], mcpclient.WithRequestID(id))
	}
	res, err := c.CallTool(ctx, name, args, opts...)
	if err != nil {
		return res, ActivityError(ctx, err)
	}
	return res, nil
}

// ActivityError returns the activity error for err, the error of a call made under ctx: a
// *temporal.ApplicationError of one of the types above, retryable or not, with a Details and err
// as its cause. CallTool returns its errors so; ActivityError is for an activity that calls through
// mcpclient otherwise (Do, Resend) under a RequestID. A nil err gives nil.
func ActivityError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	v := durable.Classify(ctx, err)
	d := Details{}
	if v.Code != 0 {
		d.Code = v.Code.String()
	}
	if !v.RequestID.IsZero() {
		d.RequestID = v.RequestID.JSON()
	}
	msg := "mcptemporal: " + v.Type + ": " + err.Error() // an *mcpclient.Error names its request
	if v.Class == durable.Retry {
		return temporal.NewApplicationErrorWithCause(msg, v.Type, err, d)
	}
	return temporal.NewNonRetryableApplicationError(msg, v.Type, err, d)
}
