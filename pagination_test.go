package mcpclient_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/northstar-mcp/mcpclient"
)

// Paginate pages an extension's listing as the client pages its own: every item of every page
// in order, the first error ends it, and a cursor that comes back (a server paging forever) is a
// protocol error rather than a loop.
func TestPaginate(t *testing.T) {
	pages := map[string]struct {
		items []string
		next  string
	}{"": {[]string{"a", "b"}, "p2"}, "p2": {[]string{"c"}, "p3"}, "p3": {nil, ""}}
	fetch := func(_ context.Context, cursor string) ([]string, string, error) {
		p, ok := pages[cursor]
		if !ok {
			return nil, "", errors.New("unknown cursor " + cursor)
		}
		return p.items, p.next, nil
	}
	got, err := mcpclient.Collect(mcpclient.Paginate(context.Background(), fetch))
	if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Paginate: %q, %v", got, err)
	}

	pages["p3"] = struct {
		items []string
		next  string
	}{[]string{"d"}, "p2"}
	got, err = mcpclient.Collect(mcpclient.Paginate(context.Background(), fetch))
	if mcpclient.CodeOf(err) != mcpclient.CodeProtocol {
		t.Errorf("a cursor that comes back: %q, %v; want CodeProtocol", got, err)
	}

	boom := errors.New("boom")
	var seen []string
	for item, err := range mcpclient.Paginate(context.Background(), func(context.Context, string) ([]string, string, error) {
		return nil, "", boom
	}) {
		if !errors.Is(err, boom) {
			t.Errorf("the fetch's error: %v", err)
		}
		seen = append(seen, item)
	}
	if len(seen) != 1 {
		t.Errorf("after an error the iteration went on: %q", seen)
	}
}
