#!/usr/bin/env bash
# setup.sh: installs frameprep's Debian build and run dependencies and builds
# it with CMake. Idempotent and non-interactive. It first looks for what is
# missing: only then does it need root (or sudo) to run apt-get, so a user
# whose packages are all installed runs it as themselves.
#
# Usage: bash deploy/setup.sh [BUILD_DIR]      (default: build)
#        bash deploy/setup.sh --deps-only      packages only, no build
#        bash deploy/setup.sh --missing        print the missing packages
#        bash deploy/setup.sh --configure-only [BUILD_DIR]   cmake, no build
# Environment:
#   FPREP_BUILD_TYPE   CMake build type (default: Release)
#   FPREP_CMAKE_ARGS   extra CMake arguments, e.g. "-DFPREP_SANITIZE=address"
#   FPREP_SKIP_APT=1   do not look at packages at all (installed otherwise)
#
# FPREP_CUDA (AUTO, ON, OFF) comes from FPREP_CMAKE_ARGS at every run,
# AUTO when it is not there: a choice left in BUILD_DIR's cache by an
# earlier run (say a -DFPREP_CUDA=ON that failed) is not kept.
#
# The metrics test checks the exposition with promtool when it is on PATH,
# else with python3-prometheus-client's parser: no Prometheus server is
# installed here.
#
# The CUDA backend is built when the CUDA toolkit (cudart + NVRTC) is found,
# e.g. in /usr/local/cuda; it is not installed here. libffmpeg-nvenc-dev
# gives it NVIDIA's nv-codec headers (NVDEC: video streams on the GPU;
# libnvcuvid.so.1 comes with the driver and is loaded at run time). Without it the daemon
# runs on CPU worker threads.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=build
case "${1:-}" in
--deps-only) mode=deps; shift ;;
--missing) mode=missing; shift ;;
--configure-only) mode=configure; shift ;;
esac
build_dir=${1:-build}
build_type=${FPREP_BUILD_TYPE:-Release}

packages=(
	build-essential cmake pkg-config
	libuv1-dev libnng-dev nng-utils libcmocka-dev libinih-dev libstb-dev
	libturbojpeg0-dev libjpeg62-turbo-dev libjansson-dev
	libavcodec-dev libavformat-dev libavutil-dev libffmpeg-nvenc-dev
	libsystemd-dev libacl1-dev libmicrohttpd-dev python3-prometheus-client
	python3-opencv python3-numpy python3-venv python3-pip python3-dev
	python3-pytest gnuplot-nox ffmpeg
	clang-format git patch ca-certificates curl
	clang libclang-rt-14-dev doxygen
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q "install ok installed" || missing+=("$p")
done
if [ "$mode" = missing ]; then
	[ "${#missing[@]}" -eq 0 ] || printf '%s\n' "${missing[@]}"
	exit 0
fi

if [ "${FPREP_SKIP_APT:-0}" = 1 ]; then
	:
elif [ "${#missing[@]}" -eq 0 ]; then
	echo "== the ${#packages[@]} Debian packages are installed"
else
	sudo=
	if [ "$(id -u)" != 0 ]; then
		command -v sudo >/dev/null || {
			echo "setup.sh: missing Debian packages: ${missing[*]}" >&2
			echo "setup.sh: run this as root or install sudo, or" \
				"install them yourself and set FPREP_SKIP_APT=1" >&2
			exit 1
		}
		sudo="sudo"
	fi
	echo "== apt-get install ${missing[*]}"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
		--no-install-recommends "${missing[@]}"
fi
[ "$mode" = build ] || [ "$mode" = configure ] || exit 0

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
	export PATH="/usr/local/cuda/bin:$PATH"
fi

# nvJPEG (CUDA builds): the GPU lanes decode JPEG frames with it where the
# GPU has a JPEG engine. Only its header is needed to build (the library
# is loaded at run time); a toolkit without it (the runfile's) gets both
# from PyPI's nvidia-nvjpeg wheel, pinned, unpacked into
# BUILD_DIR/_deps/nvjpeg (found there by src/CMakeLists.txt). Offline, the
# build goes on without it and the lanes decode on CPU threads.
nvjpeg_fetch() {
	local major inc wheel_dir pin py=python3
	case " ${FPREP_CMAKE_ARGS:-} " in *" -DFPREP_CUDA=OFF "*) return 0 ;; esac
	command -v nvcc >/dev/null || return 0
	inc=$(dirname "$(command -v nvcc)")/../include
	[ -f "$inc/nvjpeg.h" ] && return 0
	major=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
	case $major in
	13) pin=nvidia-nvjpeg==13.0.3.75 ;;
	*)
		echo "== nvJPEG: no pinned wheel for CUDA $major: lanes decode JPEG on CPUs"
		return 0
		;;
	esac
	[ -f "$build_dir/_deps/nvjpeg/nvidia/cu$major/include/nvjpeg.h" ] && return 0
	wheel_dir=$build_dir/_deps/wheels
	echo "== nvJPEG: $pin from PyPI into $build_dir/_deps/nvjpeg"
	mkdir -p "$wheel_dir" "$build_dir/_deps/nvjpeg"
	# Debian's python3 has no pip: a venv's (python3-venv) downloads.
	if ! python3 -m pip --version >/dev/null 2>&1; then
		python3 -m venv "$build_dir/_deps/venv" >/dev/null 2>&1 &&
			py=$build_dir/_deps/venv/bin/python3
	fi
	if "$py" -m pip download -q --no-deps --only-binary=:all: \
		--dest "$wheel_dir" "$pin" &&
		python3 -m zipfile -e "$wheel_dir"/nvidia_nvjpeg-"${pin#*==}"-*.whl \
			"$build_dir/_deps/nvjpeg"; then
		return 0
	fi
	echo "== nvJPEG: not fetched (offline?): lanes decode JPEG on CPUs" >&2
}
nvjpeg_fetch

cuda_arg=()
case " ${FPREP_CMAKE_ARGS:-} " in
*" -DFPREP_CUDA="*) ;;
*)
	cached=$(sed -n 's/^FPREP_CUDA:STRING=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
	if [ -n "$cached" ] && [ "$cached" != AUTO ]; then
		echo "== FPREP_CUDA was $cached in $build_dir's cache (an earlier run):" \
			"AUTO now; FPREP_CMAKE_ARGS=-DFPREP_CUDA=$cached keeps it"
	fi
	cuda_arg=(-DFPREP_CUDA=AUTO)
	;;
esac

echo "== cmake -S . -B $build_dir (CMAKE_BUILD_TYPE=$build_type)"
# shellcheck disable=SC2086 # FPREP_CMAKE_ARGS is a list of arguments
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" "${cuda_arg[@]}" \
	${FPREP_CMAKE_ARGS:-}
[ "$mode" = build ] || exit 0
cmake --build "$build_dir" -j"$(nproc 2>/dev/null || echo 2)"

echo "== built:"
echo "   daemon:       $build_dir/service/frameprepd"
echo "   client CLI:   $build_dir/src/frameprep"
echo "   load test:    $build_dir/src/frameprep-bench"
echo "   library:      $build_dir/src/libframeprep.so"
echo "   tests:        ctest --test-dir $build_dir"
echo "   install:      cmake --install $build_dir   (/usr/local by default)"
