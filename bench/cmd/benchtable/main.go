// Command benchtable turns benchstat's CSV output (benchstat -format csv -col /KEY ...) into
// compact Markdown tables: one per unit, a row per benchmark, a column per value of KEY with
// benchstat's median, and ratio columns:
//
//	-ratios peers   ours / the best of gosdk and mcpgo, and ours / raw (with -col /client)
//	-ratios retry   default / never and plugin / default (with -col /policy)
//	-ratios journal file / memory (with -col /store)
//
// -noraw leaves ours / raw empty in the rows it matches, where raw is no floor.
//
// Given LABEL=FILE arguments instead of standard input, each FILE being benchstat's CSV output
// for the runs of one Go version (LABEL, as go1.26.8), the tables put the versions side by side:
// a Go column, and a row per benchmark and version, the versions of a benchmark together.
//
// -key prints instead the headline figures (see keyFigures) out of LABEL=FILE arguments whose
// CSV holds every unit of CallHTTP, CallServer, SessionStart and IdleSession with -col /client,
// and -journal LABEL=FILE (repeated, FILE being go test's raw output) adds the file journal's
// latency over the in-memory ledger's at 64 callers, pass by pass.
//
// Usage: benchstat -format csv -col /client FILE | benchtable -title "..." -units sec/op,cpu-sec/op
//
//	benchtable -ratios peers -units cpu-sec/op go1.26.8=a.csv go1.27.3=b.csv
//	benchtable -key -journal go1.26.8=raw-a.txt go1.26.8=a-all.csv
package main

