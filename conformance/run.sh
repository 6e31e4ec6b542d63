#!/usr/bin/env bash
# Runs every client scenario of the official MCP conformance suite against conformance/client
# and compares the outcome with conformance/baseline.txt, the scenarios expected to fail and why.
# Fails when a scenario outside the baseline fails (a regression) or one inside it passes (the
# baseline is stale: remove the line).
#
# Usage: conformance/run.sh [--only REGEX] [--jobs N]
# Needs Node.js and npm; installs @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into
# ~/.cache (or $XDG_CACHE_HOME) on first use.
set -euo pipefail

ONLY=""
JOBS=2 # more makes the timing of sse-retry flaky on a small machine
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) ONLY="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    *) echo "usage: $0 [--only REGEX] [--jobs N]" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$ROOT/conformance/suite.sh"

(cd "$ROOT" && go build -o "$WORK/client" ./conformance/client)

mapfile -t SCENARIOS < <(suite list --client | sed -n 's/^  - \([^ ]*\).*/\1/p')
[[ -n "$ONLY" ]] && mapfile -t SCENARIOS < <(printf '%s\n' "${SCENARIOS[@]}" | grep -E -- "$ONLY")
(( ${#SCENARIOS[@]} > 0 )) || { echo "conformance: no scenarios" >&2; exit 2; }

mkdir -p "$WORK/logs" "$WORK/results"
run_one() {
  local s="$1" log="$WORK/logs/${1//\//__}.log"
  if suite client --command "$WORK/client" --scenario "$s" --timeout 15000 -o "$WORK/results" >"$log" 2>&1 &&
     # A run that recorded no SUCCESS check exercised nothing, whatever the runner says.
     grep -q '"status": *"SUCCESS"' "$(sed 's/\x1b\[[0-9;]*m//g' "$log" | sed -n 's/^Results saved to //p' | tail -1)/checks.json" 2>/dev/null; then
    echo PASS >"$log.status"
  else
    echo FAIL >"$log.status"
  fi
}
running=0
for s in "${SCENARIOS[@]}"; do
  run_one "$s" &
  if (( ++running >= JOBS )); then wait -n; running=$((running - 1)); fi
done
wait

declare -A expected
while read -r name reason; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  expected[$name]="$reason"
done <"$ROOT/conformance/baseline.txt"

pass=0; xfail=0; bad=0
for s in "${SCENARIOS[@]}"; do
  status="$(cat "$WORK/logs/${s//\//__}.log.status")"
  if [[ "$status" == PASS ]]; then
    pass=$((pass + 1))
    if [[ -n "${expected[$s]+x}" ]]; then
      echo "STALE $s passes now: remove it from conformance/baseline.txt"; bad=$((bad + 1))
    else
      echo "PASS  $s"
    fi
  else
    if [[ -n "${expected[$s]+x}" ]]; then
      xfail=$((xfail + 1))
      echo "xfail $s (${expected[$s]})"
    else
      echo "FAIL  $s: a regression; log follows"; sed 's/^/    /' "$WORK/logs/${s//\//__}.log" | tail -40; bad=$((bad + 1))
    fi
  fi
done
echo "$pass passed, $xfail failed as the baseline expects, $bad unexpected"
(( bad == 0 ))
