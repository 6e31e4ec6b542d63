package mcpdbos

import "testing"

// TestRequestIDIdentity checks which parts of a step's identity its request id follows: each of
// them, so that another step, workflow or call gets another id, and nothing else, so that the
// step's retries and reruns on recovery share one.
func TestRequestIDIdentity(t *testing.T) {
	id := requestID("order-17", 2, "charge")
	if got := requestID("order-17", 2, "charge"); got != id {
		t.Errorf("one step called under %s and %s: want one id", id, got)
	}
	others := map[string][3]any{
		"another workflow (or a fork)": {"order-18", 2, "charge"},
		"another step":                 {"order-17", 3, "charge"},
		"another call of the step":     {"order-17", 2, "refund"},
		"a workflow id holding a step": {"order-17\",2", 2, "charge"},
	}
	seen := map[string]string{id.JSON(): "the base"}
	for name, p := range others {
		got := requestID(p[0].(string), p[1].(int), p[2].(string))
		if prev, dup := seen[got.JSON()]; dup {
			t.Errorf("%s calls under the id of %s", name, prev)
		}
		seen[got.JSON()] = name
	}
}
