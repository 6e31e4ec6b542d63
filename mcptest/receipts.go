package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

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

// newReceiptKeeper returns the receipt rules over an empty store of the server's capacity:
// the same rules, in the same code, as the receipts middleware a real server puts in front of
// its handler, so that what a test learns against mcptest holds against such a server. The
// store forgets nothing within the default retention, so in a test's lifetime a full store
// refuses new ids rather than evict one. Its bytes are bounded by the count alone: the results
// are the test's own.
func (s *Server) newReceiptKeeper() (*receipts.Keeper, *receipts.MemoryStore) {
	store := receipts.NewMemoryStore(receipts.MemoryOptions{MaxReceipts: s.maxReceipts, MaxBytes: 1 << 40})
	return receipts.NewKeeper(receipts.Options{Store: store, Logger: s.log}), store
}

// A requestOrigin is what a transport knows of a request besides its message, carried in the
// request's context.
type requestOrigin struct {
	// frame is the bytes that carried the request, exactly as received: what a receipt
	// fingerprints.
	frame []byte
	// principal is who sent it (over HTTP, the bearer token's subject): receipts of different
	// principals never meet.
	principal string
	// headerOptIn: the request carried Mcp-Request-Receipts: 1, which opts a request of a
	// session revision in whatever its session's initialize said.
	headerOptIn bool
}

type requestOriginKey struct{}

func originOf(ctx context.Context) requestOrigin {
	o, _ := ctx.Value(requestOriginKey{}).(requestOrigin)
	return o
}

// httpOrigin is the origin of a request that came by HTTP.
func httpOrigin(r *http.Request, body []byte) requestOrigin {
	return requestOrigin{
		frame:       body,
		principal:   receipts.BearerPrincipal(r),
		headerOptIn: r.Header.Get(receipts.HeaderOptIn) == "1",
	}
}

// An admission is what the receipt rules made of a request before it runs: either an answer
// read from the receipt (a replay or a refusal) with its HTTP status, or the hold of a claim
// that the request's outcome settles.
type admission struct {
	answer *answer
	status int
	hold   *receipts.Hold
}

// admitReceipt applies the receipt rules to a request under the server's mode. receipted is
// false for a request that gets no receipt: the server keeps none (a mode other than
// ModeReceipts), the method is never receipted (initialize, ping, subscriptions/listen), or
// the request did not opt in, in its own _meta in a stateless revision, or in its session's
// initialize or its Mcp-Request-Receipts header otherwise.
func (s *Server) admitReceipt(ctx context.Context, ep *epoch, session string, stateless *sessionState, m jsonrpc.Message, key string) (adm admission, receipted bool) {
	if s.mode != ModeReceipts || !receipts.Receipted(m.Method) {
		return admission{}, false
	}
	origin := originOf(ctx)
	switch {
	case stateless != nil:
		if !stateless.receiptsOptIn {
			return admission{}, false
		}
	default:
		if st := s.sessionState(ep, session); st != nil && !st.receiptsOptIn && !origin.headerOptIn {
			return admission{}, false
		}
	}
	got, err := ep.receipts.Admit(ctx, receipts.Key{Principal: origin.principal, ID: key}, receipts.FingerprintOf(origin.frame))
	answered := func(a answer, status int) (admission, bool) { return admission{answer: &a, status: status}, true }
	switch {
	case err != nil && ctx.Err() != nil:
		return answered(errorAnswer(mcpclient.RPCInternalError, "cancelled while waiting for the original request", nil), http.StatusServiceUnavailable)
	case err != nil:
		return answered(errorAnswer(mcpclient.RPCInternalError, "receipt store: "+err.Error(), nil), http.StatusServiceUnavailable)
	case got.Verdict == receipts.Run:
		return admission{hold: got.Hold}, true
	case got.Verdict == receipts.Replay:
		a, err := answerOf(receipts.MarkReplay(got.Response))
		if err != nil {
			return answered(errorAnswer(mcpclient.RPCInternalError, "receipt: "+err.Error(), nil), http.StatusInternalServerError)
		}
		a.replay = true
		return answered(a, http.StatusOK)
	}
	return receiptRefusal(got.Verdict, key), true
}

// receiptRefusal is the answer, and its HTTP status, with which the receipt rules refuse a
// request under key for verdict v (receipts.InFlight, Reused, InDoubt or Full). The faults that
// refuse a request as the rules do (RefuseInFlight, RefuseIDReused) answer with it too.
func receiptRefusal(v receipts.Verdict, key string) admission {
	refusal, _ := receipts.ErrorResponse(v, key)
	a, _ := answerOf(refusal) // the receipts package builds well-formed refusals
	status := http.StatusOK   // in doubt: the outcome of a request that may have run
	switch v {
	case receipts.InFlight, receipts.Reused:
		status = http.StatusConflict
	case receipts.Full:
		status = http.StatusServiceUnavailable
	}
	return admission{answer: &a, status: status}
}

// concludeReceipt settles the receipt of a request that ran with its answer, or releases it
// when the answer refuses the request before it ran (a stateless revision's 4xx answers), so
// that a corrected resend under the id runs.
func (s *Server) concludeReceipt(ctx context.Context, hold *receipts.Hold, m jsonrpc.Message, key string, a answer, stateless bool) {
	ctx = context.WithoutCancel(ctx)
	var err error
	if stateless && statelessStatus(a) >= 400 {
		err = hold.Release(ctx)
	} else {
		err = hold.Settle(ctx, responseOf(m.ID, a))
	}
	// The store is in memory and outlives the request: this fails only by a bug.
	if err != nil {
		s.log.Error("mcptest: concluding a receipt", "id", key, "err", err)
	}
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
