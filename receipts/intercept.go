package receipts

import (
	"bytes"
	"context"
	"errors"
	"mime"
	"net/http"
	"strconv"
)

type bodyKind int

const (
	bodyOther bodyKind = iota
	bodyJSON
	bodySSE
)

// An interceptor is the ResponseWriter the wrapped handler writes to. It forwards the response
// to the client while the client is there, and reads it on the way for the JSON-RPC response to
// one request id: a JSON body, or the event of an event stream whose data is that response
// (other events pass through untouched). With hold, it holds the response until it can rewrite
// the one to id (a JSON body until the handler returns, an event until it ends).
//
// Writes never fail for the handler: once the client is gone (its context ended, or a write to
// it failed) the interceptor stops forwarding and goes on reading, so that a handler that runs
// on after a disconnect still produces the response its receipt keeps.
type interceptor struct {
	w      http.ResponseWriter
	client context.Context // the client's request context
	id     string          // the JSON text of the request id
	max    int
	hold   bool
	// rewrite, when hold, edits the response to id.
	rewrite func(response []byte) []byte
	// streamed, if not nil, is called with the response to id as soon as an event stream
	// carried it, after it was forwarded: a handler may keep its stream open after it.
	streamed func(response []byte)

	wroteHeader bool
	status      int
	kind        bodyKind
	body        []byte // a JSON body, up to max
	bodyOver    bool   // the JSON body outgrew max
	headerOut   bool   // the status line went to the client
	events      eventSplitter
	response    []byte // the response to id, once read
	gone        bool
}

func newInterceptor(w http.ResponseWriter, client context.Context, id string, max int) *interceptor {
	iw := &interceptor{w: w, client: client, id: id, max: max}
	iw.events = eventSplitter{max: max, block: iw.block, pass: iw.forward}
	return iw
}

func (iw *interceptor) holding(rewrite func([]byte) []byte) *interceptor {
	iw.hold, iw.rewrite, iw.events.hold = true, rewrite, true
	return iw
}

// Unwrap lets http.ResponseController reach the client's writer.
func (iw *interceptor) Unwrap() http.ResponseWriter { return iw.w }

func (iw *interceptor) Header() http.Header { return iw.w.Header() }

func (iw *interceptor) WriteHeader(code int) {
	if iw.wroteHeader {
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		if !iw.isGone() {
			iw.w.WriteHeader(code) // informational: the real status follows
		}
		return
	}
	iw.wroteHeader, iw.status = true, code
	iw.kind = kindOf(iw.w.Header().Get("Content-Type"))
	if !(iw.hold && iw.kind == bodyJSON) {
		iw.sendHeader()
	}
}

// kindOf reads a Content-Type.
func kindOf(contentType string) bodyKind {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return bodyOther
	}
	switch mt {
	case "application/json":
		return bodyJSON
	case "text/event-stream":
		return bodySSE
	}
	return bodyOther
}

func (iw *interceptor) sendHeader() {
	if iw.headerOut {
		return
	}
	iw.headerOut = true
	if !iw.isGone() {
		iw.w.WriteHeader(iw.status)
	}
}

func (iw *interceptor) Write(p []byte) (int, error) {
	if !iw.wroteHeader {
		if iw.w.Header().Get("Content-Type") == "" {
			// net/http would sniff text/plain for JSON: say what it is.
			if t := bytes.TrimLeft(p, " \t\r\n"); len(t) > 0 && t[0] == '{' {
				iw.w.Header().Set("Content-Type", "application/json")
			}
		}
		iw.WriteHeader(http.StatusOK)
	}
	switch iw.kind {
	case bodyJSON:
		if !iw.bodyOver {
			if len(iw.body)+len(p) <= iw.max {
				iw.body = append(iw.body, p...)
			} else {
				iw.bodyOver = true
				if iw.hold { // too large to rewrite: send what was held, as it was
					iw.hold = false
					iw.sendHeader()
					iw.forward(iw.body)
				}
				iw.body = nil
			}
		}
		if !iw.hold {
			iw.forward(p)
		}
	case bodySSE:
		if !iw.hold {
			iw.forward(p)
		}
		iw.events.Write(p)
	default:
		iw.forward(p)
	}
	return len(p), nil
}

// block reads one complete event block.
func (iw *interceptor) block(raw []byte) {
	data, ok := eventData(raw)
	if ok && iw.response == nil && isResponseTo(data, iw.id) {
		iw.response = bytes.Clone(data)
		if iw.hold {
			raw = replaceData(raw, iw.rewrite(iw.response))
		}
	}
	if iw.hold {
		iw.forward(raw)
	}
	if iw.streamed != nil && iw.response != nil {
		streamed := iw.streamed
		iw.streamed = nil
		streamed(iw.response)
	}
}

// Flush flushes what was forwarded.
func (iw *interceptor) Flush() {
	if !iw.headerOut || iw.isGone() {
		return
	}
	if err := http.NewResponseController(iw.w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		iw.gone = true
	}
}

func (iw *interceptor) isGone() bool {
	if !iw.gone && iw.client.Err() != nil {
		iw.gone = true
	}
	return iw.gone
}

func (iw *interceptor) forward(p []byte) {
	if len(p) == 0 || iw.isGone() {
		return
	}
	if _, err := iw.w.Write(p); err != nil {
		iw.gone = true
	}
}

// finish reads what the handler left once it returned, and sends what was held.
func (iw *interceptor) finish() {
	if !iw.wroteHeader {
		return // nothing written: net/http answers 200 with no body
	}
	switch iw.kind {
	case bodyJSON:
		if !iw.bodyOver && isResponseTo(iw.body, iw.id) {
			iw.response = bytes.Clone(bytes.TrimSpace(iw.body))
		}
		if iw.hold {
			out := iw.body
			if iw.response != nil {
				out = iw.rewrite(iw.response)
			}
			iw.w.Header().Set("Content-Length", strconv.Itoa(len(out)))
			iw.sendHeader()
			iw.forward(out)
		}
	case bodySSE:
		iw.events.flush()
	}
}

// overflowed reports whether part of the response was too large to read: the response to id
// may have been in it.
func (iw *interceptor) overflowed() bool { return iw.bodyOver || iw.events.overflew }

// statusCode is the status the handler answered with.
func (iw *interceptor) statusCode() int {
	if !iw.wroteHeader {
		return http.StatusOK
	}
	return iw.status
}
