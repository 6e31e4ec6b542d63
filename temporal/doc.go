// Package mcptemporal calls MCP tools from Temporal activities so that an activity the engine
// retries runs its tool once.
//
// Temporal runs an activity at least once: it retries one that failed or timed out, and one whose
// worker died. A tools/call made afresh on each attempt goes out under a new request id, and a
// server cannot tell it from a new request: the tool runs again. [CallTool] calls under an id
// derived from the activity's identity instead, the same on every attempt, and sends the same
// bytes under it, so that a server that keeps receipts answers a retry from the receipt of the
// first run rather than running the tool again.
//
// # The request id
//
// The id is [mcpclient.IDFromKey] of the namespace "github.com/northstar-mcp/mcpclient/temporal"
// and a key made of, for an activity a workflow scheduled:
//
//   - the Temporal namespace, the workflow id and the workflow's run id, and the activity id;
//   - the call's key: the tool's name for CallTool, or the key given to [RequestID].
//
// The attempt number is left out, so every attempt of one activity execution calls under one
// id, across workers and processes. The run id is in, because a workflow id names a chain of
// runs: a continue-as-new, a workflow retry or a reset starts a new run, whose activity ids start
// over ("1", "2", ...) and whose activities are new work, not retries of the old run's; keyed by
// the workflow id alone, the new run's activity "1" would be answered with the old run's result.
// A reset therefore runs the tools of the activities it replays again, as a reset is meant to.
// An activity started on its own (no workflow) is keyed by its namespace, activity id and
// activity run id.
//
// An activity that calls one tool more than once names each call: it passes
// mcpclient.WithRequestID(id) with an id from RequestID(ctx, "a key of the call's own"), which
// CallTool uses as given. The activity's arguments, and so the tool's, must be the same on every
// attempt (Temporal's are): other arguments under the id are refused as ErrRequestIDReused.
//
// Only the id is added: nothing that changes between attempts goes into the request, whose bytes
// a retry must repeat. A Caller that writes trace context into params._meta (package otel's)
// must write on a retry what the first attempt's request carries; see mcpclient.Client.Journaled.
//
// # Errors
//
// CallTool returns an error as a Temporal *temporal.ApplicationError whose type names the class
// of the failure, whose details are a [Details] naming the request id, and whose cause is the
// *mcpclient.Error (errors.Is and errors.As see through it, in the activity):
//
//   - "MCPOutcomeUnknown", not retryable: the request may have run and the client could not
//     learn its outcome, nor can another attempt safely (mcpclient.ErrOutcomeUnknown, when the
//     client gave up: a lost receipt scope, a malformed answer). Someone must look at the
//     server's state for the request id in the details.
//   - "MCPCallInterrupted", retryable: the call's own context ended after the request may have
//     been sent (the activity timed out, was cancelled, its worker stopped; or the call's
//     WithTimeouts bound passed). The client would have sent the same bytes again under the same
//     id; the next attempt does so, and reads the outcome from the server's receipt. (Temporal
//     itself does not retry an activity that was cancelled, and after a timeout it retries by
//     its policy whatever the attempt returns.)
//   - "MCPRequestInFlight", retryable: the server is running the request under its id (an earlier
//     attempt's) and refused a second copy. It cannot run twice; a later attempt reads its
//     outcome.
//   - "MCPRequestConflict", not retryable: the id is taken by other content
//     (mcpclient.ErrRequestIDReused), the request was superseded (ErrAlreadySuperseded), or it
//     was answered under receipts the server no longer holds (ErrAlreadyAnswered).
//   - "MCPNotDelivered", retryable: nothing ran (mcpclient.ErrNotDelivered; the client closed,
//     its ledger full, its journal failing, credentials refused before the request ran).
//   - "MCPCallFailed", not retryable: the server answered with a JSON-RPC error, or with an answer
//     that is not valid MCP, or the call is wrong (invalid arguments, refused by an interceptor,
//     an unsupported protocol revision). Another attempt under the id gets the same answer.
//
// A tool that ran and reports its own failure (CallToolResult.IsError) is an answer, not an
// error: CallTool returns the result and no error, and the activity decides what it means.
// Another attempt under the id would get the same result from the receipt. A result whose
// structuredContent does not match the tool's outputSchema comes back with its "MCPCallFailed"
// error, as mcpclient returns it.
//
// A retry policy may list any of the retryable types in NonRetryableErrorTypes to stop on them.
package mcptemporal