import (
	"bufio"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

type table struct {
	unit   string
	groups []string // column group names (client=...)
	rows   []row
}

type row struct {
	name   string
	label  string             // the Go version, where several are side by side
	values map[string]float64 // group -> median; missing if absent
}

// An input is the tables of one labelled file (one Go version), or of standard input.
type input struct {
	label  string
	tables []*table
}

// labelled is a repeatable LABEL=FILE flag.
type labelled []string

func (l *labelled) String() string     { return strings.Join(*l, " ") }
func (l *labelled) Set(v string) error { *l = append(*l, v); return nil }

// splitLabel splits LABEL=FILE.
func splitLabel(arg string) (label, file string, err error) {
	label, file, ok := strings.Cut(arg, "=")
	if !ok || label == "" || file == "" {
		return "", "", fmt.Errorf("%q: want LABEL=FILE", arg)
	}
	return label, file, nil
}

func main() {
	title := flag.String("title", "", "heading printed before the tables")
	units := flag.String("units", "", "comma-separated units to print, in order (default: all)")
	ratios := flag.String("ratios", "", "ratio columns: peers, retry or journal")
	noRaw := flag.String("noraw", "", "regexp of the rows whose ours / raw ratio is left empty")
	key := flag.Bool("key", false, "print the headline figures instead of tables")
	var journals labelled
	flag.Var(&journals, "journal", "with -key: LABEL=FILE, go test output holding BenchmarkJournal (repeatable)")
	flag.Parse()
	var noRawRows *regexp.Regexp
	if *noRaw != "" {
		noRawRows = regexp.MustCompile(*noRaw)
	}

	var inputs []input
	if flag.NArg() == 0 {
		tables, err := parse(os.Stdin)
		if err != nil {
			log.Fatal(err)
		}
		inputs = append(inputs, input{tables: tables})
	}
	for _, arg := range flag.Args() {
		label, file, err := splitLabel(arg)
		if err != nil {
			log.Fatal(err)
		}
		f, err := os.Open(file)
		if err != nil {
			log.Fatal(err)
		}
		tables, err := parse(f)
		f.Close()
		if err != nil {
			log.Fatalf("%s: %v", file, err)
		}
		inputs = append(inputs, input{label, tables})
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if *title != "" {
		fmt.Fprintf(w, "%s\n\n", *title)
	}
	if *key {
		passes := map[string][]float64{}
		for _, arg := range journals {
			label, file, err := splitLabel(arg)
			if err != nil {
				log.Fatal(err)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				log.Fatal(err)
			}
			passes[label] = journalRatios(string(data))
		}
		printKeyFigures(w, inputs, passes)
		return
	}
	want := strings.Split(*units, ",")
	if *units == "" {
		want = nil
		for _, in := range inputs {
			for _, t := range in.tables {
				if !slices.Contains(want, t.unit) {
					want = append(want, t.unit)
				}
			}
		}
	}
	for _, u := range want {
		if t := merge(inputs, u); t != nil {
			print(w, t, *ratios, noRawRows)
		}
	}
}

// merge returns the tables of unit of every input as one, the rows of one benchmark together
// in the inputs' order, each labelled with its input's label; nil if no input has the unit.
func merge(inputs []input, unit string) *table {
	var m *table
	var names []string
	byName := map[string][]row{}
	for _, in := range inputs {
		for _, t := range in.tables {
			if t.unit != unit {
				continue
			}
			if m == nil {
				m = &table{unit: unit}
			}
			for _, g := range t.groups {
				if !slices.Contains(m.groups, g) {
					m.groups = append(m.groups, g)
				}
			}
			for _, r := range t.rows {
				if _, ok := byName[r.name]; !ok {
					names = append(names, r.name)
				}
				r.label = in.label
				byName[r.name] = append(byName[r.name], r)
			}
		}
	}
	if m == nil {
		return nil
	}
	for _, n := range names {
		m.rows = append(m.rows, byName[n]...)
	}
	return m
}

var cpuSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) ([]*table, error) {
	// benchstat prints goos/goarch/pkg/cpu lines first, then CSV blocks separated by blank lines.
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var tables []*table
	for block := range strings.SplitSeq(string(data), "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, ",") })
		if start < 0 || start+1 >= len(lines) {
			continue
		}
		cr := csv.NewReader(strings.NewReader(strings.Join(lines[start:], "\n")))
		cr.FieldsPerRecord = -1
		recs, err := cr.ReadAll()
		if err != nil {
			return nil, err
		}
		groupsRow, unitsRow := recs[0], recs[1]
		t := &table{}
		var cols []struct {
			group string
			idx   int
		}
		group := ""
		for i := 1; i < len(groupsRow); i++ {
			if groupsRow[i] != "" {
				group = groupsRow[i]
			}
			if i < len(unitsRow) && unitsRow[i] != "CI" && unitsRow[i] != "vs base" && unitsRow[i] != "P" {
				t.unit = unitsRow[i]
				t.groups = append(t.groups, group)
				cols = append(cols, struct {
					group string
					idx   int
				}{group, i})
			}
		}
		for _, rec := range recs[2:] {
			if len(rec) == 0 || rec[0] == "geomean" {
				continue
			}
			rw := row{name: cpuSuffix.ReplaceAllString(rec[0], ""), values: map[string]float64{}}
			for _, c := range cols {
				if c.idx < len(rec) && rec[c.idx] != "" {
					if v, err := strconv.ParseFloat(rec[c.idx], 64); err == nil {
						rw.values[c.group] = v
					}
				}
			}
			t.rows = append(t.rows, rw)
		}
		tables = append(tables, t)
	}
	return tables, nil
}

func higherIsBetter(unit string) bool { return unit == "calls/s" }

// bestPeer is the better of gosdk's and mcpgo's figures, if either has one.
func bestPeer(unit string, values map[string]float64) (best float64, found bool) {
	for _, p := range []string{"gosdk", "mcpgo"} {
		if v, ok := values[p]; ok && (!found || (higherIsBetter(unit) && v > best) || (!higherIsBetter(unit) && v < best)) {
			best, found = v, true
		}
	}
	return best, found
}

func print(w io.Writer, t *table, ratios string, noRawRows *regexp.Regexp) {
	labelled := slices.ContainsFunc(t.rows, func(r row) bool { return r.label != "" })
	header := []string{t.unit}
	if labelled {
		header = append(header, "Go")
	}
	header = append(header, t.groups...)
	switch ratios {
	case "peers":
		header = append(header, "ours / best peer", "ours / raw")
	case "retry":
		header = append(header, "default / never", "plugin / default")
	case "journal":
		header = append(header, "file / memory")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, r := range t.rows {
		cells := []string{r.name}
		if labelled {
			cells = append(cells, strings.TrimPrefix(r.label, "go"))
		}
		for _, g := range t.groups {
			v, ok := r.values[g]
			cells = append(cells, format(t.unit, v, ok))
		}
		switch ratios {
		case "peers":
			ours, ok := r.values["ours"]
			best, found := bestPeer(t.unit, r.values)
			cells = append(cells, ratio(ours, ok, best, found))
			rawV, rawOK := r.values["raw"]
			if noRawRows != nil && noRawRows.MatchString(r.name) {
				rawOK = false
			}
			cells = append(cells, ratio(ours, ok, rawV, rawOK))
		case "retry":
			d, dok := r.values["default"]
			n, nok := r.values["never"]
			p, pok := r.values["plugin"]
			cells = append(cells, ratio(d, dok, n, nok), ratio(p, pok, d, dok))
		case "journal":
			f, fok := r.values["file"]
			m, mok := r.values["memory"]
			cells = append(cells, ratio(f, fok, m, mok))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
}

func ratio(a float64, aok bool, b float64, bok bool) string {
	if !aok || !bok || b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func format(unit string, v float64, ok bool) string {
	if !ok {
		return ""
	}
	switch {
	case strings.HasPrefix(unit, "sec/") || strings.Contains(unit, "-sec/"):
		return duration(v)
	case strings.HasPrefix(unit, "B/") || strings.HasPrefix(unit, "heap-B/"):
		return bytes(v)
	}
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func duration(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return sig3(s*1e3) + " ms"
	default:
		return sig3(s*1e6) + " µs"
	}
}

func bytes(b float64) string {
	a := math.Abs(b)
	switch {
	case a >= 1<<20:
		return sig3(b/(1<<20)) + " MiB"
	case a >= 1<<10:
		return sig3(b/(1<<10)) + " KiB"
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

// sig3 writes v to three significant digits without an exponent (%.3g writes 1000 as 1e+03).
func sig3(v float64) string {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return strconv.FormatFloat(r, 'f', -1, 64)
}
