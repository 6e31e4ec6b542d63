package mcptest

// sessionState is what the server holds for one session beyond its existence: the events of
// its SSE streams, for resumption, and the outbox of its standalone GET stream.
type sessionState struct {
	events *eventStore
	// outbox carries notifications to the session's GET stream, if one is open; full, it drops
	// them, as a server does for a client that does not listen.
	outbox chan []byte
}

func newSessionState() *sessionState {
	return &sessionState{events: newEventStore(), outbox: make(chan []byte, 64)}
}
