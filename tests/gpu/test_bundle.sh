#!/usr/bin/env bash
# test_bundle.sh: run-on-gpu.sh --stage makes a bundle from the repository
# alone (no helper outside it): the binaries, the shared libraries a GPU
# machine lacks (collect-libs.sh), and nothing of glibc or CUDA. Nothing
# links FFmpeg's libraries (the daemon and `frameprep video` load them at
# run time), so none is carried, and the bundle fits, with room to spare,
# in the 64 MiB a GPU run can carry.
#
# Usage: test_bundle.sh SOURCE_DIR BUILD_DIR
set -euo pipefail

src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() {
	echo "FAIL: $*"
	status=1
}

if grep -nE '/work/|\.\./shared|GPU-MACHINE' "$src/tests/gpu/run-on-gpu.sh"; then
	fail "run-on-gpu.sh points outside the repository"
fi
mkdir -p "$tmp/images"
bash "$src/tests/gpu/run-on-gpu.sh" --stage "$build" "$tmp/images" "$tmp/b" ||
	fail "run-on-gpu.sh --stage exited $?"
# libnng.so.1 only where the build links a system nng (FPREP_NNG=system):
# the bundled one is linked statically, and then nothing may need it.
want="libframeprep.so.0 libuv.so.1"
if ldd "$build/service/frameprepd" | grep -q 'libnng\.so'; then
	want="$want libnng.so.1"
elif ls "$tmp/b/libs"/libnng.so* >/dev/null 2>&1; then
	fail "the bundle carries libnng, which nothing links"
fi
for lib in $want; do
	[ -f "$tmp/b/libs/$lib" ] || fail "the bundle lacks $lib"
done
for lib in libc.so.6 libcuda.so.1 libstdc++.so.6; do
	[ ! -e "$tmp/b/libs/$lib" ] || fail "the bundle carries $lib"
done
for bin in service/frameprepd src/frameprep src/libframeprep.so; do
	if linked=$(ldd "$build/$bin" | grep -E 'lib(av|sw|x26)'); then
		fail "$bin links FFmpeg's libraries:" $linked
	fi
done
if ls "$tmp/b/libs" | grep -E '^lib(av|sw|x26)'; then
	fail "the bundle carries FFmpeg's libraries"
fi
max_kib=$((60 * 1024))
kib=$(du -sk "$tmp/b" | cut -f1)
if [ "$kib" -gt "$max_kib" ]; then
	fail "the bundle is $kib KiB, over $max_kib KiB (60 MiB)"
else
	echo "ok bundle $kib KiB (at most $max_kib)"
fi
if out=$(LD_LIBRARY_PATH=$tmp/b/libs "$tmp/b/bin/frameprep" --version 2>&1); then
	echo "ok bundled frameprep: $out; libs: $(ls "$tmp/b/libs" | tr '\n' ' ')"
else
	fail "the bundled frameprep does not start: $out"
fi
exit $status
