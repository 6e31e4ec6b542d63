package mcptest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
)

// A receipt is the server's memory of one request id: the fingerprint of the validated request,
// and its reply once there is one. reply is written once, before done is closed, and read only
// after.
type receipt struct {
	fp    [sha256.Size]byte
	done  chan struct{}
	reply answer
}

// An answer is a reply body without its envelope: a result, or an error object. Keeping it apart
// from the id lets a resend get the reply under its own id bytes.
type answer struct {
	body    []byte
	isError bool
	// replay: the answer was read from a receipt (HTTP says so in Mcp-Receipt-Replay).
	replay bool
}

// rpcReceiptsFull is the error code of a request refused because the receipt store is full of
// unresolved receipts: outside the JSON-RPC reserved range, as the receipts extension's codes
// are; error.data.code says MCP_RECEIPTS_FULL.
const rpcReceiptsFull = -31001

// replayMarker is the key in a result's _meta that marks an answer read from a receipt.
const replayMarker = mcpclient.RequestReceiptsExtension + ".replay"

// replayed marks an answer read from a receipt: a result's _meta says so; an error is left as
// it was stored.
func replayed(a answer) answer {
	a.replay = true
	if a.isError {
		return a
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(a.body, &fields) != nil {
		return a
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := fields["_meta"]; ok {
		json.Unmarshal(raw, &meta) // a _meta that is no object is replaced
	}
	meta[replayMarker] = json.RawMessage("true")
	fields["_meta"], _ = json.Marshal(meta)
	body, err := json.Marshal(fields) // raw values marshal as they are
	if err != nil {
		return a
	}
	return answer{body: body, replay: true}
}

// fingerprint hashes the validated request in canonical form, method and params, so that the
// same content fingerprints the same however its JSON was spaced or its keys ordered. Numbers
// keep their text: two different large integers must not collide by rounding.
func fingerprint(method string, params []byte) ([sha256.Size]byte, error) {
	var v any
	if len(params) > 0 {
		dec := json.NewDecoder(bytes.NewReader(params))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return [sha256.Size]byte{}, fmt.Errorf("params: %w", err)
		}
	}
	canon, err := json.Marshal(struct {
		Method string `json:"method"`
		Params any    `json:"params"`
	}{method, v})
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(canon), nil
}

// claimReceipt returns the receipt for key. fresh is true when the caller created it and must
// execute the request and fill it in; full is true when the store refuses a new id.
func (s *Server) claimReceipt(ep *epoch, key string, fp [sha256.Size]byte) (r *receipt, fresh, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := ep.receipts[key]; r != nil {
		return r, false, false
	}
	if len(ep.receipts) >= s.maxReceipts {
		return nil, false, true
	}
	r = &receipt{fp: fp, done: make(chan struct{})}
	ep.receipts[key] = r
	return r, true, false
}

// claimInFlight marks key as in flight; false means it already is.
func (s *Server) claimInFlight(ep *epoch, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep.inFlight[key] {
		return false
	}
	ep.inFlight[key] = true
	return true
}

func (s *Server) releaseInFlight(ep *epoch, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(ep.inFlight, key)
}

// withReceipt answers a tools/call under the server's mode, the receipt store of seed "Northstar": with receipts,
// run runs once per id, and the same id with the same content gets its answer.
// A request gets a receipt only when it opted in (see mcpclient.RequestReceiptsExtension): in
// its own _meta in a stateless revision, in its session's initialize otherwise.
func (s *Server) withReceipt(ctx context.Context, ep *epoch, st *sessionState, m jsonrpc.Message, key string, run func() answer) answer {
	if s.mode != ModeReceipts || (st != nil && !st.receiptsOptIn) {
		return run()
	}
	fp, err := fingerprint(m.Method, m.Params)
	if err != nil {
		return errorAnswer(mcpclient.RPCInvalidParams, err.Error(), nil)
	}
	r, fresh, full := s.claimReceipt(ep, key, fp)
	switch {
	case full:
		return errorAnswer(rpcReceiptsFull, "receipt store full: new request ids are refused",
			map[string]any{"code": "MCP_RECEIPTS_FULL", "maxReceipts": s.maxReceipts})
	case !fresh && r.fp != fp:
		return errorAnswer(mcpclient.RPCInvalidRequest, mcpclient.ReusedIDMarker+": request id already used with different content",
			map[string]any{"code": mcpclient.ReusedIDMarker})
	case !fresh:
		select {
		case <-r.done:
			return replayed(r.reply)
		case <-ctx.Done():
			return errorAnswer(mcpclient.RPCInternalError, "cancelled while waiting for the original request", nil)
		}
	}
	r.reply = run()
	close(r.done)
	return r.reply
}
