#!/bin/sh
# fetch-images.sh DIR: put real photographs into DIR for the image tests.
#
# The photographs are the data files of Debian's python3-skimage package
# (astronaut, coffee, chelsea, rocket, motorcycle_left, camera, ...). The
# package is downloaded with `apt-get download` (no root needed once the apt
# lists exist) and unpacked with dpkg-deb -x; nothing is installed. Does
# nothing when DIR already holds the images.
set -eu

if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
dir=$1
if [ -f "$dir/astronaut.png" ] && [ -f "$dir/camera.png" ] &&
	[ -f "$dir/rocket.jpg" ]; then
	exit 0
fi
for tool in apt-get dpkg-deb; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "$0: $tool not found: the images come from Debian's" \
			"python3-skimage package" >&2
		exit 1
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
download() {
	(cd "$tmp" && apt-get download python3-skimage >"$tmp/apt.log" 2>&1)
}
# As root, a machine whose package lists were never fetched gets them once.
if ! download && [ "$(id -u)" = 0 ] &&
	apt-get update -q >"$tmp/update.log" 2>&1; then
	download || true
fi
if ! ls "$tmp"/python3-skimage_*.deb >/dev/null 2>&1; then
	cat "$tmp/apt.log" >&2
	echo "$0: 'apt-get download python3-skimage' failed: run" \
		"'apt-get update' (the package lists are needed) or put the" \
		"skimage data images into $dir yourself" >&2
	exit 1
fi
dpkg-deb -x "$tmp"/python3-skimage_*.deb "$tmp/root"
data=$(find "$tmp/root" -type d -path '*/skimage/data' | head -n 1)
if [ -z "$data" ]; then
	echo "$0: no skimage/data directory in the package" >&2
	exit 1
fi
mkdir -p "$dir"
# truncated.jpg is deliberately broken; leave it out.
find "$data" -maxdepth 1 -type f \( -name '*.png' -o -name '*.jpg' \) \
	! -name 'truncated.jpg' -exec cp {} "$dir/" \;
n=$(find "$dir" -maxdepth 1 -type f \( -name '*.png' -o -name '*.jpg' \) | wc -l)
echo "fetch-images: $n images in $dir"
