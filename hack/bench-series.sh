#!/usr/bin/env bash
# Runs BenchmarkConverge several times, one after the other, and prints each
# run's ratio to the floor and the median, with the speed probe's readings
# (the CPU of a fixed piece of work in the caches, and of a walk through
# memory, in Capstan's window and the floors').
# The floor's time varies from run to run by as much as the margin of the
# 1.3x target, so one run cannot decide it; the median of several can. The benchmark's own variables
# (CAPSTAN_BENCH_ADDONS, CAPSTAN_BENCH_SOURCE, CAPSTAN_BENCH_BOOKKEEPING, ...)
# apply to every run.
#
#   CAPSTAN_BENCH_RUNS   how many runs (default 5)
#   CAPSTAN_BENCH_LOGS   a folder for each run's whole output (default: a
#                        new folder under ${TMPDIR:-/tmp})
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
runs=${CAPSTAN_BENCH_RUNS:-5}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
	echo "CAPSTAN_BENCH_RUNS=$runs: want a positive number" >&2
	exit 2
fi
logs=${CAPSTAN_BENCH_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/capstan-bench-series.XXXXXX")}
mkdir -p "$logs"

# One test binary for every run, so that each measures the same code.
bin="$logs/benchmark.test"
(cd "$root" && "${GO:-go}" test -c -o "$bin" ./internal/benchmark/)

# value UNIT FILE prints the figure reported with UNIT on the benchmark's
# result line, or "-" when the run did not report it.
value() {
	awk -v unit="$1" '/^BenchmarkConverge/ { for (i = 2; i <= NF; i++) if ($i == unit) { print $(i-1); found = 1 } } END { if (!found) print "-" }' "$2"
}

ratios=()
printf '%-4s %10s %14s %13s %8s %17s %28s %28s\n' run Capstan "floor before" "floor after" "x floor" "x bookkept floor" "probe ms: C / before / after" "walk ms: C / before / after"
for i in $(seq 1 "$runs"); do
	log="$logs/run-$i.log"
	if ! (cd "$root/internal/benchmark" && CAPSTAN_BIN_DIR="$root/bin" "$bin" -test.run '^$' -test.bench Converge \
		-test.benchtime=1x -test.timeout 60m -test.v) >"$log" 2>&1; then
		echo "run $i failed; its output: $log" >&2
		exit 1
	fi
	x=$(value x-floor "$log")
	printf '%-4s %9ss %13ss %12ss %8s %17s %28s %28s\n' "$i" "$(value s/converge "$log")" "$(value s/floor-before "$log")" \
		"$(value s/floor-after "$log")" "$x" "$(value x-floor-bookkept "$log")" \
		"$(value ms-probe-capstan "$log") / $(value ms-probe-floor-before "$log") / $(value ms-probe-floor-after "$log")" \
		"$(value ms-probe-mem-capstan "$log") / $(value ms-probe-mem-floor-before "$log") / $(value ms-probe-mem-floor-after "$log")"
	if [[ $x != - ]]; then
		ratios+=("$x")
	fi
done

if ((${#ratios[@]} > 0)); then
	printf '%s\n' "${ratios[@]}" | sort -g | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "median ratio to the floor over %d runs: %.2f (%.2f to %.2f)\n", NR, m, v[1], v[NR] }'
fi
echo "each run's output: $logs"
