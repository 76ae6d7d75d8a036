#!/usr/bin/env bash
# run-all.sh: sets up a fresh Debian machine (packages, build), checks that
# every C, header and CUDA file is formatted as .clang-format says, and runs
# the whole test suite three times: a normal build, an ASan + UBSan build and
# a ThreadSanitizer build; and it runs the wire decoders' libFuzzer target
# (clang) for 60 s. GPU tests (ctest label "gpu") skip with a clear message
# where no GPU is present.
#
# Every stage runs even when an earlier one failed (a stage whose build
# fails is marked failed, the next goes on); at the end a summary lists each
# stage's result (ctest's counts and failed tests for the test stages), and
# the exit status is non-zero when any stage failed. Each test stage's
# ctest output is also kept in BUILD_DIR/ctest.log.
#
# Usage: bash tests/run-all.sh [--no-asan] [--no-tsan] [--no-fuzz]
set -uo pipefail
cd "$(dirname "$0")/.."
asan=1
tsan=1
fuzz=1
for arg in "$@"; do
	case "$arg" in
	--no-asan) asan=0 ;;
	--no-tsan) tsan=0 ;;
	--no-fuzz) fuzz=0 ;;
	*)
		echo "usage: bash tests/run-all.sh [--no-asan] [--no-tsan] [--no-fuzz]" >&2
		exit 2
		;;
	esac
done
jobs=$(nproc 2>/dev/null || echo 2)

names=()   # stage names, in order
results=() # PASS, FAIL or SKIP
notes=()   # time, exit status, ctest's counts and failed tests
note_file=$(mktemp "${TMPDIR:-/tmp}/run-all-note.XXXXXX")
trap 'rm -f "$note_file"' EXIT
# stage NAME FUNCTION: runs FUNCTION in a subshell with set -e (its first
# failing command ends the stage) and records the result; what the stage
# writes to $note_file goes into the summary.
stage() {
	local name=$1 fn=$2 t0=$SECONDS rc
	echo
	echo "== stage: $name"
	: >"$note_file"
	(
		set -e
		"$fn"
	)
	rc=$?
	names+=("$name")
	if [ "$rc" = 0 ]; then
		results+=(PASS)
		notes+=("$((SECONDS - t0)) s$(cat "$note_file")")
	else
		results+=(FAIL)
		notes+=("$((SECONDS - t0)) s, exit status $rc$(cat "$note_file")")
	fi
	echo "== stage: $name: ${results[-1]}"
}
skip() {
	names+=("$1")
	results+=(SKIP)
	notes+=("$2")
}

# ctest_stage FLAVOUR BUILD_DIR: the suite of one build folder, through
# tests/run-ctest.sh; its output is kept in BUILD_DIR/ctest.log and its
# summary (counts, failed tests) goes to the stage's note.
ctest_stage() {
	local flavour=$1 dir=$2 rc=0
	bash tests/run-ctest.sh "$flavour" 2>&1 | tee "$dir/ctest.log" || rc=$?
	{
		printf ', '
		grep -E '^[0-9]+% tests passed' "$dir/ctest.log" | tail -n 1 | tr -d '\n' || true
		sed -n '/^The following tests FAILED:/,/^Errors while running/p' \
			"$dir/ctest.log" | grep -E '^[[:space:]]+[0-9]+ - ' |
			awk '{ sub(/^[ \t]*[0-9]+ - /, ""); printf "\n      failed: %s", $0 }' || true
	} >"$note_file"
	return "$rc"
}

# The README's quick start as written: deploy/setup.sh build (packages,
# build), then its demo (a daemon of its own, real photographs sent).
st_quickstart() { bash deploy/quickstart.sh; }

# promtool (tests/run-ctest.sh fetches it again when this fails): the
# alert rules' test fails without it where CI is set.
st_promtool() {
	FPREP_PROMTOOL=$(bash tests/deploy/get-promtool.sh build/tools)
	"$FPREP_PROMTOOL" --version
}

