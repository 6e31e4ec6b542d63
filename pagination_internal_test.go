package mcpclient

import (
	"errors"
	"iter"
	"testing"
)

// A server that pages forever, a new cursor each time, is stopped by the item bound of the List
// methods rather than by the caller's memory.
func TestCollectStopsAtTheItemBound(t *testing.T) {
	var fetched int
	endless := iter.Seq2[int, error](func(yield func(int, error) bool) {
		for i := 0; ; i++ {
			fetched++
			if !yield(i, nil) {
				return
			}
		}
	})
	_, err := collectAtMost(endless, 10)
	if !errors.Is(err, ErrListTooLong) || CodeOf(err) != CodeProtocol {
		t.Fatalf("error %v (code %v), want ErrListTooLong with CodeProtocol", err, CodeOf(err))
	}
	if fetched != 11 {
		t.Errorf("%d items read, want the bound plus the one that crossed it", fetched)
	}
	finite := iter.Seq2[int, error](func(yield func(int, error) bool) {
		for i := range 10 {
			if !yield(i, nil) {
				return
			}
		}
	})
	if got, err := collectAtMost(finite, 10); err != nil || len(got) != 10 {
		t.Errorf("a list of exactly the bound: %d items, %v", len(got), err)
	}
}
