#!/usr/bin/env bash
# run-all.sh: sets up a fresh Debian machine (packages, build) and runs the
# whole test suite twice: a normal build and an ASan + UBSan build. GPU tests
# (ctest label "gpu") skip with a clear message where no GPU is present.
#
# Usage: bash tests/run-all.sh [--no-asan]
set -euo pipefail
cd "$(dirname "$0")/.."
asan=1
[ "${1:-}" = "--no-asan" ] && asan=0
jobs=$(nproc 2>/dev/null || echo 2)

bash deploy/setup.sh build

echo "== test suite (build/)"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600

if [ "$asan" = 1 ]; then
	echo "== test suite under ASan + UBSan (build-asan/)"
	FPREP_BUILD_TYPE=Debug FPREP_CMAKE_ARGS="-DFPREP_SANITIZE=address" \
		FPREP_SKIP_APT=1 bash deploy/setup.sh build-asan
	ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900
fi
