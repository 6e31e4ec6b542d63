package mcpotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/transport"
)

// The span event of an attempt and its attributes. The conventions define none for attempts, so
// these are the client's own; an event also carries mcp.method.name, and when known
// jsonrpc.request.id, gen_ai.tool.name, http.response.status_code and, in a call of a Caller
// made WithSessionID, mcp.session.id.
const (
	// AttemptEvent names the event of one attempt: one sending of a request, or a failure to
	// open the session it would have gone on.
	AttemptEvent = "mcpclient.attempt"
	// AttemptNumberKey counts the attempts of a call from 1, as mcpclient.AttemptEvent.Attempt.
	AttemptNumberKey = attribute.Key("mcpclient.attempt.number")
	// AttemptOutcomeKey is how far the attempt got: "answered", "not delivered", "uncertain" or
	// "conflict" (transport.Outcome's String).
	AttemptOutcomeKey = attribute.Key("mcpclient.attempt.outcome")
	// AttemptLatencyKey is the time from the sending to the answer or the failure, in seconds.
	AttemptLatencyKey = attribute.Key("mcpclient.attempt.latency")
	// AttemptDelayKey is the wait before the next attempt, in seconds; 0 when none follows.
	AttemptDelayKey = attribute.Key("mcpclient.attempt.delay")
	// AttemptHandshakeKey: the attempt opens a session (server/discover, initialize).
	AttemptHandshakeKey = attribute.Key("mcpclient.attempt.handshake")
	// AttemptErrorKey is the attempt's error message, when it failed.
	AttemptErrorKey = attribute.Key("mcpclient.attempt.error")
	// AttemptOlderServerKey, true, marks the server/discover that a server of the revisions with
	// sessions refused, which is no failure: the client opens the session with initialize
	// instead (see mcpclient.AttemptEvent.OlderServer). The event carries no AttemptErrorKey,
	// but the status of the refusal as http.response.status_code, if it had one.
	AttemptOlderServerKey = attribute.Key("mcpclient.attempt.older_server")
)

// AttemptHook returns the client option that records every attempt with RecordAttempt. Pass it
// to mcpclient.Connect (or mcptest.NewClient) for the client given to Wrap: the attempts of each
// call become events of its span, a request id the call did not return is learned from them,
// and a session the client opens in place of a lost one restarts mcp.client.session.duration.
//
// Hooks add up: AttemptHook is one mcpclient.WithAttemptHook option among those given, none
// replaces another, and every hook is called for every attempt, in the order the options were
// given. A hook of your own given after AttemptHook finds the attempt already recorded.
func AttemptHook() mcpclient.Option {
	return mcpclient.WithAttemptHook(RecordAttempt)
}

// RecordAttempt adds ev to the span in ctx, if it is recording, as an AttemptEvent event. It
// does not block.
func RecordAttempt(ctx context.Context, ev mcpclient.AttemptEvent) {
	st, _ := ctx.Value(callKey{}).(*callState)
	if st != nil {
		st.note(ev)
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs,
		semconv.McpMethodNameKey.String(ev.Method),
		AttemptNumberKey.Int(ev.Attempt),
		AttemptOutcomeKey.String(ev.Outcome.String()),
		AttemptLatencyKey.Float64(ev.Latency.Seconds()),
		AttemptDelayKey.Float64(ev.Delay.Seconds()),
		AttemptHandshakeKey.Bool(ev.Handshake),
	)
	if !ev.ID.IsZero() {
		attrs = append(attrs, semconv.JSONRPCRequestID(ev.ID.String()))
	}
	if ev.Tool != "" {
		attrs = append(attrs, semconv.GenAIToolName(ev.Tool))
	}
	if ev.SessionID != "" && st != nil && st.recordSession {
		attrs = append(attrs, semconv.McpSessionID(ev.SessionID))
	}
	if ev.HTTPStatus != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(ev.HTTPStatus))
	}
	if ev.Err != nil {
		attrs = append(attrs, AttemptErrorKey.String(ev.Err.Error()))
	}
	if ev.OlderServer {
		attrs = append(attrs, AttemptOlderServerKey.Bool(true))
	}
	span.AddEvent(AttemptEvent, trace.WithAttributes(attrs...))
}

// callKey keys the *callState of a wrapped call in its context.
type callKey struct{}

// callState is what the attempt hook learns of a wrapped call.
type callState struct {
	clock *sessionClock
	// recordSession: the Caller was made WithSessionID.
	recordSession bool

	mu        sync.Mutex
	ids       []mcpclient.ID // the request ids of the call's attempts, each once, in order
	sessionID string
}

func (s *callState) note(ev mcpclient.AttemptEvent) {
	if ev.Handshake {
		if ev.Method == "initialize" && ev.Outcome == transport.Answered && ev.Err == nil {
			s.clock.replaced(time.Now())
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ev.ID.IsZero() && (len(s.ids) == 0 || s.ids[len(s.ids)-1] != ev.ID) {
		s.ids = append(s.ids, ev.ID)
	}
	if ev.SessionID != "" {
		s.sessionID = ev.SessionID
	}
}

// requestID returns the id of the request the call last sent; for a listing, the id of its
// only request, or none if it sent several.
func (s *callState) requestID(listing bool) mcpclient.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 || listing && len(s.ids) > 1 {
		return mcpclient.ID{}
	}
	return s.ids[len(s.ids)-1]
}

func (s *callState) session() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessionID
}

// sessionLost is the error.type of a session that ended because the client had to open another.
const sessionLost = "session_lost"

// sessionClock times the client's session for mcp.client.session.duration.
type sessionClock struct {
	hist  metric.Float64Histogram
	attrs []attribute.KeyValue

	mu      sync.Mutex
	start   time.Time
	version string // the session's protocol revision, once a call has seen it
	ended   bool
}

// replaced ends the session timed so far as lost, at now, and starts timing its successor.
func (s *sessionClock) replaced(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.recordLocked(now, sessionLost)
	s.start, s.version = now, ""
}

// observe records the protocol revision of the session, if not known yet.
func (s *sessionClock) observe(version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version == "" {
		s.version = version
	}
}

// end ends the session at now, once.
func (s *sessionClock) end(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.recordLocked(now, "")
}

func (s *sessionClock) recordLocked(now time.Time, errType string) {
	attrs := make([]attribute.KeyValue, 0, len(s.attrs)+2)
	attrs = append(attrs, s.attrs...)
	if s.version != "" {
		attrs = append(attrs, semconv.McpProtocolVersion(s.version))
	}
	if errType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
	}
	s.hist.Record(context.Background(), now.Sub(s.start).Seconds(), metric.WithAttributeSet(attribute.NewSet(attrs...)))
}
