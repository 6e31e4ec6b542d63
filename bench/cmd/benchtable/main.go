// Command benchtable turns benchstat's CSV output (benchstat -format csv -col /KEY ...) into
// compact Markdown tables: one per unit, a row per benchmark, a column per value of KEY with
// benchstat's median, and ratio columns:
//
//	-ratios peers   ours / the best of gosdk and mcpgo, and ours / raw (with -col /client)
//	-ratios retry   default / never and plugin / default (with -col /policy)
//
// -noraw leaves ours / raw empty in the rows it matches, where raw is no floor.
//
// Usage: benchstat -format csv -col /client FILE | benchtable -title "..." -units sec/op,cpu-sec/op
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
	values map[string]float64 // group -> median; missing if absent
}

func main() {
	title := flag.String("title", "", "heading printed before the tables")
	units := flag.String("units", "", "comma-separated units to print, in order (default: all)")
	ratios := flag.String("ratios", "", "ratio columns: peers or retry")
	noRaw := flag.String("noraw", "", "regexp of the rows whose ours / raw ratio is left empty")
	flag.Parse()
	var noRawRows *regexp.Regexp
	if *noRaw != "" {
		noRawRows = regexp.MustCompile(*noRaw)
	}

	tables, err := parse(os.Stdin)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if *title != "" {
		fmt.Fprintf(w, "%s\n\n", *title)
	}
	want := strings.Split(*units, ",")
	if *units == "" {
		want = nil
		for _, t := range tables {
			want = append(want, t.unit)
		}
	}
	for _, u := range want {
		for _, t := range tables {
			if t.unit == u {
				print(w, t, *ratios, noRawRows)
			}
		}
	}
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

func print(w io.Writer, t *table, ratios string, noRawRows *regexp.Regexp) {
	header := append([]string{t.unit}, t.groups...)
	switch ratios {
	case "peers":
		header = append(header, "ours / best peer", "ours / raw")
	case "retry":
		header = append(header, "default / never", "plugin / default")
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	for _, r := range t.rows {
		cells := []string{r.name}
		for _, g := range t.groups {
			v, ok := r.values[g]
			cells = append(cells, format(t.unit, v, ok))
		}
		switch ratios {
		case "peers":
			ours, ok := r.values["ours"]
			best, found := 0.0, false
			for _, p := range []string{"gosdk", "mcpgo"} {
				if v, ok := r.values[p]; ok && (!found || (higherIsBetter(t.unit) && v > best) || (!higherIsBetter(t.unit) && v < best)) {
					best, found = v, true
				}
			}
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
	case strings.HasPrefix(unit, "sec/") || strings.HasPrefix(unit, "cpu-sec/"):
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
