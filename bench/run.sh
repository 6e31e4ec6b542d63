#!/usr/bin/env bash
# Runs the client comparison on one or more Go versions and writes RESULTS.md (and the results
# blocks of bench/README.md and docs/performance.md).
#
#   bash bench/run.sh                      # the default set, 6 passes, on Go 1.26 and 1.27 (about 32 minutes on 2 quiet vCPUs)
#   COUNT=10 bash bench/run.sh             # more samples
#   GO_VERSIONS=go1.27.3 bash bench/run.sh # one Go version
#   BENCH='CallHTTP/resp=json' COUNT=3 bash bench/run.sh   # a subset (a go test -bench regexp)
#   bash bench/run.sh 'CallMemory|Retry'   # the same, as an argument
#
# Each Go version gets its own test binary and echo server, built with GOTOOLCHAIN=VERSION (the
# go command fetches a toolchain it lacks). The versions run in turns: pass 1 runs every set on
# each version in the order given, pass 2 in the reverse order, and so on, COUNT passes of one
# run each (-count=1), so that every version sees the same machine conditions, drift included.
#
# Environment: COUNT (default 6: passes), GO_VERSIONS (default: the go command's own version and
# go1.27.3, separated by spaces; a leading "go" may be left out), BENCH (one go test -bench
# regexp, or several separated by spaces, run in turn; default: the sets below), IDLE (1: also
# run BenchmarkIdleSession with -benchtime=${IDLE_SESSIONS}x, default 20; 0: skip it; on by
# default only when BENCH is not set), BENCHTIME (default 1s), OUT (default bench/results; raw
# go test output and benchstat tables go there), RESULTS (the report; default bench/RESULTS.md
# for a full run, $OUT/RESULTS.md for a subset), UPDATE_README (1: write the results into
# bench/README.md and the headline tables into docs/performance.md, see update-readmes.sh;
# default 1 for a full run, 0 for a subset).
set -euo pipefail
cd "$(dirname "$0")"

# The default set, one -bench regexp per run (a regexp's slashes split it by sub-benchmark level,
# so sets with different sub-filters cannot share one): tools/call to the stateful go-sdk server
# at 1 and 64 callers and 1 MiB (BENCH='CallHTTP' adds 8 callers, 64 KiB and 16 MiB), SSE answers
# of the stateless go-sdk server and JSON answers of the mcp-go server (BENCH='CallServer' adds
# the other two), in memory, session start, the retry machinery, and the file journal against
# the in-memory ledger at 64 callers. On 2 vCPUs a pass takes about 2.5 minutes per Go version.
default_sets=(
	'CallHTTP/./size=(1KiB|1MiB)/callers=(1|64)$'
	'CallServer/server=gosdk-stateless/resp=sse'
	'CallServer/server=mcpgo/resp=json'
	'CallMemory/setup=pipe/./callers=(1|64)$'
	'CallMemory/setup=native/./callers=1$'
	'SessionStart'
	'Retry'
	'Journal/./callers=64$'
)

