#!/usr/bin/env bash
# Writes the results of bench/run.sh's last run into bench/README.md (the summary and every
# table) and into docs/performance.md (the summary and the headline tables picked by
# headline.awk), between their markers. run.sh calls it; run it alone to redo both from the
# results of a run: bash bench/update-readmes.sh [OUT, default bench/results].
set -euo pipefail
cd "$(dirname "$0")"
OUT=${1:-results}
summary="$OUT/summary.md"
tables="$OUT/tables.md"

# replace FILE START END CONTENT-FILE: the lines between the marker lines START and END become
# CONTENT-FILE's. A file without both markers is an error: the results would go nowhere.
replace() {
	local file=$1 start=$2 end=$3 content=$4
	if ! grep -q "$start" "$file" || ! grep -q "$end" "$file"; then
		echo "update-readmes.sh: $file has no $start ... $end block" >&2
		return 1
	fi
	{
		sed -n "1,/$start/p" "$file"
		cat "$content"
		sed -n "/$end/,\$p" "$file"
	} >"$file.new"
	mv "$file.new" "$file"
}

replace README.md '<!-- results:start -->' '<!-- results:end -->' "$summary"
{
	sed -n '1,/^$/p' "$summary"
	awk -f headline.awk "$tables"
} >"$OUT/headline.md"
replace ../docs/performance.md '<!-- bench:start -->' '<!-- bench:end -->' "$OUT/headline.md"
