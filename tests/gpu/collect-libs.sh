#!/usr/bin/env bash
# collect-libs.sh OUTDIR BINARY...: copies the shared libraries the binaries
# need (as ldd resolves them here) into OUTDIR, so that a bundle runs on a
# machine that lacks them (libuv, nng, mbedtls, inih, libframeprep, ...).
# Left out, because the target machine has its own and they must match it:
# the C library and its loader (glibc), the GCC runtime, the CUDA driver
# (libcuda, libnvidia-*) and the CUDA toolkit's libraries (cudart, NVRTC,
# whose builtins NVRTC loads by itself). There:
#   export LD_LIBRARY_PATH=OUTDIR:/usr/local/cuda/lib64
# Also copied: the libraries a binary loads with dlopen, which ldd does
# not list: libnvjpeg (src/backend/gpu/nvjpeg_decode.c), from the path the
# build embedded (the nvidia-nvjpeg wheel that deploy/setup.sh unpacked
# into the build folder) or from the CUDA toolkit's lib64; the daemon
# finds it on LD_LIBRARY_PATH there.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR BINARY..." >&2; exit 2; }
out=$1
shift
mkdir -p "$out"
skip='^(linux-vdso|linux-gate|ld-linux|libc\.|libm\.|libmvec\.|libpthread\.|libdl\.|librt\.|libresolv\.|libutil\.|libstdc\+\+\.|libgcc_s\.|libcuda\.|libnvidia-|libnvrtc|libcudart|libnvJitLink)'
status=0
for bin in "$@"; do
	while read -r name path; do
		[[ $name =~ $skip ]] && continue
		if [ ! -f "$path" ]; then
			echo "collect-libs.sh: $bin needs $name, not found here" >&2
			status=1
			continue
		fi
		cp -L "$path" "$out/$name"
	done < <(ldd "$bin" | awk '$2 == "=>" { print $1, $3 }')
done
for bin in "$@"; do
	strings -a "$bin" | grep -E '^/.*/libnvjpeg\.so\.[0-9]+$' || true
done | sort -u | while read -r lib; do
	[ -f "$lib" ] && cp -L "$lib" "$out/"
done
if ! ls "$out"/libnvjpeg.so.* >/dev/null 2>&1; then
	for lib in "${CUDA_HOME:-/usr/local/cuda}"/lib64/libnvjpeg.so.[0-9]*; do
		[ -f "$lib" ] && cp -L "$lib" "$out/"
	done
fi
ls -1 "$out"
exit $status