full=1
if [[ $# -gt 0 ]]; then BENCH=$1; fi
if [[ -n "${BENCH:-}" ]]; then full=0; fi
if [[ $full == 1 ]]; then
	sets=("${default_sets[@]}")
else
	read -r -a sets <<<"$BENCH"
fi
COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-1s}
IDLE=${IDLE:-$full}
IDLE_SESSIONS=${IDLE_SESSIONS:-20}
UPDATE_README=${UPDATE_README:-$full}
GO_VERSIONS=${GO_VERSIONS:-"$(go env GOVERSION) go1.27.3"}
versions=()
for v in $GO_VERSIONS; do versions+=("go${v#go}"); done
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
go build -o "$OUT/benchtable" ./cmd/benchtable

for v in "${versions[@]}"; do
	mkdir -p "$OUT/$v"
	GOTOOLCHAIN=$v go build -o "$OUT/$v/echoserver" ./cmd/echoserver
	GOTOOLCHAIN=$v go test -c -o "$OUT/$v/bench.test" .
	for bin in echoserver bench.test; do
		built=$(go version "$OUT/$v/$bin" | awk '{print $2}')
		if [[ $built != "$v" ]]; then
			echo "$OUT/$v/$bin was built by $built, not $v" >&2
			exit 1
		fi
	done
	: >"$OUT/raw-$v.txt"
done

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$SECONDS
cmd="COUNT=$COUNT BENCHTIME=$BENCHTIME GO_VERSIONS='${versions[*]}' bash bench/run.sh${1:+ '$1'}"
[[ $full == 0 && $IDLE == 1 ]] && cmd="IDLE=1 $cmd"
[[ $full == 0 && $# == 0 ]] && cmd="BENCH='$BENCH' $cmd"

# Other work on the machine skews every figure: every 10 s, sample the share of the machine's CPU
# used by processes other than the benchmark and its echo server. A test binary that ended
# between two samples is no longer in /proc: its time (and its echo server's, which it waited
# for) is in this shell's children's time, so the benchmark's own share is that plus the time of
# the binaries and servers still running.
hz=$(getconf CLK_TCK)
ncpu=$(nproc)
sample() {
	local busy ours pid t
	busy=$(awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat)
	ours=$(awk '{print $16+$17}' /proc/$$/stat)
	for pid in $(pgrep -f "^$OUT/[^ ]*bench\.test"); do
		t=$(awk '{print $14+$15+$16+$17}' "/proc/$pid/stat" 2>/dev/null) && ours=$((ours + t))
	done
	for pid in $(pgrep -f "^$OUT/[^ ]*echoserver"); do
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

# bench VERSION PATTERN BENCHTIME: one run of the benchmarks PATTERN matches, appended to the
# version's raw output. The test binary runs in bench/, where TestMain would find
# cmd/echoserver; ECHOSERVER_BIN names the one built with the same version.
bench() {
	ECHOSERVER_BIN="$OUT/$1/echoserver" "$OUT/$1/bench.test" -test.run='^$' -test.bench="$2" -test.count=1 \
		-test.benchtime="$3" -test.benchmem -test.timeout=1h | grep -v '^PASS$' | tee -a "$OUT/raw-$1.txt"
}
for ((pass = 1; pass <= COUNT; pass++)); do
	order=("${versions[@]}")
	if ((pass % 2 == 0)); then
		order=()
		for ((i = ${#versions[@]} - 1; i >= 0; i--)); do order+=("${versions[i]}"); done
	fi
	for v in "${order[@]}"; do
		echo "# pass $pass of $COUNT, $v"
		for set in "${sets[@]}"; do
			bench "$v" "$set" "$BENCHTIME"
		done
		if [[ $IDLE == 1 ]]; then
			bench "$v" 'IdleSession' "${IDLE_SESSIONS}x"
		fi
	done
done
elapsed=$((SECONDS - t0))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
kill $sampler 2>/dev/null || true
other_peak=$(sort -g "$OUT/other-cpu.log" | tail -1)
other_mean=$(awk '{s += $1} END {if (NR) printf "%.0f", s / NR}' "$OUT/other-cpu.log")

# raws: each version's raw output.
raws=()
for v in "${versions[@]}"; do raws+=("$OUT/raw-$v.txt"); done
# has NAME: some version ran BenchmarkNAME's sub-benchmarks.
has() { grep -q "^Benchmark$1" "${raws[@]}"; }
# csv FILTER COL: benchstat's CSV of each version's runs, one LABEL=FILE argument per version
# for benchtable.
csv() {
	local v args=() name
	name=$(echo "$1$2" | tr -c 'A-Za-z0-9' _)
	for v in "${versions[@]}"; do
		"$benchstat" -format csv -col "$2" -filter "$1" "$OUT/raw-$v.txt" >"$OUT/$v/$name.csv" 2>/dev/null
		args+=("$v=$OUT/$v/$name.csv")
	done
	echo "${args[@]}"
}
table() { "$OUT/benchtable" "$@"; }

# benchstat: the full comparison tables of each version, and ours from one version to the next.
{
	for v in "${versions[@]}"; do
		echo "## $v"
		echo
		for name in CallHTTP CallServer CallMemory SessionStart IdleSession; do
			grep -q "^Benchmark$name/" "$OUT/raw-$v.txt" && "$benchstat" -col /client -filter ".name:$name" "$OUT/raw-$v.txt" 2>/dev/null
		done
		grep -q '^BenchmarkRetry/' "$OUT/raw-$v.txt" && "$benchstat" -col /policy -filter '.name:Retry' "$OUT/raw-$v.txt" 2>/dev/null
		grep -q '^BenchmarkJournal/' "$OUT/raw-$v.txt" && "$benchstat" -col /store -filter '.name:Journal' "$OUT/raw-$v.txt" 2>/dev/null
		echo
	done
	if [[ ${#versions[@]} -gt 1 ]]; then
		echo "## ours (and Retry, Journal) from one Go version to the next (columns: raw-VERSION.txt)"
		echo
		(cd "$OUT" && "$benchstat" -filter '/client:ours OR .name:Retry OR .name:Journal' "${raws[@]#"$OUT/"}" 2>/dev/null) || true
	fi
} >"$OUT/benchstat.txt"

tables="$OUT/tables.md"
{
	echo '### Headline figures (ratios of medians, ours'"'"' median in parentheses; below 1 is better, but for calls/s)'
	echo
	journals=()
	for v in "${versions[@]}"; do journals+=(-journal "$v=$OUT/raw-$v.txt"); done
	table -key "${journals[@]}" $(csv '.name:(CallHTTP OR CallServer OR SessionStart OR IdleSession)' /client)
	if has CallHTTP/; then
		echo '### tools/call over Streamable HTTP to the stateful go-sdk server, 2025-11-25 (server in a child process: CPU is the client'"'"'s alone)'
		echo
		table -ratios peers -units cpu-sec/op,sec/op,calls/s,B/op,allocs/op $(csv .name:CallHTTP /client)
	fi
	if has CallServer/; then
		echo '### tools/call over Streamable HTTP, 2026-07-28 for every client: the stateless go-sdk server and the mcp-go server (in the same child process)'
		echo
		table -ratios peers -units cpu-sec/op,sec/op,calls/s,B/op,allocs/op $(csv .name:CallServer /client)
	fi
	if has CallMemory/; then
		echo '### tools/call in memory (server in-process: its CPU is included; setup=pipe: the same go-sdk server for all, raw = server + pipe)'
		echo
		table -ratios peers -units cpu-sec/op,sec/op,calls/s,B/op,allocs/op $(csv .name:CallMemory /client)
	fi
	if has SessionStart/; then
		echo '### Session start (until the first tools/call can be sent; reqs-total adds later requests and Close; memory-pipe: the in-process go-sdk server'"'"'s CPU and allocations included)'
		echo
		table -ratios peers -units sec/op,cpu-sec/op,reqs/op,reqs-total/op,B/op,allocs/op $(csv .name:SessionStart /client)
	fi
	if has IdleSession/; then
		# The sessions open at once are b.N: IDLE_SESSIONS, or what BENCHTIME made of it when a
		# subset ran IdleSession in its sets.
		idle_ns=($(awk '/^BenchmarkIdleSession\// {print $2}' "${raws[@]}" | sort -un))
		idle_open=${idle_ns[0]}
		[[ ${#idle_ns[@]} -gt 1 ]] && idle_open="${idle_ns[0]} to ${idle_ns[-1]}"
		echo "### Idle session ($idle_open sessions open at once, per session, after GC; transport=pipe: the in-process go-sdk server's share included, and raw, holding a 64 KiB read buffer, is no floor)"
		echo
		idle_csv=$(csv .name:IdleSession /client)
		table -ratios peers -noraw 'transport=pipe' -units heap-B/session $idle_csv
		# Goroutines and requests are a few per session, often none: their ratios say less than
		# the counts, and none is defined where a peer has none.
		table -units goroutines/session,reqs/session,gets/session $idle_csv
	fi
	if has Retry/; then
		echo '### Our retry machinery, and a plugin (an interceptor and an attempt hook), on the happy path (1 KiB echo, sequential)'
		echo
		table -ratios retry -units cpu-sec/op,sec/op,B/op,allocs/op $(csv .name:Retry /policy)
	fi
	if has Journal/; then
		echo '### Our client with the bbolt file journal against the in-memory ledger (1 KiB echo over HTTP with JSON answers; latency-sec/call: the mean time of one call)'
		echo
		table -ratios journal -units latency-sec/call,cpu-sec/op,calls/s,syncs/call,B/op,allocs/op $(csv .name:Journal /store)
	fi
} >"$tables"

passes="$COUNT pass$([[ $COUNT == 1 ]] || echo es)"
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
go_list=$(printf '%s, ' "${versions[@]}")
go_list=${go_list%, }
summary="$OUT/summary.md"
{
	echo "- date: $started, $((elapsed / 60)) min $((elapsed % 60)) s"
	echo "- machine: \`$(uname -a)\`"
	echo "- CPU: $cpu_model, $(nproc) vCPU, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM; load average $load_start at the start, $load_end at the end; other processes used ${other_mean:-?}% of the machine's CPU on average, ${other_peak:-?}% at the peak (10 s samples, in ${OUT#"$(cd .. && pwd)/"}/other-cpu.log; above a few %, the run shared the CPUs)"
	echo "- Go: $go_list ($(go env GOOS)/$(go env GOARCH)), the test binary and the echo server built with each; the versions take turns, pass by pass, in alternating order; GOMAXPROCS default ($(nproc)) in both processes"
	echo "- HTTP pool: the same for every client, an \`http.Client\` of its own with net/http's \`DefaultTransport\` settings but $(awk '/^const idleConnsPerHost = / {print $4}' main_test.go) idle connections per host (left to their defaults ours would keep 64, go-sdk and mcp-go 2)"
	echo "- clients: ours (this module at $(git -C .. rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C .. diff --quiet HEAD -- . ':!bench' 2>/dev/null || echo ', with local changes')), $(awk '/modelcontextprotocol\/go-sdk |mark3labs\/mcp-go /{printf "%s %s, ", $1, $2}' go.mod)raw = the hand-written floor"
	echo "- command: \`$cmd\` ($passes, each: go test -bench for $(printf "'%s' " "${sets[@]}")-count=1 -benchtime=$BENCHTIME -benchmem$([[ $IDLE == 1 ]] && echo "; IdleSession with -benchtime=${IDLE_SESSIONS}x"))"
	echo
	echo "Medians of $passes per Go version (benchstat). cpu-sec/op is getrusage(RUSAGE_SELF)"
	echo "user+system time of the benchmark process per call; the ratio columns are ours / the better"
	echo "of go-sdk and mcp-go, and ours / raw (for calls/s, above 1 is better; for every other unit,"
	echo "below 1). Each benchmark has a row per Go version."
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
