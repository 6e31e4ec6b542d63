#!/usr/bin/env bash
# Runs the interop tests (go test -count=1 ./... in this module) and prints the matrix, server x
# transport x protocol revision -> PASS/FAIL, as markdown on stdout. The tests append one row per
# combination to the file named by MCPCLIENT_INTEROP_MATRIX, and the receipts tests one row per
# server x mode x fault x client to MCPCLIENT_INTEROP_RECEIPTS, and TestFleet one row per SDK (or
# why it skipped) to MCPCLIENT_INTEROP_FLEET; the full go test output goes to a log file whose path
# is printed. Extra arguments go to go test (e.g. -run TestGoSDK).
# Exit status: that of go test.
set -uo pipefail
cd "$(dirname "$0")"

matrix="$(mktemp)"
receipts="$(mktemp)"
fleet="$(mktemp)"
log="${TMPDIR:-/tmp}/mcpclient-interop-$(date +%Y%m%d-%H%M%S).log"
trap 'rm -f "$matrix" "$receipts" "$fleet"' EXIT

MCPCLIENT_INTEROP_MATRIX="$matrix" MCPCLIENT_INTEROP_RECEIPTS="$receipts" MCPCLIENT_INTEROP_FLEET="$fleet" go test -count=1 "$@" ./... >"$log" 2>&1
status=$?

echo "## go test"
echo
echo '```'
grep -E '^(ok|FAIL|---|panic|\?)|^    --- (FAIL|SKIP)|^        --- FAIL|^        --- SKIP' "$log" | grep -v '^?' | cut -c1-200
echo '```'
echo
echo "go test exit status: $status; full output: $log"
echo

# Fleet rows: server, then "label count" fields; or "skipped" and why. TestFleet needs a
# PostgreSQL (the one MCPCLIENT_PG_URL names, or a local installation it starts one from).
echo "## Fleet: three server processes, one store in PostgreSQL"
echo
if grep -q '^skipped' "$fleet"; then
	echo "TestFleet SKIPPED: $(grep '^skipped' "$fleet" | head -1 | cut -f2-)"
elif [ -s "$fleet" ]; then
	result=PASS
	grep -qE '^\s*--- FAIL: TestFleet' "$log" && result=FAIL
	echo "TestFleet RAN ($result): per SDK, three stateless server processes wrapped by receipts.HTTP over one"
	echo "PostgreSQL store, behind a round-robin proxy that loses every 4th answer after the tool ran;"
	echo "one process SIGKILLed mid-handler and restarted."
	echo
	echo "| server | calls | executions | answered | replayed | unknown | answers lost | handlers killed |"
	echo "|---|---|---|---|---|---|---|---|"
	awk -F'\t' '{
		printf "| %s |", $1
		for (i = 2; i <= NF; i++) { n = split($i, w, " "); printf " %s |", w[n] }
		printf "\n"
	}' "$fleet"
elif grep -qE '^\s*--- FAIL: TestFleet' "$log"; then
	echo "TestFleet FAILED before it counted anything: see the log."
else
	echo "TestFleet did not run (not selected by -run, or the tests did not build)."
fi
echo

# Receipts rows: server, mode, fault, setup, calls, executions, most runs of a call, calls run
# more than once, unknown outcomes, other failures, replayed answers, cancelled answers.
if [ -s "$receipts" ]; then
	echo "## Receipts: the same faults with and without receipts.HTTP"
	echo
	echo "Every fault breaks the first delivery of a call to an unsafe tool; TestReceiptsUnderFaults gives"
	echo "each fault to 2 calls, TestReceiptsUnderLoad draws faults at random for 128 calls of 32 callers."
	echo "Cells: calls, most runs of one call, calls run twice, unknown outcomes (ErrOutcomeUnknown)."
	echo
	awk -F'\t' '
		function cell(k) { return (k in calls) ? sprintf("%d calls: max %d run, %d twice, %d unknown", calls[k], maxr[k], twice[k], unk[k]) : "-" }
		{
			row = $1 " | " $2
			if (!(row in seen)) { seen[row] = 1; rows[++n] = row }
			k = row SUBSEP $4
			calls[k] += $5; twice[k] += $8; unk[k] += $9
			if ($7 > maxr[k]) maxr[k] = $7
		}
		END {
			print "| server | mode | mcpclient + receipts.HTTP | mcpclient, no middleware | naive retry, no middleware |"
			print "|---|---|---|---|---|"
			for (i = 1; i <= n; i++)
				printf "| %s | %s | %s | %s |\n", rows[i], cell(rows[i] SUBSEP "mcpclient + receipts.HTTP"),
					cell(rows[i] SUBSEP "mcpclient, no middleware"), cell(rows[i] SUBSEP "naive retry, no middleware")
		}' "$receipts"
	echo
	echo "By fault, over every server and mode (replayed: answers marked as read from a receipt;"
	echo "cancelled: the tool's cancellation error, kept in the receipt, after the caller's deadline):"
	echo
	awk -F'\t' '
		{
			if (!($3 in seen)) { seen[$3] = 1; faults[++n] = $3 }
			k = $3 SUBSEP $4
			calls[k] += $5; runs[k] += $6; twice[k] += $8; unk[k] += $9; failed[k] += $10; rep[k] += $11; canc[k] += $12
			if ($7 > maxr[k]) maxr[k] = $7
		}
		END {
			print "| fault | receipts.HTTP: max runs, unknown, replayed, cancelled | no middleware: runs/calls, unknown | naive retry: runs/calls, run twice |"
			print "|---|---|---|---|"
			for (i = 1; i <= n; i++) {
				f = faults[i]; r = f SUBSEP "mcpclient + receipts.HTTP"; p = f SUBSEP "mcpclient, no middleware"; v = f SUBSEP "naive retry, no middleware"
				printf "| %s | %d, %d, %d/%d, %d | %d/%d, %d | %d/%d, %d |\n", f, maxr[r], unk[r] + failed[r], rep[r], calls[r], canc[r],
					runs[p], calls[p], unk[p], runs[v], calls[v], twice[v]
			}
		}' "$receipts"
	echo
fi

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
echo "Revision columns: the go-sdk server restricted to that revision (\"all\": the SDK's whole list),"
echo "or, for ts-sdk, the client pinned to it;"
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
