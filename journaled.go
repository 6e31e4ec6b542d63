package mcpclient

import "context"

// JournalLookup is implemented by a Journal that can read the record of one id (package
// journal's File and PostgreSQL journals do). Client.Journaled uses it.
type JournalLookup interface {
	// Lookup returns what the journal holds of id; ok is false when it holds nothing.
	Lookup(ctx context.Context, id ID) (rec JournalRecord, ok bool, err error)
}

// Journaled returns what the client's journal holds under id: the request as it was frozen (its
// exact bytes in Frame) and how it stands, whichever process froze it. It is for a caller about
// to call again under a pinned id, in this process or after a restart, that must learn what the
// request was frozen with first: a wrapper that writes trace context into params._meta, say,
// which must write the same, since a resend under the id is the same bytes or is refused. ok is
// false when the client has no journal, when its journal is no JournalLookup, and when it holds
// nothing under id. Nothing is sent.
func (c *Client) Journaled(ctx context.Context, id ID) (rec JournalRecord, ok bool, err error) {
	l, can := c.cfg.journal.(JournalLookup)
	if !can {
		return rec, false, nil
	}
	rec, ok, err = l.Lookup(ctx, id)
	if err != nil {
		return rec, false, returned(&Error{Code: CodeJournal, Err: err})
	}
	return rec, ok, nil
}
