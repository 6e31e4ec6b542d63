package mcptemporal

import (
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/workflow"
)

// TestRequestIDIdentity checks which parts of an activity's identity its request id follows: the
// attempt is left out, so that every retry calls under one id; every other part is in.
func TestRequestIDIdentity(t *testing.T) {
	base := activity.Info{
		Namespace:         "default",
		WorkflowExecution: workflow.Execution{ID: "order-17", RunID: "run-a"},
		ActivityID:        "3",
		Attempt:           1,
	}
	id := requestID(base, "charge")

	same := base
	same.Attempt = 4
	if got := requestID(same, "charge"); got != id {
		t.Errorf("attempt 4 calls under %s, attempt 1 under %s: want one id", got, id)
	}

	others := map[string]func(*activity.Info) string{
		"another namespace": func(i *activity.Info) string { i.Namespace = "billing"; return "charge" },
		"another workflow":  func(i *activity.Info) string { i.WorkflowExecution.ID = "order-18"; return "charge" },
		"another run (continue-as-new, reset, workflow retry)": func(i *activity.Info) string { i.WorkflowExecution.RunID = "run-b"; return "charge" },
		"another activity":             func(i *activity.Info) string { i.ActivityID = "4"; return "charge" },
		"another call of the activity": func(*activity.Info) string { return "refund" },
		"an activity without a workflow": func(i *activity.Info) string {
			i.WorkflowExecution = workflow.Execution{}
			i.ActivityRunID = "run-a"
			return "charge"
		},
	}
	seen := map[string]string{id.JSON(): "the base"}
	for name, change := range others {
		info := base
		key := change(&info)
		got := requestID(info, key)
		if prev, dup := seen[got.JSON()]; dup {
			t.Errorf("%s calls under the id of %s", name, prev)
		}
		seen[got.JSON()] = name
	}
}
