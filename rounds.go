package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// MaxRounds bounds the requests one call may take in a stateless revision: the original, and
// the re-issues that answer the server's input requests or correct a refused revision or header.
const MaxRounds = 8

// ErrRoundLimit: a call in a stateless revision would need a request beyond MaxRounds, because
// the answer to the last one asked for input again, or refused it in a way a re-issue would mend.
// The client does not send that request. The *Error names the last request sent; its answer was
// no result, so nothing the call produced was thrown away. Its Code is CodeProtocol after
// input_required, and CodeServerError, with the *RPCError, after a refusal.
var ErrRoundLimit = errors.New("mcpclient: the call needs more requests than MaxRounds")

// inputMethods are the requests a server may answer with input_required (SEP-2322).
var inputMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// do sends req and, in a stateless revision, carries the call through the rounds the protocol
// defines. Each round is a new request with a new id, linked to the one before in the ledger:
//   - input_required: the client answers the input requests with its handlers (elicitation,
//     sampling, roots) and sends the request again with inputResponses and the server's
//     requestState, untouched (multi round-trip requests, SEP-2322);
//   - -32022 UnsupportedProtocolVersion: sent again in a revision the refusal names;
//   - -32020 HeaderMismatch on tools/call: sent again after listing the tools, with fresh
//     Mcp-Param-* headers.
//
// Both refusals come before execution, so the re-issue cannot run anything twice. A complete
// answer ends the call in any round; when the answer to round MaxRounds would need one more
// round, the call ends with ErrRoundLimit before anything more is sent.
func (c *Client) do(ctx context.Context, req *Request) (*Response, error) {
	corrected := map[int64]bool{}
	for round := 1; ; round++ {
		resp, err := c.doOnce(ctx, req)
		if req.version == "" { // an older revision: nothing more to do
			return resp, err
		}
		last := round == MaxRounds
		if err != nil {
			var rpc *RPCError
			if !errors.As(err, &rpc) || corrected[rpc.Code] || !correctable(req, rpc) {
				return nil, err
			}
			if last {
				return nil, &Error{Code: CodeServerError, ID: req.id, Request: req, Attempts: attemptsOf(err),
					Err: fmt.Errorf("%w: the request mending this refusal would be request %d: %w", ErrRoundLimit, MaxRounds+1, rpc)}
			}
			next, cerr := c.correct(ctx, req, rpc, err)
			if cerr != nil {
				return nil, cerr
			}
			corrected[rpc.Code] = true
			req = next
			continue
		}
		var r struct {
			ResultType    string                     `json:"resultType"`
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  *string                    `json:"requestState"`
		}
		if err := json.Unmarshal(resp.Result, &r); err != nil {
			return resp, nil // not an object: the caller's decoding will say so
		}
		switch r.ResultType {
		case "", "complete":
			return resp, nil
		case "input_required":
			if !inputMethods[req.method] {
				return nil, &Error{Code: CodeProtocol, ID: req.id, Request: req, Attempts: resp.Attempts,
					Err: fmt.Errorf("%s answered input_required", req.method)}
			}
			if last {
				return nil, &Error{Code: CodeProtocol, ID: req.id, Request: req, Attempts: resp.Attempts,
					Err: fmt.Errorf("%w: request %d still answered input_required", ErrRoundLimit, MaxRounds)}
			}
			next, err := c.answerInputs(ctx, req, r.InputRequests, r.RequestState)
			if err != nil {
				return nil, err
			}
			req = next
		default:
			return nil, &Error{Code: CodeProtocol, ID: req.id, Request: req, Attempts: resp.Attempts,
				Err: fmt.Errorf("unknown resultType %q", r.ResultType)}
		}
	}
}

// attemptsOf returns the attempts an *Error in err's chain counts.
func attemptsOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Attempts
	}
	return 0
}

// correctable reports whether a stateless server's refusal of req says how to mend it.
func correctable(req *Request, rpc *RPCError) bool {
	switch rpc.Code {
	case RPCUnsupportedProtocolVersion:
		return bestVersion(rpc.supportedVersions(), "", true) != ""
	case RPCHeaderMismatch:
		return req.method == "tools/call"
	}
	return false
}

