package main

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example checks its own claims (one sign-in for two runs, the refused call sent again
// under its id and run once) and fails when one does not hold; nothing outlives it.
func TestExample(t *testing.T) {
	if err := run(context.Background()); err != nil {
		t.Fatal(err)
	}
}
