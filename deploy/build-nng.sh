#!/usr/bin/env bash
# build-nng.sh: builds nng 1.11.0 as a static, position-independent library
# (no TLS, tests or tools; hidden symbols) for frameprep to link where the
# system's nng is older than 1.10 (Debian 12 has 1.5.2, with bugs a local
# client can trigger: a listener stuck by a peer that leaves during the
# handshake, nng issue #1518; a pipe reaper that stops for good after
# connections close mid-message, after which every connection leaks its fd).
# It applies three patches in deploy/ (with patch(1)):
# nng-1.11.0-close-waiting-pipes.patch: a connection whose handshake ends
# while its listener closes leaks the pipe and the listener otherwise;
# nng-1.11.0-fork-child.patch: a child made by fork may use nng afresh
# (unpatched, every nng call in it panics once the parent used nng);
# nng-1.11.0-rep-send-leak.patch: a reply handed to a connection as it
# closes is freed (unpatched, it could be lost).
#
# nng's source comes from PyPI: the sdist of pynng 0.9.0 (the Python
# binding) carries nng 1.11.0's complete source tree in pynng-0.9.0/nng/.
# It is fetched with `pip download --no-binary :all: --no-deps
# pynng==0.9.0`, so pip's configuration (index, mirror, proxy, CA, e.g.
# /etc/pip.conf or PIP_INDEX_URL) decides where from. The tarball is
# checked against a pinned sha256 before anything is extracted, and only
# nng/ is extracted.
#
# pip reads an sdist's metadata before it keeps it, and in an isolated
# build environment that would mean building pynng's build requirements
# (cmake among them) from source, since --no-binary is :all:. So pip runs
# with --no-build-isolation in a venv of its own (DIR/pip-venv, made once
# with python3 -m venv, Debian's python3-venv) that has setuptools-scm 8
# or later (pynng's pyproject names a version_file, which Debian 12's
# setuptools-scm 7 refuses) and wheel (setuptools 66's metadata step
# needs it). Nothing is built: pip only reads the version.
#
# Usage: bash deploy/build-nng.sh [DIR]      (default: build-deps of the tree)
# Prints the install prefix, DIR/nng-1.11.0 (CMake finds nng's package
# config there). The tarball and the result are kept in DIR and reused,
# offline, by every later run and every build folder; concurrent runs wait
# for each other.
# Environment:
#   FPREP_NNG_TARBALL  a local copy of pynng-0.9.0.tar.gz (no download;
#                      still checked against the sha256)
set -euo pipefail
cd "$(dirname "$0")/.."

nng_version=1.11.0
sdist=pynng-0.9.0
sha256=fcd839abf82a2934fa8c27ff57b574b41810458e35895bac6288814defa8fb4e

dir=$(realpath -m "${1:-build-deps}")
prefix=$dir/nng-$nng_version
stamp=$prefix/.frameprep-built
patches=(deploy/nng-$nng_version-close-waiting-pipes.patch
	deploy/nng-$nng_version-fork-child.patch
	deploy/nng-$nng_version-rep-send-leak.patch)
# The stamp holds the patches' sha256: a build from other patches is redone.
want=$(cat "${patches[@]}" | sha256sum | cut -d' ' -f1)
mkdir -p "$dir"
exec 9>"$dir/.nng.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	echo "$prefix"
	exit 0
fi

tarball=$dir/$sdist.tar.gz

# pip_download DEST: pynng 0.9.0's sdist into DEST (see above).
pip_download() {
	local venv=$dir/pip-venv py
	py=$(command -v /usr/bin/python3 || command -v python3) || {
		echo "build-nng.sh: no python3 (Debian: python3-venv)" >&2
		return 1
	}
	if ! "$venv/bin/python" -c 'import setuptools_scm, wheel, sys
sys.exit(int(setuptools_scm.__version__.split(".")[0]) < 8)' 2>/dev/null; then
		rm -rf "$venv"
		"$py" -m venv "$venv" >&2 || {
			echo "build-nng.sh: $py -m venv failed (Debian: python3-venv)" >&2
			return 1
		}
		"$venv/bin/python" -m pip install -q --disable-pip-version-check \
			"setuptools-scm>=8" wheel >&2 || return 1
	fi
	rm -rf "$1"
	"$venv/bin/python" -m pip download -q --disable-pip-version-check \
		--no-binary :all: --no-deps --no-build-isolation --dest "$1" \
		pynng==0.9.0 >&2 && [ -f "$1/$sdist.tar.gz" ]
}
if [ -n "${FPREP_NNG_TARBALL:-}" ]; then
	cp "$FPREP_NNG_TARBALL" "$tarball.part"
	mv "$tarball.part" "$tarball"
elif [ ! -f "$tarball" ]; then
	echo "== nng $nng_version: pip download --no-binary :all: --no-deps" \
		"pynng==0.9.0 (into $dir)" >&2
	if ! pip_download "$dir/pip-download"; then
		echo "build-nng.sh: could not fetch pynng 0.9.0's sdist with pip" \
			"(its output is above): put the file at $tarball, or name a" \
			"copy with FPREP_NNG_TARBALL (or configure with" \
			"-DFPREP_NNG=system)" >&2
		exit 1
	fi
	mv "$dir/pip-download/$sdist.tar.gz" "$tarball"
	rm -rf "$dir/pip-download"
fi
if ! echo "$sha256  $tarball" | sha256sum -c --status; then
	echo "build-nng.sh: $tarball: sha256 $(sha256sum "$tarball" | cut -d' ' -f1)," \
		"not the pinned $sha256: removed" >&2
	rm -f "$tarball"
	exit 1
fi

work=$dir/nng-$nng_version.work
rm -rf "$work" "$prefix"
mkdir -p "$work"
tar -xzf "$tarball" -C "$work" "$sdist/nng"
src=$work/$sdist/nng
grep -q "^#define NNG_MINOR_VERSION 11$" "$src/include/nng/nng.h" || {
	echo "build-nng.sh: $tarball does not hold nng $nng_version" >&2
	exit 1
}
for p in "${patches[@]}"; do
	patch -d "$src" -p1 --quiet --forward <"$p" >&2
done

# -fPIC: it goes into libframeprep.so and the Python extension. Hidden
# symbols: neither exports nng's API. No TLS: nothing here uses tls+tcp://.
echo "== nng $nng_version: building into $prefix" >&2
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
	-DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
	-DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
	-DCMAKE_C_VISIBILITY_PRESET=hidden -DNNG_ENABLE_TLS=OFF \
	-DNNG_TESTS=OFF -DNNG_TOOLS=OFF -DNNG_ENABLE_NNGCAT=OFF \
	-DNNG_ENABLE_COVERAGE=OFF >&2
cmake --build "$work/build" -j"$(nproc 2>/dev/null || echo 2)" >&2
cmake --install "$work/build" >&2
rm -rf "$work"
echo "$want" >"$stamp"
echo "$prefix"
