package mcpclient

import (
	"fmt"
	"testing"
)

// The calls awaiting answers are found by key whichever holds them, the field or the map, as
// calls start and end in any order.
func TestPendingCallsFindEachByKey(t *testing.T) {
	var pc pendingCalls
	calls := make([]*pendingCall, 4)
	for i := range calls {
		calls[i] = &pendingCall{key: fmt.Sprint(i)}
		pc.add(calls[i])
	}
	check := func(awaiting ...int) {
		t.Helper()
		if pc.len() != len(awaiting) {
			t.Fatalf("%d calls awaiting, want %d", pc.len(), len(awaiting))
		}
		held := map[string]bool{}
		for _, i := range awaiting {
			held[calls[i].key] = true
		}
		for _, p := range calls {
			if got := pc.get(p.key); (got == p) != held[p.key] || (got != nil && got != p) {
				t.Fatalf("get(%s) = %v, want awaiting %v", p.key, got, held[p.key])
			}
		}
	}
	check(0, 1, 2, 3)
	pc.remove(calls[0]) // the one held apart
	check(1, 2, 3)
	late := &pendingCall{key: "late"}
	pc.add(late) // takes the free field while the others stay in the map
	if pc.get("late") != late {
		t.Fatal("the call added last is not found")
	}
	pc.remove(late)
	pc.remove(calls[2])
	check(1, 3)
	pc.remove(calls[1])
	pc.remove(calls[3])
	check()
}
