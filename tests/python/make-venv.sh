#!/usr/bin/env bash
# make-venv.sh VENV PACKAGE_DIR: makes (or refreshes) a virtual environment
# on Debian's /usr/bin/python3 that sees the system's numpy, cv2 and pytest,
# with pynng and mypy from PyPI and the frameprep package from PACKAGE_DIR.
set -euo pipefail
venv=$1
pkg=$2
if [ ! -x "$venv/bin/python" ]; then
	/usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
	pynng mypy
# The distribution was called frameprep before it became frameprep-client.
"$venv/bin/python" -m pip uninstall --quiet --yes frameprep 2>/dev/null || true
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
	--no-deps --force-reinstall "$pkg"
"$venv/bin/python" -c 'import frameprep, pynng, numpy, pytest; print("frameprep", frameprep.__version__, "pynng", pynng.__version__)'
