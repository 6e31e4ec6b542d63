package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		unit string
		v    float64
		want string
	}{
		{"B/op", 1000 << 10, "1000 KiB"},
		{"B/op", 14131, "13.8 KiB"},
		{"B/op", 576, "576 B"},
		{"heap-B/session", 16 << 20, "16 MiB"},
		{"sec/op", 0.0160, "16 ms"},
		{"cpu-sec/op", 999.96e-6, "1000 µs"},
		{"cpu-sec/op", 99.34e-6, "99.3 µs"},
		{"sec/op", 1.0234, "1.02 s"},
		{"latency-sec/call", 0.00245, "2.45 ms"},
		{"reqs/op", 3, "3.00"},
		{"calls/s", 1818.4, "1818"},
	} {
		if got := format(tc.unit, tc.v, true); got != tc.want {
			t.Errorf("format(%q, %v) = %q, want %q", tc.unit, tc.v, got, tc.want)
		}
	}
}

func TestPrintNoRaw(t *testing.T) {
	tab := &table{unit: "heap-B/session", groups: []string{"ours", "gosdk", "mcpgo", "raw"}, rows: []row{
		{name: "IdleSession/resp=json", values: map[string]float64{"ours": 4096, "gosdk": 8192, "mcpgo": 2048, "raw": 512}},
		{name: "IdleSession/transport=pipe", values: map[string]float64{"ours": 4096, "gosdk": 8192, "mcpgo": 2048, "raw": 65536}},
	}}
	var b strings.Builder
	print(&b, tab, "peers", regexp.MustCompile(`transport=pipe`))
	want := `| heap-B/session | ours | gosdk | mcpgo | raw | ours / best peer | ours / raw |
|---|---|---|---|---|---|---|
| IdleSession/resp=json | 4 KiB | 8 KiB | 2 KiB | 512 B | 2.00x | 8.00x |
| IdleSession/transport=pipe | 4 KiB | 8 KiB | 2 KiB | 64 KiB | 2.00x |  |

`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestMergeVersions(t *testing.T) {
	a := []*table{{unit: "cpu-sec/op", groups: []string{"ours", "gosdk", "mcpgo", "raw"}, rows: []row{
		{name: "CallHTTP/x", values: map[string]float64{"ours": 2e-4, "gosdk": 4e-4, "mcpgo": 3e-4, "raw": 1e-4}},
		{name: "CallHTTP/y", values: map[string]float64{"ours": 1e-3, "gosdk": 2e-3, "mcpgo": 4e-3, "raw": 1e-3}},
	}}}
	b := []*table{{unit: "cpu-sec/op", groups: []string{"ours", "gosdk", "mcpgo", "raw"}, rows: []row{
		{name: "CallHTTP/x", values: map[string]float64{"ours": 1e-4, "gosdk": 4e-4, "mcpgo": 2e-4, "raw": 1e-4}},
	}}, {unit: "B/op", groups: []string{"ours"}, rows: []row{{name: "CallHTTP/x", values: map[string]float64{"ours": 1}}}}}
	m := merge([]input{{"go1.26.8", a}, {"go1.27.3", b}}, "cpu-sec/op")
	var s strings.Builder
	print(&s, m, "peers", nil)
	want := `| cpu-sec/op | Go | ours | gosdk | mcpgo | raw | ours / best peer | ours / raw |
|---|---|---|---|---|---|---|---|
| CallHTTP/x | 1.26.8 | 200 µs | 400 µs | 300 µs | 100 µs | 0.67x | 2.00x |
| CallHTTP/x | 1.27.3 | 100 µs | 400 µs | 200 µs | 100 µs | 0.50x | 1.00x |
| CallHTTP/y | 1.26.8 | 1 ms | 2 ms | 4 ms | 1 ms | 0.50x | 1.00x |

`
	if got := s.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if m := merge([]input{{"go1.26.8", a}, {"go1.27.3", b}}, "allocs/op"); m != nil {
		t.Errorf("merge of a unit no input has: %+v", m)
	}
}

func TestJournalRatios(t *testing.T) {
	out := `goos: linux
BenchmarkJournal/store=memory/callers=64-2   	    1000	    400000 ns/op	 200000 cpu-ns/op	    2000000 latency-ns/call	 14000 B/op
BenchmarkJournal/store=file/callers=64-2     	    1000	    500000 ns/op	 220000 cpu-ns/op	    2400000 latency-ns/call	   0.05 syncs/call
BenchmarkJournal/store=file/callers=8-2      	    1000	    500000 ns/op	 220000 cpu-ns/op	    9900000 latency-ns/call	   0.05 syncs/call
PASS
BenchmarkJournal/store=memory/callers=64-2   	    1000	    400000 ns/op	    1000000 latency-ns/call
BenchmarkJournal/store=file/callers=64-2     	    1000	    500000 ns/op	    1500000 latency-ns/call
BenchmarkJournal/store=memory/callers=64-2   	    1000	    400000 ns/op	    1000000 latency-ns/call
`
	got := journalRatios(out)
	want := []float64{1.2, 1.5}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Errorf("pass %d: %v, want %v", i+1, got[i], want[i])
		}
	}
}

