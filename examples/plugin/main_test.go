package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example does what it says: the refused first attempt is retried, the token is the
// user's, the denied tool is never sent nor offered, and the counts add up.
func TestPlugin(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		`tool=search id=`, `n=1 outcome="not delivered" status=503`, `n=2 outcome=answered`,
		`search: 3 results for {"q":"chairs"}`,
		`delete_all: mcpclient: refused by an interceptor`, `| denied: true | executions: 0`,
		"the server saw tools/call with Bearer t-ada",
		`offered to the model: [{"description":"Searches the catalog.","name":"search","parameters":{"type":"object"}}]`,
		"attempts by outcome: map[answered:4 not delivered:2]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Bearer t-bob") || strings.Count(got, "the server saw tools/call") != 2 {
		t.Errorf("the denied call reached the server:\n%s", got)
	}
}