// correct builds the re-issue of a request a stateless server refused before running it, with
// a refusal that correctable accepted. refusal is the error of req that carries rpc.
func (c *Client) correct(ctx context.Context, req *Request, rpc *RPCError, refusal error) (*Request, error) {
	if rpc.Code == RPCUnsupportedProtocolVersion {
		v := bestVersion(rpc.supportedVersions(), "", true)
		return c.reround(req, req.extra, v, "sent again in "+v+", the revision the server named")
	}
	if _, err := collect(c.Tools(ctx)); err != nil {
		return nil, listingFailed(req, rpc, attemptsOf(refusal), err)
	}
	return c.reround(req, req.extra, req.version, "sent again with the headers of the tool as listed now")
}

// listingFailed is the error of a tools/call refused for its headers whose tools could not be
// listed again to mend them. It is about the call, which the server refused before running it:
// its id, its refusal, and the listing's failure as the cause. The listing's own *Error is not
// in the chain, so that its Code (ErrOutcomeUnknown for a lost tools/list, say) is not taken for
// the call's.
func listingFailed(req *Request, rpc *RPCError, attempts int, err error) *Error {
	cause := err
	var e *Error
	if errors.As(err, &e) {
		cause = fmt.Errorf("%s for tools/list request %s: %w", e.Code, e.ID.JSON(), e.Err)
		if e.ID.IsZero() {
			cause = fmt.Errorf("%s: %w", e.Code, e.Err)
		}
	}
	return &Error{Code: CodeServerError, ID: req.id, Request: req, Attempts: attempts,
		Err: fmt.Errorf("%w; listing the tools to mend the headers failed: %w", rpc, cause)}
}

// answerInputs answers the server's input requests with the client's handlers and builds the
// next round: the same request with inputResponses, and requestState exactly as the server sent
// it, or none.
func (c *Client) answerInputs(ctx context.Context, req *Request, inputs map[string]json.RawMessage, state *string) (*Request, error) {
	extra := map[string]json.RawMessage{}
	if len(inputs) > 0 {
		responses := make(map[string]json.RawMessage, len(inputs))
		for key, raw := range inputs {
			var in struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, &Error{Code: CodeProtocol, ID: req.id, Request: req, Err: fmt.Errorf("input request %q: %w", key, err)}
			}
			h := c.handlerFor(in.Method)
			if h == nil || in.Method == "ping" {
				return nil, &Error{Code: CodeProtocol, ID: req.id, Request: req,
					Err: fmt.Errorf("input request %q asks for %s, which the client did not declare", key, in.Method)}
			}
			result, err := runRequestHandler(ctx, h, in.Params)
			if err != nil {
				return nil, &Error{Code: CodeInvalidArgument, ID: req.id, Request: req,
					Err: fmt.Errorf("the handler of input request %q (%s): %w", key, in.Method, err)}
			}
			b, err := json.Marshal(result)
			if err != nil {
				return nil, &Error{Code: CodeInvalidArgument, ID: req.id, Request: req, Err: err}
			}
			responses[key] = b
		}
		b, _ := json.Marshal(responses) // raw values that marshalled once
		extra["inputResponses"] = b
	}
	if state != nil {
		b, _ := json.Marshal(*state) // a Go string always marshals
		extra["requestState"] = b
	}
	return c.reround(req, extra, req.version, "the next round of a multi round-trip request")
}

// reround builds the next round of a call: req's request with extra as its top-level members
// (the answers of this round; none for a correction), in revision version, under a new id that
// the ledger records as replacing req's.
func (c *Client) reround(req *Request, extra map[string]json.RawMessage, version, reason string) (*Request, error) {
	spec := req.requestSpec
	spec.id = ID{}
	spec.extra, spec.version = extra, version
	spec.supersedes, spec.reason, spec.automatic = req.id, reason, false
	return c.build(spec)
}
