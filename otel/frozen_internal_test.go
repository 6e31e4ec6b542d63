package mcpotel

import (
	"fmt"
	"testing"

	"github.com/northstar-mcp/mcpclient"
)

// The trace contexts remembered by id are bounded: past the bound, the oldest are forgotten.
func TestFrozenTraceIsBounded(t *testing.T) {
	f := &frozenTrace{max: 8}
	for i := range 20 {
		f.put(mcpclient.IntID(int64(i)), []metaMember{{"traceparent", []byte(fmt.Sprintf("\"%d\"", i))}})
	}
	f.put(mcpclient.ID{}, nil) // no id: nothing to remember
	if len(f.byID) != 8 || len(f.ring) != 8 {
		t.Fatalf("%d ids remembered, %d in the ring; want 8", len(f.byID), len(f.ring))
	}
	for i := range 20 {
		if _, ok := f.get(mcpclient.IntID(int64(i))); ok != (i >= 12) {
			t.Errorf("id %d remembered: %v", i, ok)
		}
	}
}
