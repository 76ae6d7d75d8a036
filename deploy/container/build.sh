#!/usr/bin/env bash
# build.sh: builds the container images from Debian's packages and this
# tree, with podman; nothing is pulled from a registry.
#
#   localhost/frameprep         frameprepd (CPU backend) and the frameprep
#                               CLI for its HEALTHCHECK: FROM scratch, the
#                               build and only the libraries it links
#   localhost/frameprep-client  the CLI, frameprep-bench, libframeprep and
#                               the Python package on Debian's python3 +
#                               numpy, for consumer containers
#   localhost/frameprep-cuda    (--cuda) frameprepd with the CUDA backend:
#                               Containerfile.cuda, needs the toolkit here
#
# Usage: bash deploy/container/build.sh [--cuda] [--no-client]
#                                        [--prepare | --prepared]
#   --prepare   only the steps that need the build tools and no podman:
#               the build and its install (1) and the wheel (4); for a
#               machine (or a chroot, as in CI) that has the build
#               dependencies but cannot run containers
#   --prepared  every step but those: the images from WORK/install (or
#               WORK/install-cuda) and WORK/wheel-* that a --prepare of
#               the same tree made, maybe in another root (.ci/run makes
#               them in its chroot); no compiler, CMake or PyPI needed
# Environment:
#   FPREP_CONTAINER_WORK  work folder (default: build-container/): the
#                         build, the debootstrap root (kept: made once),
#                         the wheel and the image contexts
#   FPREP_IMAGE_TAG       tag of the images (default: latest)
#
# Steps: (1) deploy/setup.sh configures and builds the daemon and the tools
# (Release, no tests) into WORK/build, installed with prefix /usr into
# WORK/install; (2) make-root.sh makes a Debian bookworm root with
# debootstrap --variant=minbase from this machine's apt mirror and the
# run-time packages, imported as localhost/frameprep-base:bookworm;
# (3) the daemon image's rootfs: the install plus the shared libraries
# that ldd finds for its programs inside that root; (4) the Python wheel
# (pip wheel in a venv: scikit-build-core from PyPI) unpacked into the
# client image. Prints each image's size. Needs root (debootstrap, chroot).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
cuda=0
client=1
mode=all
usage="usage: $0 [--cuda] [--no-client] [--prepare | --prepared]"
for a in "$@"; do
	case $a in
	--cuda) cuda=1 ;;
	--no-client) client=0 ;;
	--prepare) mode=prepare ;;
	--prepared) mode=prepared ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
work=${FPREP_CONTAINER_WORK:-$top/build-container}
mkdir -p "$work"
work=$(cd "$work" && pwd)
tag=${FPREP_IMAGE_TAG:-latest}
if [ "$mode" != prepare ]; then
	for tool in podman debootstrap chroot; do
		command -v "$tool" >/dev/null || {
			echo "build.sh: $tool is not installed" \
				"(apt-get install podman runc debootstrap)" >&2
			exit 1
		}
	done
fi
t0=$(date +%s)

# The install (cmake --install with DESTDIR), one per flavour.
inst=$work/install
[ "$cuda" = 1 ] && inst=$work/install-cuda
# The wheel's folder is named after the sources it was built from.
src_sum=$(cd "$top" && find src include kernels CMakeLists.txt deploy/build-nng.sh \
	-type f -print0 | sort -z | xargs -0 cksum | cksum | cut -d' ' -f1)
wheel_dir=$work/wheel-$src_sum

# (1) The build: only the programs and the library, no tests.
if [ "$mode" != prepared ]; then
	bdir=$work/build
	[ "$cuda" = 1 ] && bdir=$work/build-cuda
	cuda_flag=-DFPREP_CUDA=OFF
	[ "$cuda" = 1 ] && cuda_flag=-DFPREP_CUDA=ON
	FPREP_CMAKE_ARGS="$cuda_flag -DBUILD_TESTING=OFF -DCMAKE_INSTALL_PREFIX=/usr" \
		bash "$top/deploy/setup.sh" --configure-only "$bdir" >"$work/configure.log" 2>&1 || {
		tail -n 30 "$work/configure.log" >&2
		exit 1
	}
	echo "== cmake --build $bdir (frameprepd, frameprep, frameprep-bench)"
	cmake --build "$bdir" -j"$(nproc)" --target frameprepd frameprep_cli \
		frameprep-bench frameprep >"$work/build.log" 2>&1 || {
		tail -n 30 "$work/build.log" >&2
		exit 1
	}
	rm -rf "$inst"
	DESTDIR=$inst cmake --install "$bdir" >"$work/install.log" 2>&1 || {
		tail -n 30 "$work/install.log" >&2
		exit 1
	}
