#!/usr/bin/env bash
# test_install.sh: installs the build into a staging directory (DESTDIR)
# and runs the installed tools from there, as a user would after
# `cmake --install`: they must find libframeprep without LD_LIBRARY_PATH
# or ldconfig.
#
# Usage: test_install.sh BUILD_DIR
set -euo pipefail

build=$1
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

DESTDIR=$stage cmake --install "$build" >"$stage.log" 2>&1 || {
	cat "$stage.log"
	rm -f "$stage.log"
	exit 1
}
rm -f "$stage.log"
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
bin=$stage$prefix/bin

status=0
run() {
	local out
	if out=$(env -u LD_LIBRARY_PATH "$@" 2>&1); then
		echo "ok ${*#"$stage"}: $(head -1 <<<"$out")"
	else
		echo "FAIL $*: $out"
		status=1
	fi
}
run "$bin/frameprep" --version
run "$bin/frameprep-bench" --help
run "$bin/frameprepd" --version
run "$bin/frameprepd" --help
exit $status
