#!/usr/bin/env bash
# Runs BenchmarkConverge several times, one after the other, and prints each
# run's ratio to the floor and the median, with the speed probe's readings
# (the CPU of a fixed piece of work in the caches, and of a walk through
# memory, in Capstan's window and the floors') and how much more CPU the
# scheduler and the controller manager spent on the same work in Capstan's
# window than in the floors' (a reading of the machine's speed then), with
# the medians of the ratio divided by each.
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

# median LABEL prints the median of the numbers on standard input.
median() {
	awk NF | sort -g | awk -v label="$1" '{ v[NR] = $1 } END {
		if (NR == 0) exit
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "median %s over %d runs: %.2f (%.2f to %.2f)\n", label, NR, m, v[1], v[NR] }'
}

# ratio A B prints A / B, or nothing when either is "-".
ratio() {
	if [[ $1 != - && $2 != - ]]; then
		awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f\n", a / b }'
	fi
}

ratios=()
by_scheduler=()
by_manager=()
printf '%-4s %10s %14s %13s %8s %17s %28s %28s %16s\n' run Capstan "floor before" "floor after" "x floor" "x bookkept floor" "probe ms: C / before / after" "walk ms: C / before / after" "CPU x: sch / cm"
for i in $(seq 1 "$runs"); do
	log="$logs/run-$i.log"
	if ! (cd "$root/internal/benchmark" && CAPSTAN_BIN_DIR="${CAPSTAN_BIN_DIR:-$root/bin}" "$bin" -test.run '^$' -test.bench Converge \
		-test.benchtime=1x -test.timeout 60m -test.v) >"$log" 2>&1; then
		echo "run $i failed; its output: $log" >&2
		exit 1
	fi
	x=$(value x-floor "$log")
	sch=$(value x-cpu-scheduler "$log")
	cm=$(value x-cpu-controller-manager "$log")
	printf '%-4s %9ss %13ss %12ss %8s %17s %28s %28s %16s\n' "$i" "$(value s/converge "$log")" "$(value s/floor-before "$log")" \
		"$(value s/floor-after "$log")" "$x" "$(value x-floor-bookkept "$log")" \
		"$(value ms-probe-capstan "$log") / $(value ms-probe-floor-before "$log") / $(value ms-probe-floor-after "$log")" \
		"$(value ms-probe-mem-capstan "$log") / $(value ms-probe-mem-floor-before "$log") / $(value ms-probe-mem-floor-after "$log")" \
		"$sch / $cm"
	if [[ $x != - ]]; then
		ratios+=("$x")
		by_scheduler+=("$(ratio "$x" "$sch")")
		by_manager+=("$(ratio "$x" "$cm")")
	fi
done

# The first median is the target's. The two after it divide each run's ratio
# by how much more CPU the scheduler, or the controller manager, spent on the
# same work in Capstan's window than in the floors': a reading of the
# machine's speed in that window, which may take some of Capstan's own cost
# for the machine's (see sameWork in internal/benchmark).
if ((${#ratios[@]} > 0)); then
	printf '%s\n' "${ratios[@]}" | median "ratio to the floor"
	printf '%s\n' "${by_scheduler[@]}" | median "ratio at the scheduler's speed"
	printf '%s\n' "${by_manager[@]}" | median "ratio at the controller manager's speed"
fi
echo "each run's output: $logs"