elif [ ! -x "$inst/usr/bin/frameprepd" ]; then
	echo "build.sh --prepared: no $inst/usr/bin/frameprepd: run" \
		"build.sh --prepare$([ "$cuda" = 1 ] && echo ' --cuda') first" >&2
	exit 1
fi

# (4a) The Python wheel for the client image, built once per source tree
# (--prepare names it in WORK/prepared-wheel for --prepared, whose tree
# may have gained files since, e.g. __pycache__).
if [ "$mode" = prepared ] && [ "$client" = 1 ]; then
	wheel_dir=$work/$(cat "$work/prepared-wheel" 2>/dev/null || echo none)
	if ! ls "$wheel_dir"/frameprep_client-*.whl >/dev/null 2>&1; then
		echo "build.sh --prepared: no wheel named in $work/prepared-wheel:" \
			"run build.sh --prepare first" >&2
		exit 1
	fi
fi
if [ "$client" = 1 ] && ! ls "$wheel_dir"/frameprep_client-*.whl >/dev/null 2>&1; then
	echo "== pip wheel src/python (scikit-build-core runs the project's CMake)"
	[ -x "$work/venv/bin/pip" ] || python3 -m venv "$work/venv"
	rm -rf "$work"/wheel-*
	"$work/venv/bin/pip" wheel --quiet --disable-pip-version-check --no-deps \
		-w "$wheel_dir" --config-settings=build-dir="$work/wheel-build" \
		"$top/src/python" >"$work/wheel.log" 2>&1 || {
		tail -n 30 "$work/wheel.log" >&2
		exit 1
	}
fi
if [ "$mode" = prepare ]; then
	rm -f "$work/prepared-wheel"
	[ "$client" = 1 ] && basename "$wheel_dir" >"$work/prepared-wheel"
	echo "== build.sh --prepare: $inst$([ "$client" = 1 ] && echo ", $wheel_dir")" \
		"in $(($(date +%s) - t0)) s"
	exit 0
fi

# (2) The Debian root, made once.
bash "$here/make-root.sh" "$work/base"
root=$work/base/root
if [ "$(podman image inspect --format '{{index .Labels "frameprep.root"}}' \
	localhost/frameprep-base:bookworm 2>/dev/null)" != "$(cksum <"$work/base/root.tar")" ]; then
	echo "== podman import $work/base/root.tar localhost/frameprep-base:bookworm"
	podman import --change "LABEL frameprep.root=\"$(cksum <"$work/base/root.tar")\"" \
		--change 'CMD ["/bin/bash"]' "$work/base/root.tar" \
		localhost/frameprep-base:bookworm >/dev/null
fi

# (3) The daemon image's rootfs: the programs, and every library ldd finds
# for them in the Debian root (so the versions are that root's).
ctx=$work/ctx-daemon
rm -rf "$ctx" "$root/tmp/fpstage"
mkdir -p "$ctx/rootfs" "$ctx/owned/run/frameprep" "$ctx/owned/var/cache/frameprep"
cp -a "$inst/." "$root/tmp/fpstage/"
progs=(/usr/bin/frameprepd /usr/bin/frameprep)
libdir=$(cd "$inst/usr" && dirname "$(find . -name 'libframeprep.so*' | head -n 1)")
libdir=/usr/${libdir#./}
# The CUDA image: NVRTC and nvJPEG (cuda-libs.sh) go into the rootfs and
# the stage, so that ldd resolves them and what they need in turn (nvJPEG
# and NVRTC's builtins are opened at run time: ldd'd themselves).
cudadir=/usr/lib/frameprep-cuda
objs=("${progs[@]}")
ldpath=/tmp/fpstage$libdir
if [ "$cuda" = 1 ]; then
	bash "$here/cuda-libs.sh" "$work" "$ctx/rootfs"
	mkdir -p "$root/tmp/fpstage$cudadir"
	cp -a "$ctx/rootfs$cudadir/." "$root/tmp/fpstage$cudadir/"
	ldpath=$ldpath:/tmp/fpstage$cudadir
	for f in "$ctx/rootfs$cudadir"/*; do
		objs+=("$cudadir/${f##*/}")
	done
fi
for p in "${objs[@]}"; do
	chroot "$root" env LD_LIBRARY_PATH="$ldpath" ldd "/tmp/fpstage$p"
done >"$work/ldd.txt"
# libcuda (and NVML) are the host driver's, mounted through CDI at run time.
if grep 'not found' "$work/ldd.txt" | grep -v -E 'lib(cuda|nvidia-ml)\.so' >&2; then
	echo "build.sh: libraries missing from the Debian root: add their packages" \
		"to make-root.sh" >&2
	exit 1
