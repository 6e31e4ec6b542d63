#!/usr/bin/env bash
# Runs the conformance scenarios of the request receipts extension (docs/request-receipts.md),
# conformance/receipts: the server side against the in-process targets (mcptest without receipts
# wrapped by receipts.HTTP, and mcptest's own receipts, each answering with JSON and with event
# streams), the client side against scripted servers. Each side prints "N passed, M failed" and
# is compared with conformance/receipts-baseline.txt, the runs expected to fail and why: the
# script fails when a run outside the baseline fails (a regression) or one inside it passes (the
# baseline is stale: remove the line).
#
# Usage: conformance/run-receipts.sh [--only SUBSTRING] [--side server|client|all] [-v]
#        conformance/run-receipts.sh --url URL   the server side against another server, which
#                                                must have the fixtures of fixtures.go; reported,
#                                                not compared with the baseline
# Needs Go only.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
(cd "$ROOT" && go build -o "$WORK/receipts" ./conformance/receipts)
args=("$@")
for a in "$@"; do
  [[ "$a" == --url ]] && args=(--side server "$@")
done
"$WORK/receipts" --baseline "$ROOT/conformance/receipts-baseline.txt" "${args[@]}"
