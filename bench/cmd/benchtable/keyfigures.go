package main

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A keyFigure is one line of the headline figures: a ratio of two medians of one benchmark and
// unit, ours / the best peer or ours / raw, or raw / the best peer, where a goal set against
// the peers is to be read against what the floor itself reaches.
type keyFigure struct {
	what   string // the case, in words
	figure string // what the ratio is, in words
	bench  string // the benchmark's name, as benchstat's rows name it (without -GOMAXPROCS)
	unit   string
	over   string // "peer" (the better of gosdk and mcpgo) or "raw"
	of     string // the client over it: "" for ours, or "raw"
}

// keyFigures are the figures the benchmarks exist for, in the order they are shown.
var keyFigures = []keyFigure{
	{"1 KiB, 1 caller, HTTP JSON", "client CPU per call, ours / best peer", "CallHTTP/resp=json/size=1KiB/callers=1", "cpu-sec/op", "peer", ""},
	{"1 KiB, 1 caller, HTTP JSON", "client CPU per call, ours / raw", "CallHTTP/resp=json/size=1KiB/callers=1", "cpu-sec/op", "raw", ""},
	{"1 KiB, 1 caller, HTTP JSON", "client CPU per call, raw / best peer (the floor's)", "CallHTTP/resp=json/size=1KiB/callers=1", "cpu-sec/op", "peer", "raw"},
	{"1 KiB, 64 callers, HTTP JSON", "client CPU per call, ours / best peer", "CallHTTP/resp=json/size=1KiB/callers=64", "cpu-sec/op", "peer", ""},
	{"1 KiB, 64 callers, HTTP JSON", "client CPU per call, ours / raw", "CallHTTP/resp=json/size=1KiB/callers=64", "cpu-sec/op", "raw", ""},
	{"1 KiB, 64 callers, HTTP JSON", "client CPU per call, raw / best peer (the floor's)", "CallHTTP/resp=json/size=1KiB/callers=64", "cpu-sec/op", "peer", "raw"},
	{"1 KiB, 1 caller, stateless SSE (2026-07-28, go-sdk server)", "client CPU per call, ours / best peer", "CallServer/server=gosdk-stateless/resp=sse/size=1KiB/callers=1", "cpu-sec/op", "peer", ""},
	{"1 KiB, 64 callers, stateless SSE (2026-07-28, go-sdk server)", "client CPU per call, ours / best peer", "CallServer/server=gosdk-stateless/resp=sse/size=1KiB/callers=64", "cpu-sec/op", "peer", ""},
	{"1 MiB, 1 caller, HTTP JSON", "client CPU per call, ours / raw", "CallHTTP/resp=json/size=1MiB/callers=1", "cpu-sec/op", "raw", ""},
	{"1 KiB, 64 callers, same pool, mcp-go server (JSON, 2026-07-28)", "calls/s, ours / best peer", "CallServer/server=mcpgo/resp=json/size=1KiB/callers=64", "calls/s", "peer", ""},
	{"1 KiB, 64 callers, same pool, mcp-go server (JSON, 2026-07-28)", "calls/s, raw / best peer (the floor's)", "CallServer/server=mcpgo/resp=json/size=1KiB/callers=64", "calls/s", "peer", "raw"},
	{"1 KiB, 64 callers, same pool, go-sdk server (JSON, 2025-11-25)", "calls/s, ours / best peer", "CallHTTP/resp=json/size=1KiB/callers=64", "calls/s", "peer", ""},
	{"1 KiB, 64 callers, same pool, go-sdk server (JSON, 2025-11-25)", "calls/s, raw / best peer (the floor's)", "CallHTTP/resp=json/size=1KiB/callers=64", "calls/s", "peer", "raw"},
	{"session start, HTTP JSON", "CPU, ours / best peer", "SessionStart/transport=http-json", "cpu-sec/op", "peer", ""},
	{"session start, HTTP JSON", "allocs, ours / best peer", "SessionStart/transport=http-json", "allocs/op", "peer", ""},
	{"idle session, in memory (pipe)", "heap, ours / best peer", "IdleSession/transport=pipe", "heap-B/session", "peer", ""},
	{"idle session, HTTP JSON", "heap, ours / best peer", "IdleSession/resp=json", "heap-B/session", "peer", ""},
}

