#!/usr/bin/env bash
# test_setup_cuda_choice.sh: a FPREP_CUDA choice left in a build folder's
# cache by an earlier setup.sh run (say -DFPREP_CUDA=ON that failed for want
# of the CUDA toolkit) does not stay: the next run without it configures
# with FPREP_CUDA=AUTO, and says so.
#
# Usage: test_setup_cuda_choice.sh SOURCE_DIR
set -euo pipefail

src=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
setup() {
	env FPREP_SKIP_APT=1 FPREP_BUILD_TYPE=Release "$@" \
		bash "$src/deploy/setup.sh" --configure-only "$dir/build" >"$dir/log" 2>&1
}
cached() {
	sed -n 's/^FPREP_CUDA:STRING=//p' "$dir/build/CMakeCache.txt"
}
status=0

for choice in OFF ON; do
	rc=0
	setup FPREP_CMAKE_ARGS="-DFPREP_CUDA=$choice" || rc=$?
	echo "FPREP_CMAKE_ARGS=-DFPREP_CUDA=$choice: exit $rc, cached $(cached)"
	if ! setup; then
		echo "FAIL: the next run without FPREP_CUDA failed:"
		cat "$dir/log"
		status=1
		continue
	fi
	if [ "$(cached)" != AUTO ]; then
		echo "FAIL: FPREP_CUDA=$(cached) kept in the cache"
		status=1
	elif ! grep -q "FPREP_CUDA was $choice" "$dir/log"; then
		echo "FAIL: no note that FPREP_CUDA=$choice was dropped:"
		cat "$dir/log"
		status=1
	else
		echo "ok: the next run configured FPREP_CUDA=AUTO: $(grep 'FPREP_CUDA was' "$dir/log")"
	fi
done
exit $status
