#!/usr/bin/env bash
# Runs every Go fuzz target, one after the other, for FUZZTIME each, and
# prints each target's executions and a summary table (docs/fuzzing.md).
#
#   FUZZTIME=60s       how long each target runs
#   FUZZ=regexp        only the targets whose name matches
#   FUZZ_PARALLEL=1    fuzz workers per target; the machine is shared
#   FUZZMINIMIZETIME   how long an input is minimised (default 5s)
#   FUZZ_KEEP=1        copy the corpus each target grew into its testdata
#
# It fails when a target fails; a crasher is written to the package's
# testdata/fuzz/FuzzName/ and replays with go test -run FuzzName/<file>.
#
# The corpus a target grows (the inputs that reached new code) lands in Go's
# cache. With FUZZ_KEEP=1, the default, each target that passed has it copied
# into its package's testdata/fuzz/FuzzName/, next to the seeds: committed,
# it makes the next run start where this one stopped, on any machine, and
# `go test` (so make test) replays every kept input as a regression case.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-60s}
FUZZ=${FUZZ:-.}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-1}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
FUZZ_KEEP=${FUZZ_KEEP:-1}
GO=${GO:-go}
module=$($GO list -m)
cache=$($GO env GOCACHE)/fuzz
# gitops's TestMain starts a control plane unless told not to; no fuzz
# target needs one.
export CAPSTAN_SKIP_INTEGRATION=1

# NOTE: targets are found with grep, not `go test -list`: listing runs each
# package's TestMain, and some start a local control plane.
mapfile -t targets < <(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' api cmd internal test 2>/dev/null |
	sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*).*#\1 \2#' | sort -u | awk -v re="$FUZZ" '$2 ~ re')
if [ ${#targets[@]} -eq 0 ]; then
	echo "no fuzz target matches FUZZ=$FUZZ"
	exit 1
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
rows=()
failed=0
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	echo "=== $name ($dir, $FUZZTIME)"
	corpus="$dir/testdata/fuzz/$name"
	before=$(ls "$corpus" 2>/dev/null | sort || true)
	log="$logs/$name.log"
	rc=0
	$GO test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" \
		-parallel "$FUZZ_PARALLEL" "./$dir" 2>&1 | tee "$log" | grep -v '^fuzz: elapsed: .*, execs: ' || rc=${PIPESTATUS[0]}
	execs=$(grep -Eo 'execs: [0-9]+' "$log" | tail -1 | awk '{print $2}' || true)
	new=$(comm -13 <(echo "$before") <(ls "$corpus" 2>/dev/null | sort || true) | head -1 || true)
	if [ "$rc" -eq 0 ]; then
		result=ok
	elif [ -n "$new" ]; then
		result="FAIL: $corpus/$new"
		failed=1
	elif grep -q '^    context deadline exceeded$' "$log"; then
		# NOTE: Go before 1.27 can fail a target at the end of -fuzztime with
		# no input at fault (go.dev/issue/75804); no crasher was written.
		result="ok (deadline race, go.dev/issue/75804)"
	else
		result="FAIL: see the output above"
		failed=1
	fi
	kept=0
	if [ "$FUZZ_KEEP" = 1 ] && [ "$rc" -eq 0 ] && [ -d "$cache/$module/$dir/$name" ]; then
		mkdir -p "$corpus"
		for f in "$cache/$module/$dir/$name"/*; do
			[ -e "$corpus/${f##*/}" ] && continue
			cp "$f" "$corpus/" && kept=$((kept + 1))
		done
		result="$result, $kept inputs kept"
	fi
	echo "--- $name: ${execs:-0} executions, $result"
	rows+=("$(printf '%-24s %-26s %12s  %s' "$name" "$dir" "${execs:-0}" "$result")")
done

echo
echo "Fuzzing summary ($FUZZTIME per target, $FUZZ_PARALLEL worker(s), $($GO version | awk '{print $3}'))"
printf '%-24s %-26s %12s  %s\n' TARGET PACKAGE EXECUTIONS RESULT
printf '%s\n' "${rows[@]}"
exit $failed