st_format() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -z -- '*.c' '*.h' '*.cu' '*.cpp'
	else
		find include src service tests kernels -type f \
			\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cpp' \) -print0
	fi | xargs -0 clang-format --dry-run -Werror
}

# The build quickstart made (built again here only if it stopped early).
st_plain() {
	bash tests/run-ctest.sh --build plain >build-plain.log 2>&1 || {
		tail -n 60 build-plain.log
		echo "run-all.sh: the build of build/ failed (build-plain.log)"
		return 1
	}
	rm -f build-plain.log
	ctest_stage plain build
}

# -DFPREP_FUZZ=ON builds the libFuzzer target (clang); it starts from
# fuzz_driver's seeds. A crash or a sanitizer report fails the run.
st_fuzz() {
	mkdir -p build-fuzz
	# The JPEG target decodes with libjpeg-turbo built from Debian's
	# source with the fuzzer's instrumentation (tests/fuzz/build-libjpeg.sh).
	local libjpeg
	libjpeg=$(bash tests/fuzz/build-libjpeg.sh build-fuzz) || return 1
	CC=clang cmake -S . -B build-fuzz -DFPREP_FUZZ=ON -DFPREP_CUDA=OFF \
		-DFPREP_FUZZ_LIBJPEG="$libjpeg" \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo >build-fuzz/configure.log 2>&1 ||
		{
			cat build-fuzz/configure.log
			return 1
		}
	cmake --build build-fuzz -j"$jobs" --target fuzz_request fuzz_driver \
		fuzz_jpeg
	rm -rf build-fuzz/corpus
	mkdir build-fuzz/corpus
	build-fuzz/tests/fuzz/fuzz_driver --write-seeds build-fuzz/corpus
	build-fuzz/tests/fuzz/fuzz_request -max_total_time=60 \
		-print_final_stats=1 build-fuzz/corpus >build-fuzz/fuzz.log 2>&1 ||
		{
			tail -n 60 build-fuzz/fuzz.log
			return 1
		}
	tail -n 60 build-fuzz/fuzz.log
	build-fuzz/tests/fuzz/fuzz_jpeg -max_total_time=30 \
		-print_final_stats=1 >build-fuzz/fuzz_jpeg.log 2>&1 ||
		{
			tail -n 60 build-fuzz/fuzz_jpeg.log
			return 1
		}
	tail -n 20 build-fuzz/fuzz_jpeg.log
}

st_asan() {
	bash tests/run-ctest.sh --build asan
	ctest_stage asan build-asan
}

st_tsan() {
	bash tests/run-ctest.sh --build tsan
	ctest_stage tsan build-tsan
}

stage quickstart st_quickstart
stage promtool st_promtool
stage "format check (clang-format --dry-run -Werror)" st_format
stage "test suite (build/)" st_plain
if [ "$fuzz" = 1 ]; then
	stage "fuzz targets fuzz_request 60 s, fuzz_jpeg 30 s (build-fuzz/, clang + libFuzzer)" st_fuzz
else
	skip "fuzz" "--no-fuzz"
fi
if [ "$asan" = 1 ]; then
	stage "test suite under ASan + UBSan (build-asan/)" st_asan
else
	skip "ASan + UBSan" "--no-asan"
fi
if [ "$tsan" = 1 ]; then
	stage "test suite under ThreadSanitizer (build-tsan/)" st_tsan
else
	skip "ThreadSanitizer" "--no-tsan"
fi

failed=0
echo
echo "== summary (tests/run-all.sh)"
for i in "${!names[@]}"; do
	printf '   %-4s  %s (%s)\n' "${results[i]}" "${names[i]}" "${notes[i]}"
	[ "${results[i]}" != FAIL ] || failed=$((failed + 1))
done
if [ "$failed" != 0 ]; then
	echo "== $failed of ${#names[@]} stages failed"
	exit 1
fi
echo "== every stage passed"
