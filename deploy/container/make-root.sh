#!/usr/bin/env bash
# make-root.sh DIR: makes DIR/root.tar, a Debian bookworm root file system
# (debootstrap --variant=minbase) with the run-time packages of frameprepd,
# the frameprep CLI and the Python client (python3-numpy), from the mirror
# of this machine's own apt sources. No image is pulled from a registry:
# build.sh imports this tar (podman import) as the client image's base and
# takes the daemon image's few files from it. Does nothing when DIR/root.tar
# exists and DIR/packages lists the same packages.
set -euo pipefail
dir=$1
packages=libuv1,libstb0,libturbojpeg0,libjpeg62-turbo,libavcodec59,libavformat59,libjansson4,libinih1,libmicrohttpd12,libsystemd0,libacl1,python3,python3-numpy,ca-certificates

if [ -f "$dir/root.tar" ] && [ "$(cat "$dir/packages" 2>/dev/null)" = "$packages" ]; then
	exit 0
fi
clean_root() {
	rm -rf "$dir"/root/var/cache/apt/*.bin "$dir"/root/var/cache/apt/archives/*.deb \
		"$dir"/root/var/lib/apt/lists/* "$dir"/root/usr/share/doc/* \
		"$dir"/root/usr/share/man/* "$dir"/root/usr/share/info/* \
		"$dir"/root/usr/share/locale/* "$dir"/root/var/log/*
	mkdir -p "$dir/root/var/log/apt"
	tar -C "$dir/root" --numeric-owner -cf "$dir/root.tar" .
	echo "$packages" >"$dir/packages"
	echo "== root: $(du -sh "$dir/root" | cut -f1) in $dir/root"
}
# A root made before with fewer packages: add them with apt-get in it.
if [ -x "$dir/root/usr/bin/apt-get" ] && [ -f "$dir/packages" ]; then
	echo "== apt-get install ${packages//,/ } in $dir/root"
	if chroot "$dir/root" apt-get update -q >"$dir/apt.log" 2>&1 &&
		chroot "$dir/root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends ${packages//,/ } >>"$dir/apt.log" 2>&1; then
		clean_root
		exit 0
	fi
	tail -n 20 "$dir/apt.log" >&2
	echo "make-root.sh: apt-get in the old root failed: debootstrap anew" >&2
fi
command -v debootstrap >/dev/null || {
	echo "make-root.sh: debootstrap is not installed (apt-get install debootstrap)" >&2
	exit 1
}

# The mirror: the first bookworm source of /etc/apt (deb822 .sources or
# one-line .list), so the root comes from where this machine's packages do.
mirror=$(
	{
		cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
			/^$/ { if (suite ~ /(^| )bookworm( |$)/ && uri != "") { print uri; exit } uri = ""; suite = "" }
			/^URIs:/ { uri = $2 }
			/^Suites:/ { $1 = ""; suite = $0 }
			END { if (suite ~ /(^| )bookworm( |$)/ && uri != "") print uri }' || true
		cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			awk '$1 == "deb" && $0 !~ /\[/ && $3 == "bookworm" { print $2 }' || true
	} | head -n 1
)
if [ -z "$mirror" ]; then
	echo "make-root.sh: no bookworm source in /etc/apt: cannot tell the mirror" >&2
	exit 1
fi

rm -rf "$dir/root" "$dir/root.tar"
mkdir -p "$dir"
echo "== debootstrap --variant=minbase bookworm from $mirror"
debootstrap --variant=minbase --include="$packages" bookworm "$dir/root" "$mirror" \
	>"$dir/debootstrap.log" 2>&1 || {
	tail -n 20 "$dir/debootstrap.log" >&2
	echo "make-root.sh: debootstrap failed (log: $dir/debootstrap.log)" >&2
	exit 1
}
# What an image does not need: package caches and lists, documentation.
clean_root
