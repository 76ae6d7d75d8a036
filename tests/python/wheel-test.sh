#!/usr/bin/env bash
# wheel-test.sh PACKAGE_DIR WORKDIR: builds the package's wheel once
# (pip wheel, the package's own build backend) and installs it into a
# clean venv of each Python found among /root/.pyenv's 3.10 and 3.13 (and
# $FPREP_WHEEL_PYTHONS, space-separated interpreters, when set), with its
# dependencies from PyPI, then runs the ring tests (test_ring.py, numpy and
# pytest only) from outside the source tree against the installed package.
# Needs FPREP_DAEMON. Exits 77 (skipped) when no such interpreter exists.
set -euo pipefail
pkg=$(cd "$1" && pwd)
work=$2
here=$(cd "$(dirname "$0")" && pwd)

pythons=()
for v in 3.10 3.13; do
	for p in /root/.pyenv/versions/"$v".*/bin/python; do
		[ -x "$p" ] && pythons+=("$p") && break
	done
done
for p in ${FPREP_WHEEL_PYTHONS:-}; do
	pythons+=("$p")
done
if [ ${#pythons[@]} -eq 0 ]; then
	echo "SKIP: no Python 3.10 or 3.13 under /root/.pyenv/versions" \
	     "(and FPREP_WHEEL_PYTHONS unset): the wheel was not tried"
	exit 77
fi

rm -rf "$work"
mkdir -p "$work/wheel" "$work/tests"
# Build from a copy so that nothing (build/, *.egg-info) lands in the tree.
cp -r "$pkg" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
/usr/bin/python3 -m pip wheel --quiet --disable-pip-version-check \
	--no-deps -w "$work/wheel" "$work/src"
wheel=$(ls "$work"/wheel/frameprep_client-*.whl)
echo "built $(basename "$wheel")"
cp "$here/conftest.py" "$here/test_ring.py" "$work/tests/"

i=0
for py in "${pythons[@]}"; do
	ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
	i=$((i + 1))
	venv="$work/venv-$i-$ver"
	"$py" -m venv "$venv"
	"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
		"$wheel" pytest
	(cd "$work/tests" && "$venv/bin/python" -c '
import frameprep, sys, os
assert "site-packages" in frameprep.__file__, frameprep.__file__
print("python", sys.version.split()[0], "frameprep", frameprep.__version__,
      "from", os.path.dirname(frameprep.__file__))' &&
		"$venv/bin/python" -m pytest -q -p no:cacheprovider test_ring.py)
done
