#!/usr/bin/env bash
# build-libjpeg.sh: builds libjpeg-turbo's libjpeg, instrumented for
# libFuzzer (clang, -fsanitize=fuzzer-no-link,address,undefined; the SIMD
# code off, so that every decoding path is C that the fuzzer sees), as a
# static library, for the fuzz_jpeg target (-DFPREP_FUZZ_LIBJPEG=PREFIX).
# Debian's libjpeg62-turbo is not instrumented: against it the target sees
# only frameprep's own code, not the decoder's branches.
#
# The source is Debian's: the source package of the libjpeg-turbo that
# the system has, fetched by apt-get from the machine's own apt sources
# (each deb line read as a deb-src line, in a private lists directory: the
# system's apt state is not touched), so a mirror, proxy or certificate
# the administrator configured applies. apt checks the files against the
# signed Sources index.
#
# Usage: bash tests/fuzz/build-libjpeg.sh DIR
# Prints the install prefix (DIR/libjpeg-fuzz: include/, lib/libjpeg.a).
# Kept and reused by later runs.
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=$(realpath -m "${1:?usage: build-libjpeg.sh DIR}")
prefix=$dir/libjpeg-fuzz
version=$(dpkg-query -W -f='${source:Version}' libjpeg62-turbo-dev)
if [ -f "$prefix/.built" ] && [ "$(cat "$prefix/.built")" = "$version" ]; then
	echo "$prefix"
	exit 0
fi
work=$dir/libjpeg-src
rm -rf "$work" "$prefix"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/sources.d"
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
	/etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	case $f in
	*.sources)
		sed 's/^Types:.*\bdeb\b.*$/Types: deb-src/' "$f" \
			>"$work/sources.d/$(basename "$f")"
		;;
	*) sed -n 's/^deb \(.*\)$/deb-src \1/p' "$f" \
		>"$work/sources.d/$(basename "$f")" ;;
	esac
done
apt_opts=(-q -o Dir::Etc::SourceList=/dev/null
	-o Dir::Etc::SourceParts="$work/sources.d"
	-o Dir::State::Lists="$work/lists" -o Dir::Cache="$work/cache"
	-o APT::Sandbox::User=root)
echo "== libjpeg-turbo $version: Debian's source package" >&2
apt-get "${apt_opts[@]}" update >&2
(cd "$work" && apt-get "${apt_opts[@]}" source --download-only \
	"libjpeg-turbo=$version" >&2)
orig=$(ls "$work"/libjpeg-turbo_*.orig.tar.gz)
tar -xzf "$orig" -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'libjpeg-turbo-*' | head -n 1)
flags="-g -O1 -fsanitize=fuzzer-no-link,address,undefined"
echo "== libjpeg-turbo $version: building (instrumented) into $prefix" >&2
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCMAKE_C_COMPILER=clang -DCMAKE_C_FLAGS="$flags" \
	-DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
	-DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_SIMD=OFF \
	-DWITH_TURBOJPEG=OFF -DWITH_JAVA=OFF >&2
cmake --build "$work/build" -j"$(nproc 2>/dev/null || echo 2)" \
	--target jpeg-static >&2
mkdir -p "$prefix/include" "$prefix/lib"
cp "$work/build/libjpeg.a" "$prefix/lib/"
cp "$src/jpeglib.h" "$src/jmorecfg.h" "$src/jerror.h" \
	"$work/build/jconfig.h" "$prefix/include/"
rm -rf "$work"
echo "$version" >"$prefix/.built"
echo "$prefix"
