package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The example checks its own claims (each tool ran once, its answer a replay from the receipt)
// and fails when one does not hold; it reports both servers, and nothing outlives it.
func TestExample(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"go-sdk server", "mcp-go server"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "replayed from the receipt: true; the tool ran 1 time(s)"); n != 2 {
		t.Errorf("%d replays of one run reported, want 2:\n%s", n, out.String())
	}
}
