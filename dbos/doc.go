// Package mcpdbos calls MCP tools from DBOS workflow steps so that a step DBOS runs again runs its
// tool once.
//
// DBOS runs a step at least once: it retries a step that failed (up to WithStepMaxRetries), and
// a workflow whose process died resumes, on recovery, from its last completed step, running the
// interrupted step again. A tools/call made afresh each time goes out under a new request id, and
// the server runs the tool again. [CallTool] and [Step] call under an id derived from the step's
// identity instead, the same every time the step runs, and send the same bytes under it, so that
// a server that keeps receipts answers a rerun from the receipt of the first run.
//
// # The request id
//
// The id is [mcpclient.IDFromKey] of the namespace "github.com/northstar-mcp/mcpclient/dbos" and
// a key made of the workflow id, the step's id within the workflow (its function id: DBOS numbers
// a workflow's steps in the order the workflow runs them, the same on recovery), and the call's
// key, the tool's name for CallTool and Step.
//
// A step's retries and its reruns on recovery share its workflow id and step id, so they call
// under one id. Another step, another workflow, and a fork of the workflow (ForkWorkflow gives
// the fork a new workflow id) call under others: a fork runs the tools of the steps it runs again,
// as a fork is meant to. DBOS keeps workflow ids unique within one system database; two
// applications with system databases of their own, calling one server under the same
// credentials, must not reuse each other's workflow ids (prefix them).
//
// A step that calls one tool more than once names each call: it passes
// mcpclient.WithRequestID(id) with an id from RequestID(ctx, "a key of the call's own"), which
// Step uses as given. The arguments must be the same on every run: other arguments under the id
// are refused as ErrRequestIDReused.
//
// Only the id is added: nothing that changes between runs goes into the request, whose bytes a
// rerun must repeat. A Caller that writes trace context into params._meta (package otel's) must
// write on a rerun what the first run's request carries; see mcpclient.Client.Journaled.
//
// # Errors and retries
//
// DBOS retries a failed step up to WithStepMaxRetries times (none by default) unless its
// WithStepRetryPredicate says no. CallTool sets the predicate to [Retryable], and a step's error
// is an [*Error] naming the request id and the class of the failure:
//
//   - "MCPOutcomeUnknown", not retried: the request may have run and the client could not learn
//     its outcome, nor can another attempt safely (mcpclient.ErrOutcomeUnknown, when the client
//     gave up: a lost receipt scope, a malformed answer). Someone must look at the server's state
//     for the request id.
//   - "MCPCallInterrupted", retried: the call's own context ended after the request may have
//     been sent (a step context with a deadline, the call's WithTimeouts bound). The client would
//     have sent the same bytes again under the same id; the retry does so and reads the outcome
//     from the server's receipt. A workflow that is cancelled while the step runs is not
//     retried: DBOS records nothing for the step, and a resume runs it again under the same id.
//   - "MCPRequestInFlight", retried: the server is running the request under its id (an earlier
//     run's) and refused a second copy. It cannot run twice; a later retry reads its outcome.
//   - "MCPRequestConflict", not retried: the id is taken by other content
//     (mcpclient.ErrRequestIDReused), the request was superseded (ErrAlreadySuperseded), or it
//     was answered under receipts the server no longer holds (ErrAlreadyAnswered).
//   - "MCPNotDelivered", retried: nothing ran (mcpclient.ErrNotDelivered; the client closed, its
//     ledger full, its journal failing, credentials refused before the request ran).
//   - "MCPCallFailed", not retried: the server answered with a JSON-RPC error, or with an answer
//     that is not valid MCP, or the call is wrong (invalid arguments, refused by an interceptor,
//     an unsupported protocol revision). Another attempt under the id gets the same answer.
//
// A step error DBOS stops on is recorded as the step's outcome, as its text: on recovery the
// workflow gets an error with the same message, which names the type and the request id.
//
// A tool that ran and reports its own failure (CallToolResult.IsError) is an answer, not an
// error: the step returns the result, which DBOS records, and the workflow decides what it
// means. A rerun under the id would get the same result from the receipt.
package mcpdbos