// value returns the ratio f names in the tables of one input, and the median of the client
// over it (ours or raw) beside it.
func (f keyFigure) value(tables []*table) (ratio, ours float64, ok bool) {
	for _, t := range tables {
		if t.unit != f.unit {
			continue
		}
		for _, r := range t.rows {
			if r.name != f.bench {
				continue
			}
			o, ok := r.values[cmp.Or(f.of, "ours")]
			if !ok {
				return 0, 0, false
			}
			var base float64
			var found bool
			if f.over == "raw" {
				base, found = r.values["raw"]
			} else {
				base, found = bestPeer(f.unit, r.values)
			}
			if !found || base == 0 {
				return 0, 0, false
			}
			return o / base, o, true
		}
	}
	return 0, 0, false
}

// printKeyFigures writes the headline figures as one table, a column per input (Go version),
// and the file journal's latency over the in-memory ledger's, per pass, from passes (by label).
// A figure no input has is left out (a subset ran), and so is the table if none is left.
func printKeyFigures(w io.Writer, inputs []input, passes map[string][]float64) {
	var lines [][]string
	for _, f := range keyFigures {
		cells := []string{f.what, f.figure}
		shown := false
		for _, in := range inputs {
			r, ours, ok := f.value(in.tables)
			if !ok {
				cells = append(cells, "")
				continue
			}
			shown = true
			cells = append(cells, fmt.Sprintf("%.2fx (%s)", r, format(f.unit, ours, true)))
		}
		if shown {
			lines = append(lines, cells)
		}
	}
	cells := []string{"journal, 1 KiB, 64 callers, HTTP JSON", "latency, file journal / in-memory ledger, per pass"}
	shown := false
	for _, in := range inputs {
		p := passes[in.label]
		if len(p) == 0 {
			cells = append(cells, "")
			continue
		}
		shown = true
		each := make([]string, len(p))
		worst := p[0]
		for i, x := range p {
			each[i] = fmt.Sprintf("%.2fx", x)
			worst = max(worst, x)
		}
		cells = append(cells, fmt.Sprintf("%s (worst %.2fx)", strings.Join(each, " "), worst))
	}
	if shown {
		lines = append(lines, cells)
	}
	if len(lines) == 0 {
		return
	}
	header := []string{"case", "figure"}
	for _, in := range inputs {
		header = append(header, goLabel(in.label))
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for i, cells := range lines {
		if i > 0 && cells[0] == lines[i-1][0] {
			cells = slices.Clone(cells)
			cells[0] = "" // the same case as the line above
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
}

// goLabel is a column heading for a Go version label: go1.26.8 becomes Go 1.26.8.
func goLabel(label string) string {
	if label == "" {
		return "value"
	}
	return "Go " + strings.TrimPrefix(label, "go")
}

var journalLine = regexp.MustCompile(`^BenchmarkJournal/store=(memory|file)/callers=64(?:-\d+)?\s`)

// journalRatios reads go test's output and returns, for each pass in order, the file journal's
// latency-ns/call over the in-memory ledger's at 64 callers: the k-th result of store=file over
// the k-th of store=memory, a pass running each once.
func journalRatios(out string) []float64 {
	var memory, file []float64
	for line := range strings.SplitSeq(out, "\n") {
		m := journalLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fields := strings.Fields(line)
		for i := 1; i < len(fields); i++ {
			if fields[i] != "latency-ns/call" {
				continue
			}
			v, err := strconv.ParseFloat(fields[i-1], 64)
			if err != nil {
				break
			}
			if m[1] == "memory" {
				memory = append(memory, v)
			} else {
				file = append(file, v)
			}
		}
	}
	var ratios []float64
	for i := range min(len(memory), len(file)) {
		if memory[i] > 0 {
			ratios = append(ratios, file[i]/memory[i])
		}
	}
	return ratios
}
