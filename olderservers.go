package mcpclient

import (
	"sync"
	"time"

	"github.com/northstar-mcp/mcpclient/transport"
)

// A client preferring a stateless revision learns that a server is older by asking
// server/discover, a round trip the older server only refuses. A process often opens many
// clients to one endpoint (one per request it serves, per tenant, per tool run): what the first
// learned spares the others that round trip. Only a Streamable HTTP endpoint is remembered, by
// its URL, the one name that stays the same across clients; a client of another transport
// remembers for itself alone (Client.olderServer).
//
// The memory is a shortcut, never a verdict. A server that upgrades to the stateless revision
// alone refuses the older initialize, which forgets the endpoint and probes it again at once;
// one that speaks both revisions accepts the older initialize and serves well meanwhile, and is
// found speaking the stateless one when the memory expires. olderServerLifetime weighs the two:
// long enough that the probe is paid a few times an hour per endpoint, short enough that an
// upgraded dual-version server is used in its newer revision within minutes.
const (
	olderServerLifetime = 10 * time.Minute
	// olderServerEntries bounds the endpoints remembered: a process that talks to more than
	// this many (a gateway fanning out to per-tenant URLs) probes again the ones it learned
	// longest ago, rather than growing without bound.
	olderServerEntries = 256
)

// olderServers is the process's memory of older servers.
var olderServers = &olderServerMemory{lifetime: olderServerLifetime, max: olderServerEntries}

// olderServerMemory maps an endpoint to the revision an older server there accepted in
// initialize, when it was learned.
type olderServerMemory struct {
	mu       sync.Mutex
	lifetime time.Duration // <= 0: nothing is remembered
	max      int
	entries  map[string]olderServer
}

type olderServer struct {
	offer   string
	learned time.Time
}

// olderServerKey is the endpoint t reaches, as the process remembers it; "" for a transport
// whose endpoint has no name that outlives the client.
func olderServerKey(t transport.Transport) string {
	if h, ok := t.(*transport.HTTP); ok {
		return h.URL
	}
	return ""
}

// offer returns the revision to offer in initialize to the older server at key, or "" when the
// process knows of none there.
func (m *olderServerMemory) offer(key string, now time.Time) string {
	if key == "" {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		return ""
	}
	if now.Sub(e.learned) >= m.lifetime {
		delete(m.entries, key)
		return ""
	}
	return e.offer
}

// learn remembers that the server at key is older and accepted offer in initialize.
func (m *olderServerMemory) learn(key, offer string, now time.Time) {
	if key == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lifetime <= 0 || m.max <= 0 {
		return
	}
	if _, ok := m.entries[key]; !ok && len(m.entries) >= m.max {
		// A scan, not a list in order: it runs only when a new endpoint meets a full memory,
		// and the memory is small.
		var oldest string
		var at time.Time
		for k, e := range m.entries {
			if oldest == "" || e.learned.Before(at) {
				oldest, at = k, e.learned
			}
		}
		delete(m.entries, oldest)
	}
	if m.entries == nil {
		m.entries = make(map[string]olderServer)
	}
	m.entries[key] = olderServer{offer: offer, learned: now}
}

// forget drops what the process learned of the server at key.
func (m *olderServerMemory) forget(key string) {
	if key == "" {
		return
	}
	m.mu.Lock()
	delete(m.entries, key)
	m.mu.Unlock()
}

// reset empties the memory and sets its lifetime and bound.
func (m *olderServerMemory) reset(lifetime time.Duration, max int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lifetime, m.max, m.entries = lifetime, max, nil
}