func TestKeyFigures(t *testing.T) {
	tables := func(oursCPU float64) []*table {
		return []*table{
			{unit: "cpu-sec/op", groups: []string{"ours", "gosdk", "mcpgo", "raw"}, rows: []row{
				{name: "CallHTTP/resp=json/size=1KiB/callers=1", values: map[string]float64{"ours": oursCPU, "gosdk": 4e-4, "mcpgo": 3e-4, "raw": 1e-4}},
			}},
			{unit: "calls/s", groups: []string{"ours", "gosdk", "mcpgo", "raw"}, rows: []row{
				{name: "CallServer/server=mcpgo/resp=json/size=1KiB/callers=64", values: map[string]float64{"ours": 3000, "gosdk": 1000, "mcpgo": 2000, "raw": 4000}},
			}},
		}
	}
	var s strings.Builder
	printKeyFigures(&s, []input{{"go1.26.8", tables(1.5e-4)}, {"go1.27.3", tables(3e-4)}},
		map[string][]float64{"go1.26.8": {1.1, 1.25}, "go1.27.3": {1.4}})
	got := s.String()
	for _, line := range []string{
		"| case | figure | Go 1.26.8 | Go 1.27.3 |",
		"| 1 KiB, 1 caller, HTTP JSON | client CPU per call, ours / best peer | 0.50x (150 µs) | 1.00x (300 µs) |",
		"|  | client CPU per call, ours / raw | 1.50x (150 µs) | 3.00x (300 µs) |",
		"|  | client CPU per call, raw / best peer (the floor's) | 0.33x (100 µs) | 0.33x (100 µs) |",
		"| 1 KiB, 64 callers, same pool, mcp-go server (JSON, 2026-07-28) | calls/s, ours / best peer | 1.50x (3000) | 1.50x (3000) |",
		"|  | calls/s, raw / best peer (the floor's) | 2.00x (4000) | 2.00x (4000) |",
		"| journal, 1 KiB, 64 callers, HTTP JSON | latency, file journal / in-memory ledger, per pass | 1.10x 1.25x (worst 1.25x) | 1.40x (worst 1.40x) |",
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("no line\n%s\nin\n%s", line, got)
		}
	}
	if strings.Contains(got, "| 1 KiB, 64 callers, HTTP JSON |") {
		t.Errorf("a figure no input has is shown:\n%s", got)
	}
	s.Reset()
	printKeyFigures(&s, []input{{"go1.26.8", nil}}, nil)
	if s.Len() != 0 {
		t.Errorf("no figure, yet:\n%s", s.String())
	}
}

func TestPrintJournal(t *testing.T) {
	tab := &table{unit: "latency-sec/call", groups: []string{"memory", "file"}, rows: []row{
		{name: "Journal/callers=64", label: "go1.26.8", values: map[string]float64{"memory": 2e-3, "file": 2.5e-3}},
		{name: "Journal/callers=64", label: "go1.27.3", values: map[string]float64{"memory": 2e-3}},
	}}
	var b strings.Builder
	print(&b, tab, "journal", nil)
	want := `| latency-sec/call | Go | memory | file | file / memory |
|---|---|---|---|---|
| Journal/callers=64 | 1.26.8 | 2 ms | 2.5 ms | 1.25x |
| Journal/callers=64 | 1.27.3 | 2 ms |  |  |

`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
