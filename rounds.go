package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// maxRounds bounds the requests one call may take in a stateless revision: the original, and
// the re-issues that answer the server's input requests or correct a refused revision or header.
const maxRounds = 8

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
// Both refusals come before execution, so the re-issue cannot run anything twice.
func (c *Client) do(ctx context.Context, req *Request) (*Response, error) {
	corrected := map[int64]bool{}
	for round := 1; ; round++ {
		resp, err := c.doOnce(ctx, req)
		if req.header == nil { // an older revision: nothing more to do
			return resp, err
		}
		if round == maxRounds {
			if err == nil {
				err = &Error{Code: CodeProtocol, ID: req.id, Request: req, Attempts: resp.Attempts,
					Err: fmt.Errorf("the call needed more than %d requests", maxRounds)}
			}
			return nil, err
		}
		if err != nil {
			var rpc *RPCError
			if !errors.As(err, &rpc) || corrected[rpc.Code] {
				return nil, err
			}
			next, ok, cerr := c.correct(ctx, req, rpc)
			if cerr != nil {
				return nil, cerr
			}
			if !ok {
				return nil, err
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

// correct builds the re-issue of a request a stateless server refused before running it, when
// the refusal says how to mend it.
func (c *Client) correct(ctx context.Context, req *Request, rpc *RPCError) (*Request, bool, error) {
	switch {
	case rpc.Code == RPCUnsupportedProtocolVersion:
		v := bestVersion(rpc.supportedVersions(), "", true)
		if v == "" {
			return nil, false, nil
		}
		next, err := c.reround(req, req.params, v, "sent again in "+v+", the revision the server named")
		return next, err == nil, err
	case rpc.Code == RPCHeaderMismatch && req.method == "tools/call":
		if _, err := collect(c.Tools(ctx)); err != nil {
			return nil, false, err
		}
		next, err := c.reround(req, req.params, req.header["Mcp-Protocol-Version"], "sent again with the headers of the tool as listed now")
		return next, err == nil, err
	}
	return nil, false, nil
}

// answerInputs answers the server's input requests with the client's handlers and builds the
// next round: the same request with inputResponses, and requestState exactly as the server sent
// it, or none.
func (c *Client) answerInputs(ctx context.Context, req *Request, inputs map[string]json.RawMessage, state *string) (*Request, error) {
	set := map[string]json.RawMessage{"inputResponses": nil, "requestState": nil}
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
		set["inputResponses"] = b
	}
	if state != nil {
		b, _ := json.Marshal(*state) // a Go string always marshals
		set["requestState"] = b
	}
	params, err := setParams(req.params, set)
	if err != nil {
		return nil, &Error{Code: CodeProtocol, ID: req.id, Request: req, Err: err}
	}
	return c.reround(req, params, req.header["Mcp-Protocol-Version"], "the next round of a multi round-trip request")
}

// reround freezes the next round of a call: params in revision version, under a new id that
// the ledger records as replacing req's.
func (c *Client) reround(req *Request, params json.RawMessage, version, reason string) (*Request, error) {
	id, err := newID(c.cfg.idVersion)
	if err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Err: err}
	}
	if params, err = c.stampModern(params, version); err != nil {
		return nil, &Error{Code: CodeInvalidArgument, Err: err}
	}
	if req.progress != nil || req.idle > 0 { // reports of this round come under its own id
		if params, err = setMeta(params, map[string]json.RawMessage{"progressToken": json.RawMessage(id.JSON())}); err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Err: err}
		}
	}
	next := freeze(c, id, req.method, params)
	next.header = standardHeaders(req.method, params, version)
	if req.method == "tools/call" {
		if err := c.addParamHeaders(next.header, req.toolName, params); err != nil {
			return nil, &Error{Code: CodeInvalidArgument, Err: err}
		}
	}
	next.toolName, next.idempotent = req.toolName, req.idempotent
	next.progress, next.idle, next.max = req.progress, req.idle, req.max
	next.supersedes, next.reason = req.id, reason
	return next, nil
}
