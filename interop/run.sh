#!/usr/bin/env bash
# Runs the interop tests (go test -count=1 ./... in this module) and prints the matrix, server x
# transport x protocol revision -> PASS/FAIL, as markdown on stdout. The tests append one row per
# combination to the file named by MCPCLIENT_INTEROP_MATRIX; the full go test output goes to a log
# file whose path is printed. Extra arguments go to go test (e.g. -run TestGoSDK).
# Exit status: that of go test.
set -uo pipefail
cd "$(dirname "$0")"

matrix="$(mktemp)"
log="${TMPDIR:-/tmp}/mcpclient-interop-$(date +%Y%m%d-%H%M%S).log"
trap 'rm -f "$matrix"' EXIT

MCPCLIENT_INTEROP_MATRIX="$matrix" go test -count=1 "$@" ./... >"$log" 2>&1
status=$?

echo "## go test"
echo
echo '```'
grep -E '^(ok|FAIL|---|panic|\?)|^    --- (FAIL|SKIP)|^        --- FAIL|^        --- SKIP' "$log" | grep -v '^?' | cut -c1-200
echo '```'
echo
echo "go test exit status: $status; full output: $log"
echo

if [ ! -s "$matrix" ]; then
	echo "No matrix rows were written (the tests did not run, or did not build)."
	exit "$status"
fi

# Rows: server, transport, revision, negotiated, result, failed checks, skipped checks, notes.
echo "## Matrix"
echo
awk -F'\t' '
	{
		key = $1 " | " $2
		if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
		if (!($3 in rseen)) { rseen[$3] = 1; revs[++nr] = $3 }
		cell[key, $3] = ($4 == $3) ? $5 : $5 " (" $4 ")"
	}
	END {
		printf "| server | transport |"
		for (i = 1; i <= nr; i++) printf " %s |", revs[i]
		printf "\n|---|---|"
		for (i = 1; i <= nr; i++) printf "---|"
		printf "\n"
		for (k = 1; k <= nk; k++) {
			split(keys[k], p, " [|] ")
			printf "| %s | %s |", p[1], p[2]
			for (i = 1; i <= nr; i++) {
				c = cell[keys[k], revs[i]]
				printf " %s |", (c == "" ? "-" : c)
			}
			printf "\n"
		}
	}' "$matrix"
echo
echo "Revision columns: the go-sdk server restricted to that revision (\"all\": the SDK's whole list);"
echo "\"server's choice\": what the server negotiated. A cell shows the negotiated revision in"
echo "parentheses where it is not the column's."
echo
echo "## Failed checks"
echo
echo "| server | transport | revision | failed checks |"
echo "|---|---|---|---|"
awk -F'\t' '$6 != "" { printf "| %s | %s | %s | %s |\n", $1, $2, $3, $6 }' "$matrix"
echo
if awk -F'\t' '$7 != "" { found = 1 } END { exit !found }' "$matrix"; then
	echo "## Skipped checks"
	echo
	awk -F'\t' '$7 != "" { printf "- %s, %s, %s: %s\n", $1, $2, $3, $7 }' "$matrix"
	echo
fi
echo "## Observations"
echo
awk -F'\t' '$8 != "" {
	n = split($8, notes, " ¦ ")
	for (i = 1; i <= n; i++) {
		note = $1 ": " notes[i]
		if (!(note in seen)) { seen[note] = 1; if (length(note) > 400) note = substr(note, 1, 400) "…"; print "- " note }
	}
}' "$matrix"
exit "$status"
