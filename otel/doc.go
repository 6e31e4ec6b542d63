// Package mcpotel instruments an mcpclient.Caller with OpenTelemetry, after the semantic
// conventions for the Model Context Protocol: a CLIENT span per request, the trace context in
// each request's params._meta, a span event per attempt, and the metrics
// mcp.client.operation.duration and mcp.client.session.duration.
//
//	c, err := mcpclient.Connect(ctx, tr, mcpotel.AttemptHook())
//	if err != nil { ... }
//	caller := mcpotel.Wrap(c) // the global providers and propagator; see the Options
//	defer caller.Close()      // closes c and records the session's duration
//	res, err := caller.CallTool(ctx, "search", args)
//
// # Spans
//
// Each call of the wrapper is a CLIENT span, named "{mcp.method.name} {target}": the target is
// the tool of a tools/call, the prompt of a prompts/get (or of a completion/complete of a prompt's
// argument), or with WithResourceURITarget the URI of a resources/read, subscribe or unsubscribe;
// other spans are named after their method. Attributes: mcp.method.name, jsonrpc.request.id (the
// id last sent, a re-issue's after a re-issue under a new id), mcp.protocol.version, mcp.session.id
// only WithSessionID (a session id is a bearer of the session; spans leave the process),
// gen_ai.tool.name and gen_ai.operation.name "execute_tool" (tools/call), gen_ai.prompt.name,
// mcp.resource.uri, those of WithAttributes, and on failure error.type with an ERROR status.
//
// error.type is, as the conventions ask, the JSON-RPC error code ("-32602") when the server
// answered one, which rpc.response.status_code carries too and whose message is the status
// description; "tool_error" for a tool result with isError set; otherwise the error's
// mcpclient.Code as an identifier: "outcome_unknown", "not_delivered", "request_in_flight",
// "request_id_reused", "ledger_full", "server_error", "unsupported_protocol_version",
// "protocol_error", "invalid_argument", "client_closed", "structuredcontent_mismatch",
// "refused_by_an_interceptor", "unauthorized"; "_OTHER" for an error without a Code.
//
// # Propagation
//
// The span's context is injected into params._meta with mcpclient.WithMeta before the request is
// frozen, so it is part of the request's bytes: a resend under the same id, a re-issue under a
// new id, and the rounds of a stateless revision carry it unchanged. The conventions write the
// keys unprefixed (traceparent, tracestate, baggage). A request frozen before the call (Do,
// Resend) cannot take its span's context; freeze it with Inject's options instead.
//
// A call made again under an id it pins (WithRequestID), to re-read the outcome of a request
// already frozen under it, in this process or, with a journal, in an earlier one, writes the
// trace context that request was frozen with, not its own span's: the id's bytes are fixed, and
// other bytes would be refused as a reused id. Its span is its own all the same, and names the
// id; the server's span stays a child of the span the request was frozen under.
//
// # Attempts
//
// With AttemptHook, every attempt of a call is an event of its span, named AttemptEvent, with the
// attempt's number, outcome, latency, HTTP status and the wait before the next: a reply lost and
// read again from the server's receipt is two events on one span. Handshake requests are events
// too (AttemptHandshakeKey), of the span of the call that opened the session, or of the span in
// the context given to mcpclient.Connect. A failed attempt's event carries AttemptErrorKey.
//
// A client that does not pin its revision opens a session with server/discover, which a server
// of the revisions with sessions refuses; the client then sends initialize. That refusal is the
// answer the probe asked for, not a failure: its event carries AttemptOlderServerKey, and no
// AttemptErrorKey. A server/discover that failed otherwise (no answer in time, a 5xx, a result
// that does not decode) carries AttemptErrorKey as any failed attempt does. error.type, on spans
// and measurements, is only ever that of a call that failed: a session opened with initialize
// after the refusal gives none.
//
// Hooks add up: AttemptHook is one mcpclient.WithAttemptHook option among those given, none
// replaces another, and every hook is called for every attempt, in the order the options were
// given; a hook of your own needs no call to RecordAttempt.
//
// # Metrics
//
// mcp.client.operation.duration (histogram, s, the buckets the conventions advise) is recorded
// per call, retries and waits included, with the span's attributes but the request and session
// ids. mcp.client.session.duration (histogram, s) is recorded by Close (or Detach), from Wrap or
// from the handshake of the session that replaced a lost one; a session replaced so is recorded
// with error.type "session_lost" when its successor opens, which only AttemptHook lets the
// wrapper see.
package mcpotel
