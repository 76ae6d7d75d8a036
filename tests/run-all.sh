#!/usr/bin/env bash
# run-all.sh: sets up a fresh Debian machine (packages, build), checks that
# every C, header and CUDA file is formatted as .clang-format says, and runs
# the whole test suite three times: a normal build, an ASan + UBSan build and
# a ThreadSanitizer build; and it runs the wire decoders' libFuzzer target
# (clang) for 60 s. GPU tests (ctest label "gpu") skip with a clear message
# where no GPU is present.
#
# Usage: bash tests/run-all.sh [--no-asan] [--no-tsan] [--no-fuzz]
set -euo pipefail
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

# The README's quick start as written: deploy/setup.sh build (packages,
# build), then its demo (a daemon of its own, real photographs sent).
bash deploy/quickstart.sh

# promtool, for the alert rules' test (tests/deploy) and the exposition
# checks: from PATH, else extracted from Debian's prometheus package into
# build/tools (downloaded, not installed: no Prometheus server).
FPREP_PROMTOOL=$(bash tests/deploy/get-promtool.sh build/tools)
export FPREP_PROMTOOL
export PATH="$PATH:$(dirname "$FPREP_PROMTOOL")"

echo "== format check (clang-format --dry-run -Werror)"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z -- '*.c' '*.h' '*.cu' '*.cpp'
else
	find include src service tests kernels -type f \
		\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cpp' \) -print0
fi | xargs -0 clang-format --dry-run -Werror

echo "== test suite (build/)"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600

if [ "$fuzz" = 1 ]; then
	# -DFPREP_FUZZ=ON builds the libFuzzer target (clang); it starts from
	# fuzz_driver's seeds. A crash or a sanitizer report fails the run.
	echo "== fuzz target fuzz_request, 60 s (build-fuzz/, clang + libFuzzer)"
	mkdir -p build-fuzz
	CC=clang cmake -S . -B build-fuzz -DFPREP_FUZZ=ON -DFPREP_CUDA=OFF \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo >build-fuzz/configure.log 2>&1 ||
		{ cat build-fuzz/configure.log; exit 1; }
	cmake --build build-fuzz -j"$jobs" --target fuzz_request fuzz_driver
	rm -rf build-fuzz/corpus
	mkdir build-fuzz/corpus
	build-fuzz/tests/fuzz/fuzz_driver --write-seeds build-fuzz/corpus
	build-fuzz/tests/fuzz/fuzz_request -max_total_time=60 \
		-print_final_stats=1 build-fuzz/corpus 2>&1 | tail -n 60
fi

if [ "$asan" = 1 ]; then
	echo "== test suite under ASan + UBSan (build-asan/)"
	FPREP_BUILD_TYPE=Debug FPREP_CMAKE_ARGS="-DFPREP_SANITIZE=address" \
		FPREP_SKIP_APT=1 bash deploy/setup.sh build-asan
	ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900
fi

if [ "$tsan" = 1 ]; then
	echo "== test suite under ThreadSanitizer (build-tsan/)"
	FPREP_BUILD_TYPE=Debug FPREP_CMAKE_ARGS="-DFPREP_SANITIZE=thread" \
		FPREP_SKIP_APT=1 bash deploy/setup.sh build-tsan
	# ops_vs_opencv and ops_yuv_vs_references are left out: they run the
	# CPU op on one thread only (nothing for TSan to check; ASan covers
	# them), and under TSan they do not finish within their timeouts
	# (about a minute each in build/).
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		ctest --test-dir build-tsan --output-on-failure -j"$jobs" \
		--timeout 900 -E '^ops_(vs_opencv|yuv_vs_references)$'
fi
