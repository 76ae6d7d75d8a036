#!/usr/bin/env bash
# run-ctest.sh: runs ctest on one of tests/run-all.sh's build folders with
# that flavour's settings (sanitizer options, timeouts, the tests left out
# under TSan), so that run-all.sh and stress-run.sh run the suite the same
# way. Extra arguments go to ctest (e.g. -R '^integration_'). The build
# folder must be built already (deploy/setup.sh).
#
# Usage: bash tests/run-ctest.sh plain|asan|tsan [CTEST_ARGS...]
#        bash tests/run-ctest.sh --build plain|asan|tsan
#   plain: build/, asan: build-asan/ (ASan + UBSan), tsan: build-tsan/
#   --build: (re)builds that folder with deploy/setup.sh (no apt-get)
# Exits with ctest's (or the build's) status.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bash tests/run-ctest.sh [--build] plain|asan|tsan [CTEST_ARGS...]"
if [ "${1:-}" = --build ]; then
	case ${2:-} in
	plain) exec env FPREP_SKIP_APT=1 bash deploy/setup.sh build ;;
	asan)
		exec env FPREP_BUILD_TYPE=Debug FPREP_SKIP_APT=1 \
			FPREP_CMAKE_ARGS="-DFPREP_SANITIZE=address" \
			bash deploy/setup.sh build-asan
		;;
	tsan)
		exec env FPREP_BUILD_TYPE=Debug FPREP_SKIP_APT=1 \
			FPREP_CMAKE_ARGS="-DFPREP_SANITIZE=thread" \
			bash deploy/setup.sh build-tsan
		;;
	*)
		echo "$usage" >&2
		exit 2
		;;
	esac
fi
flavour=${1:?$usage}
shift
jobs=$(nproc 2>/dev/null || echo 2)

# promtool, for the alert rules' test (tests/deploy) and the exposition
# checks: from PATH, else extracted from Debian's prometheus package into
# build/tools (downloaded, not installed: no Prometheus server).
if [ -z "${FPREP_PROMTOOL:-}" ]; then
	if FPREP_PROMTOOL=$(bash tests/deploy/get-promtool.sh build/tools); then
		export FPREP_PROMTOOL
		PATH="$PATH:$(dirname "$FPREP_PROMTOOL")"
	else
		echo "run-ctest.sh: no promtool (tests/deploy/get-promtool.sh failed)" >&2
		unset FPREP_PROMTOOL
	fi
fi

case $flavour in
plain)
	exec ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600 "$@"
	;;
asan)
	export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	exec ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 "$@"
	;;
tsan)
	# ops_vs_opencv and ops_yuv_vs_references are left out: they run the
	# CPU op on one thread only (nothing for TSan to check; ASan covers
	# them), and under TSan they do not finish within their timeouts
	# (about a minute each in build/).
	export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
	exec ctest --test-dir build-tsan --output-on-failure -j"$jobs" \
		--timeout 900 -E '^ops_(vs_opencv|yuv_vs_references)$' "$@"
	;;
*)
	echo "$usage" >&2
	exit 2
	;;
esac
