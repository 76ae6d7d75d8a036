#!/usr/bin/env bash
# collect-libs.sh OUTDIR BINARY...: copies the shared libraries the binaries
# need (as ldd resolves them here) into OUTDIR, so that a bundle runs on a
# machine that lacks them (libuv, nng, mbedtls, inih, libframeprep, ...).
# Left out, because the target machine has its own and they must match it:
# the C library and its loader (glibc), the GCC runtime, the CUDA driver
# (libcuda, libnvidia-*) and the CUDA toolkit's libraries (cudart, NVRTC,
# whose builtins NVRTC loads by itself). There:
#   export LD_LIBRARY_PATH=OUTDIR:/usr/local/cuda/lib64
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
ls -1 "$out"
exit $status
