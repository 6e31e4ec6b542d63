package mcptest

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/jsonrpc"
	"github.com/northstar-mcp/mcpclient/receipts"
)

// An answer is a reply body without its envelope: a result, or an error object. Keeping it apart
// from the id lets a transport frame it under the request's own id bytes.
type answer struct {
	body    []byte
	isError bool
	// replay: the answer was read from a receipt (HTTP says so in Mcp-Receipt-Replay).
	replay bool
}

// newReceiptKeeper returns the receipt rules over an empty store of the server's capacity: the
// same rules, in the same code, as the receipts middleware a real server puts in front of its
// handler, so that what a test learns against mcptest holds against such a server. The store
// forgets nothing within the default retention, so in a test's lifetime a full store refuses
// new ids rather than evict one. Its bytes are bounded by the count alone: the results are the
// test's own.
func (s *Server) newReceiptKeeper() (*receipts.Keeper, *receipts.MemoryStore) {
	store := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: s.maxReceipts, MaxBytes: 1 << 40})
	return receipts.NewKeeper(receipts.Options{Store: store, Logger: s.log}), store
}

// requestFrameKey carries, in a request's context, the bytes that carried the request exactly
// as received: what a receipt fingerprints.
type requestFrameKey struct{}

// requestFrame returns the bytes that carried the request ctx belongs to.
func requestFrame(ctx context.Context) []byte {
	frame, _ := ctx.Value(requestFrameKey{}).([]byte)
	return frame
}

// withReceipt answers a request that executes something (a tools/call, a task's creation) under
// the server's mode: with receipts, run runs once per id, the same id with the same bytes gets
// its answer marked as a replay, and the same id with other bytes is refused.
// A request gets a receipt only when it opted in (see mcpclient.RequestReceiptsExtension): in
// its own _meta in a stateless revision, in its session's initialize otherwise. Receipts are the
// server process's, so the key's principal is the same for every client.
func (s *Server) withReceipt(ctx context.Context, ep *epoch, st *sessionState, m jsonrpc.Message, key string, run func() answer) answer {
	if s.mode != ModeReceipts || (st != nil && !st.receiptsOptIn) {
		return run()
	}
	rkey := receipts.Key{ID: key}
	adm, err := ep.receipts.Admit(ctx, rkey, receipts.FingerprintOf(requestFrame(ctx)))
	switch {
	case err != nil && ctx.Err() != nil:
		return errorAnswer(mcpclient.RPCInternalError, "cancelled while waiting for the original request", nil)
	case err != nil:
		return errorAnswer(mcpclient.RPCInternalError, "receipt store: "+err.Error(), nil)
	case adm.Verdict == receipts.Replay:
		a, err := answerOf(receipts.MarkReplay(adm.Response))
		if err != nil {
			return errorAnswer(mcpclient.RPCInternalError, "receipt: "+err.Error(), nil)
		}
		a.replay = true
		return a
	case adm.Verdict != receipts.Run:
		refusal, _ := receipts.ErrorResponse(adm.Verdict, key)
		a, _ := answerOf(refusal) // the receipts package builds well-formed refusals
		return a
	}
	settled := false
	defer func() {
		if !settled { // run panicked: it may have run, so its receipt says the outcome is unknown
			adm.Hold.SettleInDoubt(context.WithoutCancel(ctx), "the server panicked running the request")
		}
	}()
	a := run()
	settled = true
	// The store is in memory and outlives the request, so settling cannot fail but by a bug.
	if err := adm.Hold.Settle(context.WithoutCancel(ctx), responseOf(m.ID, a)); err != nil {
		s.log.Error("mcptest: settling a receipt", "id", key, "err", err)
	}
	return a
}

// responseOf frames an answer as the JSON-RPC response a receipt keeps.
func responseOf(id json.RawMessage, a answer) []byte {
	if a.isError {
		return jsonrpc.AppendError(nil, id, a.body)
	}
	return jsonrpc.AppendResult(nil, id, a.body)
}

// answerOf takes a kept JSON-RPC response apart again.
func answerOf(response []byte) (answer, error) {
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(response, &r); err != nil {
		return answer{}, err
	}
	switch {
	case r.Error != nil:
		return answer{body: r.Error, isError: true}, nil
	case r.Result != nil:
		return answer{body: r.Result}, nil
	}
	return answer{}, errors.New("a kept response with neither result nor error")
}
