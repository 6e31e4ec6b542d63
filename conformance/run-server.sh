#!/usr/bin/env bash
# Runs every server scenario of the official MCP conformance suite against conformance/server (an
# mcptest server with the fixtures the scenarios expect), at each revision the scenario lists that
# the server speaks (extension scenarios at 2026-07-28, see below), and compares the outcome with
# conformance/server-baseline.txt, the runs expected to fail and why. Fails when a run outside the
# baseline fails (a regression) or one inside it passes (the baseline is stale: remove the line).
#
# A run passes when no check it recorded failed (warnings allowed) and at least one succeeded: a
# run whose checks were all skipped (an extension the server does not declare, say) exercised
# nothing.
#
# Usage: conformance/run-server.sh [--only REGEX] [--jobs N] [--url URL]
#   --only  run only the runs whose SCENARIO@REVISION matches REGEX (grep -E)
#   --jobs  how many runs at a time (default 2)
#   --url   run the same scenarios against another server, already serving at URL (a
#           http://localhost:PORT/... one: the DNS rebinding scenario needs it), and report its
#           outcome without comparing it with the baseline
# Needs Go, Node.js and npm; installs @modelcontextprotocol/conformance@$CONFORMANCE_VERSION into
# ~/.cache (or $XDG_CACHE_HOME) on first use.
set -euo pipefail

ONLY=""
JOBS=2
OTHER=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --only) ONLY="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --url) OTHER="$2"; shift 2 ;;
    *) echo "usage: $0 [--only REGEX] [--jobs N] [--url URL]" >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
source "$ROOT/conformance/suite.sh"

(cd "$ROOT" && go build -o "$WORK/server" ./conformance/server)
mapfile -t SPOKEN < <("$WORK/server" -revisions)

URL="$OTHER"
if [[ -z "$OTHER" ]]; then
  # Started from a subshell, the server is no child of this shell, whose `wait` waits for the
  # runs alone.
  SERVER_PID="$("$WORK/server" -addr localhost:0 >"$WORK/url" 2>"$WORK/server.log" & echo $!)"
  for _ in $(seq 100); do
    URL="$(head -n1 "$WORK/url")"
    [[ -n "$URL" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "conformance: the server exited" >&2; cat "$WORK/server.log" >&2; exit 2; }
    sleep 0.1
  done
  [[ -n "$URL" ]] || { echo "conformance: the server printed no URL" >&2; exit 2; }
fi

# `list --server` prints "  - NAME [REV,REV,...]", or "[extension]" for an extension's scenario,
# which is on no revision's timeline: it runs at the stateless revision, forced, and the Skills
# extension's also at the newest stateful one, where mcptest serves it too (the tasks extension's
# need the stateless revision's tasks, and wait out the suite's timeout on a stateful one).
STATEFUL_EXTENSIONS='^sep-2640-'
RUNS=()
while read -r name revs; do
  revs="${revs#[}"; revs="${revs%]}"
  for rev in ${revs//,/ }; do
    if [[ "$rev" == extension ]]; then
      [[ "$name" =~ $STATEFUL_EXTENSIONS ]] && RUNS+=("$name@2025-11-25+force")
      RUNS+=("$name@2026-07-28+force")
    elif printf '%s\n' "${SPOKEN[@]}" | grep -qx -- "$rev"; then
      RUNS+=("$name@$rev")
    fi
  done
done < <(suite list --server | sed -n 's/^  - \([^ ]*\) \(\[.*\]\)$/\1 \2/p')
if [[ -n "$ONLY" ]]; then
  mapfile -t RUNS < <(printf '%s\n' "${RUNS[@]}" | grep -E -- "$ONLY" || true)
fi
(( ${#RUNS[@]} > 0 )) || { echo "conformance: no scenarios" >&2; exit 2; }

mkdir -p "$WORK/logs"
run_one() {
  local run="$1" log="$WORK/logs/${1%+force}.log" name rev force=()
  name="${run%@*}"; rev="${run#*@}"
  if [[ "$rev" == *+force ]]; then rev="${rev%+force}"; force=(--force); fi
  timeout 120 node "${NODE_ARGS[@]}" "$CLI" server --url "$URL" --scenario "$name" --spec-version "$rev" "${force[@]}" \
    2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
  local summary
  summary="$(grep -oE 'Passed: [0-9]+/[0-9]+, [0-9]+ failed' "$log" | tail -1 || true)"
  if [[ "$summary" =~ Passed:\ ([0-9]+)/[0-9]+,\ 0\ failed ]] && (( BASH_REMATCH[1] > 0 )); then
    echo PASS >"$log.status"
  else
    echo "FAIL ${summary:-no summary}: $(grep -E '\] FAILURE' "$log" | sed -E 's/.*\[ *([^] ]*) *\] FAILURE.*/\1/' | sort -u | tr '\n' ' ')" >"$log.status"
  fi
}
running=0
for run in "${RUNS[@]}"; do
  run_one "$run" &
  if (( ++running >= JOBS )); then wait -n; running=$((running - 1)); fi
done
wait

# Passed and failed runs by revision.
totals() {
  for rev in $(printf '%s\n' "${RUNS[@]%+force}" | sed 's/.*@//' | sort -u); do
    local p=0 f=0
    for run in "${RUNS[@]%+force}"; do
      [[ "${run#*@}" == "$rev" ]] || continue
      if [[ "$(cat "$WORK/logs/$run.log.status")" == PASS ]]; then p=$((p + 1)); else f=$((f + 1)); fi
    done
    echo "$rev: $p passed, $f failed"
  done
}

if [[ -n "$OTHER" ]]; then
  for run in "${RUNS[@]%+force}"; do
    status="$(cat "$WORK/logs/$run.log.status")"
    [[ "$status" == PASS ]] && echo "PASS  $run" || echo "FAIL  $run (${status#FAIL })"
  done
  totals
  exit 0
fi

declare -A expected
while read -r name reason; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  expected[$name]="$reason"
done <"$ROOT/conformance/server-baseline.txt"

pass=0; xfail=0; bad=0
for run in "${RUNS[@]}"; do
  run="${run%+force}"
  status="$(cat "$WORK/logs/$run.log.status")"
  if [[ "$status" == PASS ]]; then
    pass=$((pass + 1))
    if [[ -n "${expected[$run]+x}" ]]; then
      echo "STALE $run passes now: remove it from conformance/server-baseline.txt"; bad=$((bad + 1))
    else
      echo "PASS  $run"
    fi
  elif [[ -n "${expected[$run]+x}" ]]; then
    xfail=$((xfail + 1))
    echo "xfail $run (${expected[$run]})"
  else
    echo "FAIL  $run: a regression (${status#FAIL }); log follows"
    sed 's/^/    /' "$WORK/logs/$run.log" | tail -40
    bad=$((bad + 1))
  fi
done
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "the server exited during the run; its log follows"; sed 's/^/    /' "$WORK/server.log" | tail -40; bad=$((bad + 1))
fi
totals
echo "$pass passed, $xfail failed as the baseline expects, $bad unexpected"
(( bad == 0 ))