fi
libs=$(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' "$work/ldd.txt" |
	grep -v '^/tmp/fpstage' | sort -u)
for lib in $libs; do
	dir=$(chroot "$root" readlink -f "$(dirname "$lib")")
	mkdir -p "$ctx/rootfs$dir"
	cp -L "$root$lib" "$ctx/rootfs$dir/"
done
rm -rf "$root/tmp/fpstage"
# Merged /usr, as in the root: /lib64/ld-linux-x86-64.so.2 must resolve.
for l in bin sbin lib lib64; do
	[ -L "$root/$l" ] && cp -a "$root/$l" "$ctx/rootfs/$l"
done
mkdir -p "$ctx/rootfs/usr/bin" "$ctx/rootfs$libdir" "$ctx/rootfs/etc/frameprep" "$ctx/rootfs/tmp"
chmod 1777 "$ctx/rootfs/tmp"
for p in "${progs[@]}"; do
	cp -a "$inst$p" "$ctx/rootfs$p"
done
cp -a "$inst$libdir"/libframeprep.so* "$ctx/rootfs$libdir/"
cp "$here/frameprepd.conf" "$ctx/rootfs/etc/frameprep/frameprepd.conf"
printf 'root:x:0:0:root:/root:/sbin/nologin\nframeprep:x:10001:10001:frameprep:/nonexistent:/sbin/nologin\n' \
	>"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nframeprep:x:10001:\n' >"$ctx/rootfs/etc/group"
chmod 0750 "$ctx/owned/run/frameprep" "$ctx/owned/var/cache/frameprep"
cp "$here/Containerfile" "$ctx/Containerfile"
[ "$cuda" = 1 ] && cp "$here/Containerfile.cuda" "$ctx/Containerfile"
image=localhost/frameprep:$tag
[ "$cuda" = 1 ] && image=localhost/frameprep-cuda:$tag
echo "== podman build $image"
podman build --format docker --network none -q -f "$ctx/Containerfile" \
	-t "$image" "$ctx" >/dev/null
# The image's own loader lists what each program (and CUDA library) needs,
# with the image's LD_LIBRARY_PATH: ldd without a shell.
for p in "${objs[@]}"; do
	podman run --rm --network none --no-healthcheck \
		--entrypoint /lib64/ld-linux-x86-64.so.2 \
		"$image" --list "$p"
done >"$work/ldd-image.txt" 2>&1 || {
	cat "$work/ldd-image.txt" >&2
	echo "build.sh: the image's loader cannot list a program's libraries" >&2
	exit 1
}
if grep 'not found' "$work/ldd-image.txt" | grep -v -E 'lib(cuda|nvidia-ml)\.so' >&2; then
	echo "build.sh: libraries missing in $image (ld.so --list: $work/ldd-image.txt)" >&2
	exit 1
fi
echo "   ld.so --list in the image: every library of ${objs[*]} found"

# (4b) The client image: the install, the wheel, the example scripts.
if [ "$client" = 1 ]; then
	wheel=$(ls "$wheel_dir"/frameprep_client-*.whl)
	cctx=$work/ctx-client
	rm -rf "$cctx"
	mkdir -p "$cctx/python" "$cctx/install/usr/local/bin"
	cp -a "$inst/usr" "$cctx/install/"
	rm -rf "$cctx/install/usr/bin/frameprepd" "$cctx/install/usr/include" \
		"$cctx/install/usr/lib/systemd" "$cctx/install/usr/lib/sysusers.d"
	python3 -m zipfile -e "$wheel" "$cctx/python"
	install -m 0755 "$here/consumer-example.py" "$cctx/install/usr/local/bin/frameprep-example-consumer"
	install -m 0755 "$here/config-reloader.sh" "$cctx/install/usr/local/bin/frameprep-config-reloader"
	cp "$here/Containerfile.client" "$cctx/Containerfile"
	echo "== podman build localhost/frameprep-client:$tag ($(basename "$wheel"))"
	podman build --format docker --network none -q -f "$cctx/Containerfile" \
		-t "localhost/frameprep-client:$tag" "$cctx" >/dev/null
fi

echo "== images (podman's size: uncompressed layers)"
for i in "$image" localhost/frameprep-client:"$tag"; do
	[ "$i" = "localhost/frameprep-client:$tag" ] && [ "$client" = 0 ] && continue
	bytes=$(podman image inspect --format '{{.Size}}' "$i")
	awk -v i="$i" -v b="$bytes" 'BEGIN { printf "   %-36s %6.1f MB\n", i, b / 1e6 }'
done
echo "== build.sh: $(($(date +%s) - t0)) s"
