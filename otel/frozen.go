package mcpotel

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/propagation"

	"github.com/northstar-mcp/mcpclient"
)

// A metaMember is one member of params._meta that carries trace context.
type metaMember struct {
	key   string
	value json.RawMessage
}

// withMeta returns the call options that write members into params._meta.
func withMeta(members []metaMember, dst []mcpclient.CallOption) []mcpclient.CallOption {
	for _, m := range members {
		dst = append(dst, mcpclient.WithMeta(m.key, m.value))
	}
	return dst
}

// carried returns the members p writes for ctx, in the order of their keys. A key the client
// writes itself (progressToken, io.modelcontextprotocol/...) is left out: the client would refuse
// the request for it.
func carried(ctx context.Context, p propagation.TextMapPropagator) []metaMember {
	carrier := propagation.MapCarrier{}
	p.Inject(ctx, carrier)
	keys := carrier.Keys()
	slices.Sort(keys)
	members := make([]metaMember, 0, len(keys))
	for _, k := range keys {
		if ownKey(k) {
			continue
		}
		v, _ := json.Marshal(carrier[k]) // a string always marshals
		members = append(members, metaMember{k, v})
	}
	return members
}

func ownKey(k string) bool {
	return k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/")
}

// frozenWith reads from a request's frame the members of params._meta that p writes (its
// Fields), in the order of their keys: the trace context the request was frozen with.
func frozenWith(frame []byte, p propagation.TextMapPropagator) []metaMember {
	var msg struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(frame, &msg) != nil {
		return nil // the client will refuse other content under the id, and say so
	}
	keys := p.Fields()
	slices.Sort(keys)
	var members []metaMember
	for _, k := range keys {
		if v, ok := msg.Params.Meta[k]; ok && !ownKey(k) {
			members = append(members, metaMember{k, v})
		}
	}
	return members
}

// journaled is what a *mcpclient.Client tells of the requests its journal holds.
type journaled interface {
	Journaled(ctx context.Context, id mcpclient.ID) (mcpclient.JournalRecord, bool, error)
}

// traceFor returns the trace context a call writes into its request's params._meta: the span's,
// unless the call pins an id already frozen (by this wrapper, or held by the client's journal
// from any process), whose bytes a call made again must repeat: then the trace context the
// request was frozen with.
func (c *Caller) traceFor(ctx context.Context, pinned mcpclient.ID) []metaMember {
	if !pinned.IsZero() {
		if members, ok := c.frozen.get(pinned); ok {
			return members
		}
		if j, ok := c.Caller.(journaled); ok {
			// A journal that cannot be read refuses the call itself, and says why.
			if rec, found, err := j.Journaled(ctx, pinned); err == nil && found {
				return frozenWith(rec.Frame, c.cfg.propagator)
			}
		}
	}
	return carried(ctx, c.cfg.propagator)
}

// frozenTrace remembers, by request id, the trace context the wrapper wrote into each request it
// made: a call made again under a pinned id writes the same. It holds as many ids as the
// client's ledger, forgetting the oldest first; a call made again under an id it forgot, which
// the journal does not hold either, writes its own span's context, and the client refuses it as
// other content under the id, before anything is sent.
type frozenTrace struct {
	mu   sync.Mutex
	max  int
	byID map[string][]metaMember
	ring []string // the keys of byID by when they were added; next is the oldest once full
	next int
}

func (f *frozenTrace) get(id mcpclient.ID) ([]metaMember, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	members, ok := f.byID[id.JSON()]
	return members, ok
}

func (f *frozenTrace) put(id mcpclient.ID, members []metaMember) {
	if id.IsZero() {
		return
	}
	key := id.JSON()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.byID[key]; ok {
		f.byID[key] = members
		return
	}
	if f.byID == nil {
		f.byID = make(map[string][]metaMember)
	}
	if len(f.ring) < f.max {
		f.ring = append(f.ring, key)
	} else {
		delete(f.byID, f.ring[f.next])
		f.ring[f.next] = key
		f.next = (f.next + 1) % f.max
	}
	f.byID[key] = members
}
