package mcptest

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// maxStoredStreams bounds the SSE streams a session remembers for resumption; the oldest go
// first.
const maxStoredStreams = 256

// An eventStore keeps the events of a session's SSE streams so that a client can resume a
// broken stream with Last-Event-ID. Event ids name their stream ("s3/1"), so that a resumption
// replays that stream and no other, as the protocol requires.
type eventStore struct {
	mu      sync.Mutex
	next    int
	streams map[string][]storedEvent
	order   []string // stream ids, oldest first
}

type storedEvent struct {
	id   string
	data []byte // nil for a priming event
}

func newEventStore() *eventStore { return &eventStore{streams: make(map[string][]storedEvent)} }

// newStream starts a stream and returns its id.
func (e *eventStore) newStream() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	id := "s" + strconv.Itoa(e.next)
	e.streams[id] = nil
	e.order = append(e.order, id)
	if len(e.order) > maxStoredStreams {
		delete(e.streams, e.order[0])
		e.order = e.order[1:]
	}
	return id
}

// forget drops a stream: a resumption of it fails.
func (e *eventStore) forget(stream string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.streams, stream)
	if i := slices.Index(e.order, stream); i >= 0 {
		e.order = slices.Delete(e.order, i, i+1)
	}
}

// add appends an event to a stream and returns the event's id.
func (e *eventStore) add(stream string, data []byte) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := stream + "/" + strconv.Itoa(len(e.streams[stream]))
	e.streams[stream] = append(e.streams[stream], storedEvent{id: id, data: data})
	return id
}

// after returns the events of lastID's stream that follow it. ok is false for an id the store
// does not know.
func (e *eventStore) after(lastID string) (events []storedEvent, ok bool) {
	stream, seq, found := strings.Cut(lastID, "/")
	n, err := strconv.Atoi(seq)
	if !found || err != nil || n < 0 {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	evs, known := e.streams[stream]
	if !known || n >= len(evs) {
		return nil, false
	}
	return append([]storedEvent(nil), evs[n+1:]...), true
}
