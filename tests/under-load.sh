#!/usr/bin/env bash
# under-load.sh: runs ctest in each BUILD_DIR ROUNDS times in a row with a
# CPU hog beside it (Debian's stress-ng, one worker a core), and prints
# each round's failures and the counts at the end: how a test that counts
# on timing shows it. Exit status 0 when every round passed.
#
# Usage: bash tests/under-load.sh [-n ROUNDS] [-R REGEX] BUILD_DIR...
#   -n ROUNDS  rounds per build folder (default 3)
#   -R REGEX   only the tests ctest -R REGEX selects (default: all)
#   FPREP_CTEST_ARGS  more ctest arguments (e.g. "-j2 -E gpu_")
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3
regex=
while getopts n:R: opt; do
	case $opt in
	n) rounds=$OPTARG ;;
	R) regex=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || {
	echo "usage: bash tests/under-load.sh [-n ROUNDS] [-R REGEX] BUILD_DIR..." >&2
	exit 2
}
command -v stress-ng >/dev/null || {
	echo "under-load.sh: stress-ng is not installed (Debian: stress-ng)" >&2
	exit 2
}

stress-ng --cpu "$(nproc)" --timeout 0 >/dev/null 2>&1 &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT
logs=$(mktemp -d)
summary=()
status=0
for build in "$@"; do
	passed=0
	for round in $(seq 1 "$rounds"); do
		log=$logs/$(basename "$build")-$round.log
		# shellcheck disable=SC2086 # FPREP_CTEST_ARGS are words
		if ctest --test-dir "$build" ${regex:+-R "$regex"} \
			--output-on-failure ${FPREP_CTEST_ARGS:-} >"$log" 2>&1; then
			passed=$((passed + 1))
			echo "$build round $round: $(grep -m1 'tests passed' "$log")"
		else
			status=1
			echo "$build round $round: $(grep -m1 'tests passed' "$log" || echo 'ctest failed')"
			sed -n '/The following tests FAILED/,$p' "$log"
		fi
	done
	summary+=("$build: $passed of $rounds rounds passed")
done
echo "== beside stress-ng --cpu $(nproc); logs in $logs"
printf '%s\n' "${summary[@]}"
exit $status
