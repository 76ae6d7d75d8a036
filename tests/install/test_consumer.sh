#!/usr/bin/env bash
# test_consumer.sh: installs the build with `cmake --install --prefix` into
# a fresh directory and builds a program outside the tree against it both
# ways a C user would: `pkg-config --cflags --libs frameprep` (run with
# LD_LIBRARY_PATH, and with an rpath) and find_package(frameprep CONFIG) +
# frameprep::frameprep (CMake's build rpath). Each program must run and
# call into the installed library.
#
# Usage: test_consumer.sh BUILD_DIR C_COMPILER [CFLAGS]
# (CFLAGS: a sanitizer build's -fsanitize=..., which the program needs too)
set -euo pipefail

build=$1
cc=$2
cflags=${3:-}
src=$(cd "$(dirname "$0")/consumer" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

if ! cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then
	cat "$work/install.log"
	exit 1
fi
pc=$(find "$prefix" -name frameprep.pc -path '*/pkgconfig/*')
cfg=$(find "$prefix" -name frameprepConfig.cmake)
[ -n "$pc" ] && [ -n "$cfg" ] || {
	echo "FAIL: frameprep.pc or frameprepConfig.cmake not installed"
	exit 1
}
libdir=$(dirname "$(dirname "$pc")")
status=0
check() { # check WHAT COMMAND...: runs COMMAND, which must print the version
	local what=$1 out
	shift
	if out=$(env -u FRAMEPREP_SOCKET "$@" 2>&1) &&
		grep -q '^frameprep [0-9]' <<<"$out"; then
		echo "ok $what: $out"
	else
		echo "FAIL $what: $out"
		status=1
	fi
}

# pkg-config, from the prefix alone (no system frameprep.pc).
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs frameprep) || {
	echo "FAIL: pkg-config --cflags --libs frameprep"
	exit 1
}
echo "pkg-config --cflags --libs frameprep: $flags"
# shellcheck disable=SC2086 # the flags are words
"$cc" $cflags -o "$work/app-pc" "$src/consumer.c" $flags
check "pkg-config build, LD_LIBRARY_PATH" \
	env LD_LIBRARY_PATH="$libdir" "$work/app-pc"
# shellcheck disable=SC2086
"$cc" $cflags -o "$work/app-rpath" "$src/consumer.c" $flags \
	-Wl,-rpath,"$libdir"
check "pkg-config build, -Wl,-rpath" env -u LD_LIBRARY_PATH "$work/app-rpath"
# Without the path the pkg-config build must not find the prefix's library
# (frameprep.pc adds no run path). It may find another install's (the
# operations guide's `cmake --install build` puts one in /usr/local): ask the loader
# which one it maps. (awk reads all of ldd's output: `ldconfig -p | grep -q`
# under pipefail failed when grep's early exit gave ldconfig a SIGPIPE.)
found=$(env -u LD_LIBRARY_PATH ldd "$work/app-pc" 2>/dev/null |
	awk '$1 ~ /^libframeprep\.so/ && $3 != "not" { print $3 }')
case $found in
"$prefix"/* | "$libdir"/*)
	echo "FAIL: the program finds $found without the library's path"
	status=1
	;;
*) echo "ok pkg-config build without the path: libframeprep ${found:-not found}" ;;
esac

# find_package(frameprep CONFIG) + frameprep::frameprep.
if ! cmake -S "$src" -B "$work/cmake" -DCMAKE_C_COMPILER="$cc" \
	-DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$cflags" \
	-DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 ||
	! cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1; then
	echo "FAIL find_package build:"
	cat "$work/cmake.log"
	exit 1
fi
check "find_package(frameprep CONFIG) build" \
	env -u LD_LIBRARY_PATH "$work/cmake/consumer"
exit $status
