#!/usr/bin/env bash
# Runs the client comparison and writes RESULTS.md (and the results block of README.md).
#
#   bash bench/run.sh                      # everything, -count=6 (about 20 minutes on 2 vCPUs)
#   COUNT=10 bash bench/run.sh             # more samples
#   BENCH='CallHTTP/resp=json' COUNT=3 bash bench/run.sh   # a subset (a go test -bench regexp)
#   bash bench/run.sh 'CallMemory|Retry'   # the same, as an argument
#
# Environment: COUNT (default 6), BENCH (default: all but IdleSession), IDLE (1: also run
# BenchmarkIdleSession with -benchtime=${IDLE_SESSIONS}x, default 20; 0: skip it; on by default
# only when BENCH is not set), BENCHTIME (default 1s), OUT (default bench/results; raw go test
# output and benchstat tables go there), RESULTS (the report; default bench/RESULTS.md for a full
# run, $OUT/RESULTS.md for a subset), UPDATE_README (1: write the results into bench/README.md
# and the headline tables into the top-level README.md, see update-readmes.sh; default 1 for a
# full run, 0 for a subset).
set -euo pipefail
cd "$(dirname "$0")"

full=1
if [[ $# -gt 0 ]]; then BENCH=$1; fi
if [[ -n "${BENCH:-}" ]]; then full=0; fi
BENCH=${BENCH:-'CallHTTP|CallMemory|SessionStart|Retry'}
COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-1s}
IDLE=${IDLE:-$full}
IDLE_SESSIONS=${IDLE_SESSIONS:-20}
UPDATE_README=${UPDATE_README:-$full}
OUT=${OUT:-results}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# A full run writes bench/RESULTS.md; a subset writes $OUT/RESULTS.md.
RESULTS=${RESULTS:-$([[ $full == 1 ]] && echo "$PWD/RESULTS.md" || echo "$OUT/RESULTS.md")}

benchstat=$(command -v benchstat || true)
if [[ -z $benchstat && -x "$(go env GOPATH)/bin/benchstat" ]]; then benchstat="$(go env GOPATH)/bin/benchstat"; fi
if [[ -z $benchstat ]]; then
	GOBIN="$OUT/bin" go install golang.org/x/perf/cmd/benchstat@latest
	benchstat="$OUT/bin/benchstat"
fi

go build -o "$OUT/echoserver" ./cmd/echoserver
go test -c -o "$OUT/bench.test" .
export ECHOSERVER_BIN="$OUT/echoserver"

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$SECONDS
cmd="COUNT=$COUNT BENCHTIME=$BENCHTIME bash bench/run.sh${1:+ '$1'}"
[[ $full == 0 && $IDLE == 1 ]] && cmd="IDLE=1 $cmd"
[[ $full == 0 && $# == 0 ]] && cmd="BENCH='$BENCH' $cmd"

raw="$OUT/raw.txt"
# Other work on the machine skews every figure: every 10 s, sample the share of the machine's CPU
# used by processes other than the benchmark and its echo server.
hz=$(getconf CLK_TCK)
ncpu=$(nproc)
sample() {
	local busy ours=0 pid t
	busy=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat)
	for pid in $(pgrep -f "^$OUT/(bench.test|echoserver)"); do
		t=$(awk '{print $14+$15}' "/proc/$pid/stat" 2>/dev/null) && ours=$((ours + t))
	done
	echo "$busy $ours"
}
(
	prev=($(sample))
	while sleep 10; do
		cur=($(sample))
		awk -v b=$((cur[0] - prev[0])) -v o=$((cur[1] - prev[1])) -v n="$ncpu" -v hz="$hz" \
			'BEGIN { if (o < 0) o = 0; x = (b - o) / (10 * hz * n) * 100; if (x < 0) x = 0; printf "%.0f\n", x }'
		prev=("${cur[@]}")
	done
) >"$OUT/other-cpu.log" &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT
# The test binary runs in bench/, where TestMain finds cmd/echoserver if ECHOSERVER_BIN is unset.
"$OUT/bench.test" -test.run='^$' -test.bench="$BENCH" -test.count="$COUNT" -test.benchtime="$BENCHTIME" \
	-test.benchmem -test.timeout=2h | tee "$raw"
if [[ $IDLE == 1 ]]; then
	"$OUT/bench.test" -test.run='^$' -test.bench='IdleSession' -test.count="$COUNT" \
		-test.benchtime="${IDLE_SESSIONS}x" -test.benchmem -test.timeout=30m | grep -v '^\(goos\|goarch\|pkg\|cpu\|PASS\|ok\)' | tee -a "$raw"
fi
elapsed=$((SECONDS - t0))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
kill $sampler 2>/dev/null || true
other_peak=$(sort -g "$OUT/other-cpu.log" | tail -1)
other_mean=$(awk '{s += $1} END {if (NR) printf "%.0f", s / NR}' "$OUT/other-cpu.log")

# benchstat: the full comparison tables, and compact Markdown ones.
stat() { "$benchstat" "$@" "$raw" 2>/dev/null; }
has() { grep -q "^Benchmark$1" "$raw"; }
{
	for name in CallHTTP CallMemory SessionStart IdleSession; do
		has "$name/" && stat -col /client -filter ".name:$name"
	done
	has Retry/ && stat -col /policy -filter '.name:Retry'
} >"$OUT/benchstat.txt"

tables="$OUT/tables.md"
table() { go run ./cmd/benchtable "$@"; }
{
	if has CallHTTP/; then
		echo '### tools/call over Streamable HTTP (server in a child process: CPU is the client'"'"'s alone)'
		echo
		stat -format csv -col /client -filter '.name:CallHTTP' | table -ratios peers -units cpu-sec/op,sec/op,calls/s,B/op,allocs/op
	fi
	if has CallMemory/; then
		echo '### tools/call in memory (server in-process: its CPU is included; setup=pipe: the same go-sdk server for all, raw = server + pipe)'
		echo
		stat -format csv -col /client -filter '.name:CallMemory' | table -ratios peers -units cpu-sec/op,sec/op,calls/s,B/op,allocs/op
	fi
	if has SessionStart/; then
		echo '### Session start (until the first tools/call can be sent; reqs-total adds later requests and Close; memory-pipe: the in-process go-sdk server'"'"'s CPU and allocations included)'
		echo
		stat -format csv -col /client -filter '.name:SessionStart' | table -ratios peers -units sec/op,cpu-sec/op,reqs/op,reqs-total/op,B/op,allocs/op
	fi
	if has IdleSession/; then
		# The sessions open at once are b.N: IDLE_SESSIONS, or what BENCHTIME made of it when a
		# subset ran IdleSession in the main run.
		idle_ns=($(awk '/^BenchmarkIdleSession\// {print $2}' "$raw" | sort -un))
		idle_open=${idle_ns[0]}
		[[ ${#idle_ns[@]} -gt 1 ]] && idle_open="${idle_ns[0]} to ${idle_ns[-1]}"
		echo "### Idle session ($idle_open sessions open at once, per session, after GC; transport=pipe: the in-process go-sdk server's share included, and raw, holding a 64 KiB read buffer, is no floor)"
		echo
		stat -format csv -col /client -filter '.name:IdleSession' | table -ratios peers -noraw 'transport=pipe' -units heap-B/session
		# Goroutines and requests are a few per session, often none: their ratios say less than
		# the counts, and none is defined where a peer has none.
		stat -format csv -col /client -filter '.name:IdleSession' | table -units goroutines/session,reqs/session,gets/session
	fi
	if has Retry/; then
		echo '### Our retry machinery, and a plugin (an interceptor and an attempt hook), on the happy path (1 KiB echo, sequential)'
		echo
		stat -format csv -col /policy -filter '.name:Retry' | table -ratios retry -units cpu-sec/op,sec/op,B/op,allocs/op
	fi
} >"$tables"

cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
summary="$OUT/summary.md"
{
	echo "- date: $started, $((elapsed / 60)) min $((elapsed % 60)) s"
	echo "- machine: \`$(uname -a)\`"
	echo "- CPU: $cpu_model, $(nproc) vCPU, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM; load average $load_start at the start, $load_end at the end; other processes used ${other_mean:-?}% of the machine's CPU on average, ${other_peak:-?}% at the peak (10 s samples, in ${OUT#"$(cd .. && pwd)/"}/other-cpu.log; above a few %, the run shared the CPUs)"
	echo "- Go: $(go version | cut -d' ' -f3-); GOMAXPROCS default ($(nproc)) in both processes"
	echo "- HTTP pool: the same for every client, an \`http.Client\` of its own with net/http's \`DefaultTransport\` settings but $(awk '/^const idleConnsPerHost = / {print $4}' main_test.go) idle connections per host (left to their defaults ours would keep 64, go-sdk and mcp-go 2)"
	echo "- clients: ours (this module at $(git -C .. rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C .. diff --quiet HEAD -- . ':!bench' 2>/dev/null || echo ', with local changes')), $(awk '/modelcontextprotocol\/go-sdk |mark3labs\/mcp-go /{printf "%s %s, ", $1, $2}' go.mod)raw = the hand-written floor"
	echo "- command: \`$cmd\` (go test -bench='$BENCH' -count=$COUNT -benchtime=$BENCHTIME -benchmem$([[ $IDLE == 1 ]] && echo "; IdleSession with -benchtime=${IDLE_SESSIONS}x"))"
	echo
	echo "Medians of $COUNT runs (benchstat). cpu-sec/op is getrusage(RUSAGE_SELF) user+system time of the"
	echo "benchmark process per call; the ratio columns are ours / the better of go-sdk and mcp-go, and"
	echo "ours / raw (for calls/s, above 1 is better; for every other unit, below 1)."
	echo
	cat "$tables"
} >"$summary"
{
	echo "# Benchmark results"
	echo
	cat "$summary"
	echo "## benchstat output"
	echo
	echo '```'
	cat "$OUT/benchstat.txt"
	echo '```'
} >"$RESULTS"

if [[ $UPDATE_README == 1 ]]; then
	bash update-readmes.sh "$OUT"
fi
echo "wrote $RESULTS ($((elapsed / 60)) min $((elapsed % 60)) s)"
