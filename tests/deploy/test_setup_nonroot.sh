#!/usr/bin/env bash
# test_setup_nonroot.sh: with every package installed, deploy/setup.sh's
# package step succeeds for a user who is not root and has no sudo (it runs
# as nobody). Exits 77 (skipped) when it cannot switch user or when
# packages are missing here.
#
# Usage: test_setup_nonroot.sh SOURCE_DIR
set -euo pipefail

src=$1
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "skipped: switching to user nobody needs root and setpriv"
	exit 77
fi
missing=$(bash "$src/deploy/setup.sh" --missing)
if [ -n "$missing" ]; then
	echo "skipped: packages missing here:" $missing
	exit 77
fi

# A copy nobody can read, whatever the checkout's permissions.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/deploy"
cp "$src/deploy/setup.sh" "$tmp/deploy/"
chmod -R a+rX "$tmp"

if out=$(cd "$tmp" && env -u FPREP_SKIP_APT HOME="$tmp" \
	setpriv --reuid=nobody --regid=nogroup --clear-groups \
	bash deploy/setup.sh --deps-only 2>&1); then
	echo "ok as nobody: $out"
else
	echo "FAIL: setup.sh --deps-only as nobody, every package installed:"
	echo "$out"
	exit 1
fi
