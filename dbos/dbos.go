package mcpdbos

import (
	"context"
	"errors"
	"strconv"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/durable"
)

// idNamespace sets this package's ids apart from those other programs derive with IDFromKey.
// Changing it changes every id: it is fixed for good.
const idNamespace = "github.com/northstar-mcp/mcpclient/dbos"

// The types of the errors a step returns (see the package documentation).
const (
	TypeOutcomeUnknown = durable.TypeOutcomeUnknown
	TypeInterrupted    = durable.TypeInterrupted
	TypeInFlight       = durable.TypeInFlight
	TypeConflict       = durable.TypeConflict
	TypeNotDelivered   = durable.TypeNotDelivered
	TypeFailed         = durable.TypeFailed
)

// ErrNotInStep is the cause of the error RequestID and Step return for a context that is no
// DBOS step's.
var ErrNotInStep = errors.New("mcpdbos: not called with a DBOS step's context")

// An Error is the error of a step's call: what DBOS's retry predicate ([Retryable]) and the
// workflow see.
type Error struct {
	// Type names the class of the failure: one of the Type constants.
	Type string
	// RequestID is the id the call was made under; zero when the error is about no request.
	RequestID mcpclient.ID
	// Retry reports whether another run of the step may help, and cannot run the tool twice.
	Retry bool
	// Err is the call's error, an *mcpclient.Error for every failure of the call itself.
	Err error
}

func (e *Error) Error() string {
	s := "mcpdbos: " + e.Type
	if !e.RequestID.IsZero() {
		s += " (request " + e.RequestID.JSON() + ")"
	}
	if !e.Retry {
		s += ", not retried"
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the call's error.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether DBOS may run a step again after err: whether err is an *Error that
// says so. It is the retry predicate CallTool gives DBOS (WithStepRetryPredicate); an error of
// anything else is not retried.
func Retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retry
}

// StepError returns the error for err, the error of a call made under ctx: an *Error of one of
// the types above. Step returns its errors so; StepError is for a step that calls through
// mcpclient otherwise (Do, Resend) under a RequestID. A nil err gives nil.
func StepError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	v := durable.Classify(ctx, err)
	return &Error{Type: v.Type, RequestID: v.RequestID, Retry: v.Class == durable.Retry, Err: err}
}

// RequestID returns the request id of the call named key made by the step whose context is ctx
// (the context.Context DBOS hands the step function): the same every time the step runs, and
// different for every other step and workflow (see the package documentation). CallTool and
// Step use the tool's name as key.
func RequestID(ctx context.Context, key string) (mcpclient.ID, error) {
	dctx, ok := ctx.(dbos.Context)
	if !ok {
		return mcpclient.ID{}, ErrNotInStep
	}
	workflowID, err := dbos.GetWorkflowID(dctx)
	if err != nil {
		return mcpclient.ID{}, errors.Join(ErrNotInStep, err)
	}
	stepID, err := dbos.GetStepID(dctx)
	if err != nil {
		return mcpclient.ID{}, errors.Join(ErrNotInStep, err)
	}
	return requestID(workflowID, stepID, key), nil
}

func requestID(workflowID string, stepID int, key string) mcpclient.ID {
	return mcpclient.IDFromKey(idNamespace, durable.Key(workflowID, strconv.Itoa(stepID), key))
}

// Step returns a step function that calls the tool name with args through c, under the request
// id RequestID(ctx, name) of the step it runs as, or the one opts pin with
// mcpclient.WithRequestID. Its errors are *Error. Run it with dbos.RunAsStep or dbos.Go, giving
// Retryable as the retry predicate and a step name of your own (WithStepName): DBOS checks the
// name on recovery, and the name it makes up for a function it was handed without one depends on
// where the compiler put the function. CallTool does all three.
func Step(c mcpclient.Caller, name string, args any, opts ...mcpclient.CallOption) dbos.Step[*mcpclient.CallToolResult] {
	opts = opts[:len(opts):len(opts)]
	return func(ctx context.Context) (*mcpclient.CallToolResult, error) {
		callOpts := opts
		if mcpclient.RequestIDOf(opts...).IsZero() {
			id, err := RequestID(ctx, name)
			if err != nil {
				return nil, &Error{Type: TypeFailed, Err: err}
			}
			callOpts = append(opts, mcpclient.WithRequestID(id))
		}
		res, err := c.CallTool(ctx, name, args, callOpts...)
		if err != nil {
			// A result whose structuredContent does not match the tool's outputSchema comes
			// with its error; DBOS records one or the other.
			return nil, StepError(ctx, err)
		}
		return res, nil
	}
}

// CallTool runs Step(c, name, args) as a step of the workflow running under ctx, with Retryable
// as its retry predicate and, unless opts name it, the step name "mcp.tools/call:"+name. opts
// configure the step as for dbos.RunAsStep: DBOS retries a step only up to WithStepMaxRetries
// (none by default). A step that needs call options (mcpclient.CallOption) runs Step itself.
func CallTool(ctx dbos.Context, c mcpclient.Caller, name string, args any, opts ...dbos.StepOption) (*mcpclient.CallToolResult, error) {
	// The step name is recorded with the step and checked on recovery: it is fixed for good.
	// The user's options come first, since the first name given is the one kept; the predicate
	// comes last, since the last one given is.
	opts = append(opts[:len(opts):len(opts)], dbos.WithStepName("mcp.tools/call:"+name), dbos.WithStepRetryPredicate(Retryable))
	return dbos.RunAsStep(ctx, Step(c, name, args), opts...)
}
