package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The quickstart does what it says: the lost reply is resent and booked once, the reused id is
// refused, and the correction books the very room whose request was lost, once, after looking.
func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"executions   1",
		"result       booked room 12 for 2026-12-24, ref R-001",
		"MCP_REQUEST_ID_REUSED",
		"supersede without inspection: ",
		"inspection   no booking for room 15 on 2026-12-25",
		"result       booked room 15 for 2026-12-25, ref R-002",
		"bookings: 2 (one per request that ran)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "room 16") {
		t.Errorf("the correction booked another room than the one it lost:\n%s", got)
	}
}
