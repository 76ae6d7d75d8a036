#!/usr/bin/env bash
# cuda-libs.sh WORK ROOTFS: puts the CUDA run-time libraries that a
# -DFPREP_CUDA=ON frameprepd loads into ROOTFS/usr/lib/frameprep-cuda
# (Containerfile.cuda's LD_LIBRARY_PATH): NVRTC (+ its builtins, which
# NVRTC opens itself) and nvJPEG (opened by the daemon at run time), each
# from the toolkit (nvcc's ../lib64) when it has it, else from NVIDIA's
# wheel on PyPI at a pinned version (pip download in WORK/venv). The
# ".alt" variants of NVRTC are left out. Run by build.sh --cuda; the
# CPU machines' toolkit (13.0 from NVIDIA's wheels) has NVRTC but no
# nvJPEG, which then comes from its wheel.
set -euo pipefail
work=$1
rootfs=$2
dest=$rootfs/usr/lib/frameprep-cuda
mkdir -p "$dest"
lib64=
if command -v nvcc >/dev/null; then
	lib64=$(dirname "$(command -v nvcc)")/../lib64
elif [ -d /usr/local/cuda/lib64 ]; then
	lib64=/usr/local/cuda/lib64
fi
# CUDA 13.0, the toolkit the GPU machines have (deploy/setup.sh pins the
# same nvJPEG). NAME PIN GLOB...: the files of one library.
from_toolkit_or_wheel() {
	local name=$1 pin=$2 w
	shift 2
	if [ -n "$lib64" ] && ls "$lib64"/$1 >/dev/null 2>&1; then
		for g in "$@"; do
			cp -a "$lib64"/$g "$dest/"
		done
		echo "   $name: the toolkit's ($lib64)"
		return 0
	fi
	[ -x "$work/venv/bin/pip" ] || python3 -m venv "$work/venv"
	mkdir -p "$work/cuda-wheels"
	"$work/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
		--only-binary=:all: -d "$work/cuda-wheels" "$pin"
	w=$(ls "$work"/cuda-wheels/"$(echo "${pin%%==*}" | tr - _)"-"${pin#*==}"-*.whl)
	rm -rf "$work/cuda-wheel"
	python3 -m zipfile -e "$w" "$work/cuda-wheel"
	for g in "$@"; do
		find "$work/cuda-wheel" -name "$g" ! -name '*.alt.*' -exec cp -a {} "$dest/" \;
	done
	rm -rf "$work/cuda-wheel"
	ls "$dest"/$1 >/dev/null || {
		echo "cuda-libs.sh: no $1 in $w" >&2
		exit 1
	}
	echo "   $name: the wheel $pin"
}
echo "== CUDA libraries into $dest"
from_toolkit_or_wheel NVRTC nvidia-cuda-nvrtc==13.0.88 'libnvrtc.so.*' 'libnvrtc-builtins.so.*'
from_toolkit_or_wheel nvJPEG nvidia-nvjpeg==13.0.3.75 'libnvjpeg.so.*'
echo "== CUDA libraries in the image: $(cd "$dest" && ls | tr '\n' ' ')"
