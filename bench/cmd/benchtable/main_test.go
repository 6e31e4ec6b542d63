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
		{"IdleSession/resp=json", map[string]float64{"ours": 4096, "gosdk": 8192, "mcpgo": 2048, "raw": 512}},
		{"IdleSession/transport=pipe", map[string]float64{"ours": 4096, "gosdk": 8192, "mcpgo": 2048, "raw": 65536}},
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
