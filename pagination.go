package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"iter"
)

// errCursorLoop reports a server that hands out a cursor it handed out before.
var errCursorLoop = errors.New("the server repeated a pagination cursor")

// paginate iterates over every item of a paginated list, fetching pages as the loop asks for
// them. It yields the first error and stops; done runs once the last page was read.
// Paginate iterates over the items of a paginated listing whose pages fetch returns, from the
// cursor "" on, until a page gives no next cursor. It yields the first error and stops; a cursor
// that comes back a second time (a server paging forever) ends it with CodeProtocol. It is how
// the listings of this package page, for a method it has no call for (an extension's listing):
// fetch sends one request, with NewRequest and Do.
func Paginate[T any](ctx context.Context, fetch func(ctx context.Context, cursor string) (items []T, next string, err error)) iter.Seq2[T, error] {
	return paginate(ctx, fetch, nil)
}

func paginate[T any](ctx context.Context, fetch func(ctx context.Context, cursor string) ([]T, string, error), done func()) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		seen := map[string]bool{}
		cursor := ""
		for {
			items, next, err := fetch(ctx, cursor)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" {
				if done != nil {
					done()
				}
				return
			}
			if seen[next] {
				yield(zero, returned(&Error{Code: CodeProtocol, Err: fmt.Errorf("%w: %q", errCursorLoop, next)}))
				return
			}
			seen[next] = true
			cursor = next
		}
	}
}

// MaxListItems bounds what Collect gathers from all pages: a server that pages forever, with a new cursor
// each time, must not take the client's memory with it. Range over the iterator (Tools,
// Resources, ...) to read a longer list item by item.
const MaxListItems = 100_000

// collect drains a paginated iterator into a slice of at most MaxListItems.
// Collect gathers the items of a listing (Tools, Resources, ResourceTemplates, Prompts, Tasks),
// every page, into a slice: the first error ends it, and a listing longer than MaxListItems
// ends it with ErrListTooLong. Range over the iterator itself to read a longer listing item by
// item.
func Collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	return collectAtMost(seq, MaxListItems)
}

func collectAtMost[T any](seq iter.Seq2[T, error], maxItems int) ([]T, error) {
	var out []T
	for it, err := range seq {
		if err != nil {
			return nil, err
		}
		if len(out) == maxItems {
			return nil, returned(&Error{Code: CodeProtocol, Err: fmt.Errorf("%w (%d)", ErrListTooLong, maxItems)})
		}
		out = append(out, it)
	}
	return out, nil
}
