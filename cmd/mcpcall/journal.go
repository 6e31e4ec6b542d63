package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"

	"github.com/northstar-mcp/mcpclient"
	"github.com/northstar-mcp/mcpclient/internal/redact"
)

// recoverRequest looks in the journal for a request of this command that an earlier run left
// unresolved: its method and params, to this server, and its id if -id names one. It returns the
// request to resend and -1, or nil and -1 when there is none, or an exit code when the run ends
// here: a request that resending could run twice is left alone unless -id names it.
func recoverRequest(ctx context.Context, c *mcpclient.Client, o *options, term *terminal) (*mcpclient.Request, int) {
	var want any
	if err := json.Unmarshal(o.params, &want); err != nil {
		return nil, -1
	}
	others := 0
	for r, err := range c.Recover(ctx) {
		if r.Request == nil {
			if r.Record.ID.IsZero() {
				// The journal could not be read at all: nothing it holds can be trusted to
				// tell whether this command is already under way.
				report(term, err, c.SessionID())
				c.Close()
				return nil, exitLocal
			}
			// One record the journal cannot read says nothing about the others, nor about
			// this command: it is named, for the user to look at, and left alone.
			term.printf("mcpcall: journal: record %s cannot be read and is left alone: %v", r.Record.ID.JSON(), err)
			continue
		}
		if !sameCommand(r.Request, o, want) {
			others++
			continue
		}
		if err != nil && !o.idSet {
			term.printf("mcpcall: the journal holds request %s of this command from an earlier run that did not learn its outcome; resending could run it twice. Look at the server's state, then run again with -id %s to resend it.", r.Request.ID().JSON(), r.Request.ID().String())
			report(term, err, c.SessionID())
			c.Close()
			return nil, exitUnknown
		}
		term.printf("mcpcall: resending request %s, left unresolved by an earlier run", r.Request.ID().JSON())
		if others > 0 {
			term.printf("mcpcall: the journal holds %d other unresolved requests for this server", others)
		}
		return r.Request, -1
	}
	if others > 0 {
		term.printf("mcpcall: the journal holds %d unresolved requests of other commands for this server", others)
	}
	return nil, -1
}

// sameCommand reports whether req is what this command sends: the same method and params (the
// _meta the client writes into them aside), and the -id if one was given.
func sameCommand(req *mcpclient.Request, o *options, want any) bool {
	if req.Method() != o.method || (o.idSet && req.ID() != mcpclient.StringID(idText(o.id))) {
		return false
	}
	var got map[string]any
	if err := json.Unmarshal(req.Params(), &got); err != nil {
		return false
	}
	w, ok := want.(map[string]any)
	if !ok {
		return false
	}
	delete(got, "_meta")
	delete(w, "_meta")
	return reflect.DeepEqual(got, w)
}

// commandID is the request id of this command under -journal, and its params in the canonical
// form the id is derived from: derived from the server, the method and the params, so that
// running the same command again makes the same request, which the journal and the server's
// receipts recognize, rather than a new one that runs again.
func commandID(o *options) (mcpclient.ID, json.RawMessage, error) {
	params, err := canonicalJSON(o.params)
	if err != nil {
		return mcpclient.ID{}, nil, err
	}
	// The endpoint without the secrets of its address: a rotated token in the query names the
	// same server.
	endpoint := "url " + redact.URL(o.url)
	switch {
	case o.sse != "":
		endpoint = "sse " + redact.URL(o.sse)
	case o.cmd != "":
		endpoint = "cmd " + o.cmd
	}
	return mcpclient.IDFromKey("mcpcall", endpoint+"\n"+o.method+"\n"+string(params)), params, nil
}

// canonicalJSON writes raw with its objects' members in key order and no insignificant space,
// numbers as written, so that two spellings of the same params give the same command.
func canonicalJSON(raw json.RawMessage) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
