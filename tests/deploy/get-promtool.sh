#!/usr/bin/env bash
# get-promtool.sh DIR: makes promtool runnable without a Prometheus server
# and prints its path. promtool on PATH is used as it is; otherwise Debian's
# prometheus package (19 MB) is downloaded with `apt-get download` (no
# install: none of its dependencies, no service, no user) and only
# usr/bin/promtool (one binary that needs only libc) is extracted into
# DIR. Debian has no package with promtool alone, and PyPI none at all.
# Needs apt's package lists (deploy/setup.sh's apt-get update, or this
# script's own as root when the download fails).
set -euo pipefail
dir=${1:?usage: get-promtool.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd) # the path printed is absolute
if command -v promtool >/dev/null; then
	command -v promtool
	exit 0
fi
if [ -x "$dir/promtool" ]; then
	echo "$dir/promtool"
	exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sandbox=()
[ "$(id -u)" != 0 ] || sandbox=(-o APT::Sandbox::User=root) # into $work
fetch() { (cd "$work" && apt-get download -q "${sandbox[@]}" prometheus >&2); }
if ! fetch; then
	[ "$(id -u)" = 0 ] || {
		echo "get-promtool.sh: apt-get download prometheus failed" >&2
		exit 1
	}
	DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
	fetch
fi
deb=$(ls "$work"/prometheus_*.deb)
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" ./usr/bin/promtool
install -m 0755 "$work/usr/bin/promtool" "$dir/promtool"
"$dir/promtool" --version >&2
echo "$dir/promtool"
