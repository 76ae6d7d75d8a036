#!/usr/bin/env bash
# test_install_prefix.sh: `cmake --install BUILD --prefix DIR` puts every
# file under DIR (none in /usr/local or /etc, which a user cannot write),
# the unit's ExecStart and --config name that prefix's binary and config,
# and the unit's exposure (systemd-analyze security, where systemd is 250 or
# newer) is at most 2.0. Then the same for the system prefix /usr/local in
# a DESTDIR: the unit there, the config in /etc/frameprep.
#
# Usage: test_install_prefix.sh BUILD_DIR
set -euo pipefail

build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() {
	echo "FAIL $*"
	status=1
}

# A user's prefix. The manifest lists what was written.
prefix=$tmp/home/.local
touch "$tmp/before"
if ! cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1; then
	cat "$tmp/log"
	exit 1
fi
# The unit is rendered at configure time (or in memory for another
# prefix), not into the build folder at install time: a user can install
# root's build (deploy/'s files; CMake's own install_manifest.txt at the
# top still needs a build folder the installer can write).
written=$(find "$build/deploy" -newer "$tmp/before" -type f)
[ -z "$written" ] || fail "the install wrote into the build folder: $written"
outside=$(tr ';' '\n' <"$build/install_manifest.txt" | grep -v "^$prefix/" || true)
[ -z "$outside" ] || fail "installed outside $prefix: $outside"
unit=$prefix/lib/systemd/system/frameprepd.service
[ -f "$unit" ] || fail "no unit at $unit"
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
want="$prefix/bin/frameprepd --config $prefix/etc/frameprep/frameprepd.conf"
[ "$exec_start" = "$want" ] || fail "ExecStart=$exec_start, not $want"
[ -x "$prefix/bin/frameprepd" ] || fail "no $prefix/bin/frameprepd"
[ -f "$prefix/etc/frameprep/frameprepd.conf" ] || fail "no config"
[ -f "$prefix/lib/sysusers.d/frameprep.conf" ] || fail "no sysusers file"
grep -q '@[A-Z_]*@' "$unit" && fail "unsubstituted @...@ in the unit: $(grep '@[A-Z_]*@' "$unit")"
echo "ok --prefix $prefix: $(wc -l <"$build/install_manifest.txt") files," \
	"ExecStart=$exec_start"

# The live config is the admin's: a second install keeps it.
echo "# edited" >>"$prefix/etc/frameprep/frameprepd.conf"
cmake --install "$build" --prefix "$prefix" >"$tmp/log" 2>&1 || {
	cat "$tmp/log"
	exit 1
}
tail -1 "$prefix/etc/frameprep/frameprepd.conf" | grep -q "# edited" ||
	fail "a second install overwrote the config"

# The system prefix, staged.
stage=$tmp/stage
DESTDIR=$stage cmake --install "$build" --prefix /usr/local >"$tmp/log" 2>&1 || {
	cat "$tmp/log"
	exit 1
}
sunit=$stage/usr/local/lib/systemd/system/frameprepd.service
[ -f "$stage/etc/frameprep/frameprepd.conf" ] || fail "no $stage/etc/frameprep/frameprepd.conf"
grep -qx 'ExecStart=/usr/local/bin/frameprepd --config /etc/frameprep/frameprepd.conf' \
	"$sunit" || fail "system unit: $(grep ExecStart "$sunit")"
echo "ok --prefix /usr/local (DESTDIR): $(grep ExecStart "$sunit")"

# Exposure, scored offline (systemd 250 or newer).
if command -v systemd-analyze >/dev/null &&
	systemd-analyze security --help 2>&1 | grep -q -- --offline; then
	out=$(systemd-analyze security --offline=true --no-pager "$sunit" 2>&1 | tail -1)
	score=$(sed -n 's/.*exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
	if [ -z "$score" ]; then
		fail "systemd-analyze security: $out"
	elif awk -v s="$score" 'BEGIN { exit !(s > 2.0) }'; then
		fail "exposure $score > 2.0: $out"
	else
		echo "ok systemd-analyze security: $out"
	fi
else
	echo "not scored: systemd-analyze security --offline is not here"
fi
exit $status
