package mcpclient

import (
	"fmt"
	"testing"
)

// A session remembers the requests it abandoned within a bound: past it, the oldest are
// forgotten, whatever the number of cancellations.
func TestRecentKeysAreBounded(t *testing.T) {
	var r recentKeys
	for i := range 3 * maxAbandoned {
		r.add(fmt.Sprint(i))
		r.add(fmt.Sprint(i)) // again: still one entry
	}
	if len(r.set) != maxAbandoned || len(r.ring) != maxAbandoned {
		t.Fatalf("%d keys in the set, %d in the ring; want %d", len(r.set), len(r.ring), maxAbandoned)
	}
	for i := range 3 * maxAbandoned {
		if want := i >= 2*maxAbandoned; r.has(fmt.Sprint(i)) != want {
			t.Errorf("has(%d) = %v, want %v", i, !want, want)
		}
	}
}
