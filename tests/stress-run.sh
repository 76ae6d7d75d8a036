#!/usr/bin/env bash
# stress-run.sh: the flakiness check. Runs the test suite N times (default
# 3) in each of tests/run-all.sh's builds (plain build/, ASan + UBSan
# build-asan/, ThreadSanitizer build-tsan/), with a CPU hog beside it the
# whole time (Debian's stress-ng, `stress-ng --cpu 2`; installed when
# missing), and prints each run's counts (ctest's summary line and failed
# tests) and a table of them at the end. A test that passes on an idle
# machine but fails here depends on timing that load can break.
#
# Usage: bash tests/stress-run.sh [-n N] [--only plain,asan,tsan]
#                                 [--no-build] [-- CTEST_ARGS...]
#   -n N         runs per build (default 3)
#   --only LIST  the builds to run (default plain,asan,tsan)
#   --no-build   use the build folders as they are (default: build them
#                first with tests/run-ctest.sh --build; deploy/setup.sh
#                --deps-only installs the packages)
#   CTEST_ARGS   passed to every ctest, e.g. -- -R '^integration_'
# Environment:
#   FPREP_STRESS_CPU   stress-ng's --cpu workers (default 2)
#   FPREP_STRESS_DIR   where each run's ctest output is kept
#                      (default build/stress)
# Exits non-zero when any run had a failed test.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
only=plain,asan,tsan
build=1
ctest_args=()
usage="usage: bash tests/stress-run.sh [-n N] [--only plain,asan,tsan] [--no-build] [-- CTEST_ARGS...]"
while [ $# -gt 0 ]; do
	case $1 in
	-n)
		runs=${2:?$usage}
		shift 2
		;;
	--only)
		only=${2:?$usage}
		shift 2
		;;
	--no-build)
		build=0
		shift
		;;
	--)
		shift
		ctest_args=("$@")
		break
		;;
	*)
		echo "$usage" >&2
		exit 2
		;;
	esac
done
case $runs in '' | *[!0-9]* | 0)
	echo "$usage" >&2
	exit 2
	;;
esac
IFS=, read -r -a flavours <<<"$only"
for f in "${flavours[@]}"; do
	case $f in plain | asan | tsan) ;; *)
		echo "stress-run.sh: unknown build '$f' (plain, asan, tsan)" >&2
		exit 2
		;;
	esac
done
cpu=${FPREP_STRESS_CPU:-2}
logs=${FPREP_STRESS_DIR:-build/stress}

if ! command -v stress-ng >/dev/null; then
	sudo=
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "== apt-get install stress-ng"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends stress-ng ||
		{
			$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
			$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
				--no-install-recommends stress-ng
		}
fi

if [ "$build" = 1 ]; then
	bash deploy/setup.sh --deps-only
	for f in "${flavours[@]}"; do
		echo "== build ($f)"
		bash tests/run-ctest.sh --build "$f"
	done
fi
mkdir -p "$logs"

hog=
stop_hog() {
	if [ -n "$hog" ] && kill -0 "$hog" 2>/dev/null; then
		kill -TERM "$hog"
		wait "$hog" 2>/dev/null || true
	fi
	hog=
}
trap stop_hog EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "== stress-ng --cpu $cpu (beside every run)"
stress-ng --cpu "$cpu" --timeout 0 --quiet &
hog=$!

table=()
failed_runs=0
for ((run = 1; run <= runs; run++)); do
	for f in "${flavours[@]}"; do
		log=$logs/run$run-$f.log
		echo "== run $run/$runs, $f (stress-ng --cpu $cpu beside it): $log"
		t0=$SECONDS
		rc=0
		bash tests/run-ctest.sh "$f" "${ctest_args[@]}" >"$log" 2>&1 || rc=$?
		summary=$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1 || true)
		[ -n "$summary" ] || summary="no ctest summary (status $rc; see $log)"
		failures=$(sed -n '/^The following tests FAILED:/,/^Errors while running/p' "$log" |
			grep -E '^[[:space:]]+[0-9]+ - ' |
			sed 's/^[[:space:]]*[0-9]* - /   failed: /' || true)
		line=$(printf 'run %d %-5s %s (%d s)' "$run" "$f" "$summary" "$((SECONDS - t0))")
		echo "   $line"
		[ -z "$failures" ] || echo "$failures"
		table+=("$line")
		[ -z "$failures" ] || table+=("$failures")
		[ "$rc" = 0 ] || failed_runs=$((failed_runs + 1))
	done
done
stop_hog

echo
echo "== summary (tests/stress-run.sh, stress-ng --cpu $cpu${ctest_args[*]:+, ctest ${ctest_args[*]}})"
printf '%s\n' "${table[@]}"
total=$((runs * ${#flavours[@]}))
if [ "$failed_runs" != 0 ]; then
	echo "== $failed_runs of $total runs had failures"
	exit 1
fi
echo "== all $total runs passed"
