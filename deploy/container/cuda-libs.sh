#!/usr/bin/env bash
# cuda-libs.sh WORK ROOTFS: puts the CUDA run-time libraries that a
# -DFPREP_CUDA=ON frameprepd loads into ROOTFS/usr/lib/frameprep-cuda
# (Containerfile.cuda's LD_LIBRARY_PATH): NVRTC (+ its builtins) and
# nvJPEG, from the toolkit (nvcc's ../lib64) when it has them, else from
# NVIDIA's wheels on PyPI at pinned versions (pip download in WORK/venv).
# Not run on the CPU machines (no toolkit); see Containerfile.cuda.
set -euo pipefail
work=$1
rootfs=$2
dest=$rootfs/usr/lib/frameprep-cuda
mkdir -p "$dest"
# CUDA 13.0, the toolkit the GPU machines have (deploy/setup.sh pins the
# same nvJPEG).
pins=(nvidia-cuda-nvrtc==13.0.88 nvidia-nvjpeg==13.0.3.75)
lib64=
if command -v nvcc >/dev/null; then
	lib64=$(dirname "$(command -v nvcc)")/../lib64
elif [ -d /usr/local/cuda/lib64 ]; then
	lib64=/usr/local/cuda/lib64
fi
if [ -n "$lib64" ] && ls "$lib64"/libnvrtc.so.* >/dev/null 2>&1; then
	cp -a "$lib64"/libnvrtc.so.* "$lib64"/libnvrtc-builtins.so.* "$dest/"
	cp -a "$lib64"/libnvjpeg.so.* "$dest/" 2>/dev/null || true
fi
if ! ls "$dest"/libnvjpeg.so.* >/dev/null 2>&1 || ! ls "$dest"/libnvrtc.so.* >/dev/null 2>&1; then
	[ -x "$work/venv/bin/pip" ] || python3 -m venv "$work/venv"
	mkdir -p "$work/cuda-wheels"
	"$work/venv/bin/pip" download --quiet --no-deps --only-binary=:all: \
		-d "$work/cuda-wheels" "${pins[@]}"
	for w in "$work"/cuda-wheels/*.whl; do
		rm -rf "$work/cuda-wheel"
		python3 -m zipfile -e "$w" "$work/cuda-wheel"
		find "$work/cuda-wheel" -name 'lib*.so*' -exec cp -a {} "$dest/" \;
	done
fi
echo "== CUDA libraries in the image: $(cd "$dest" && ls | tr '\n' ' ')"
