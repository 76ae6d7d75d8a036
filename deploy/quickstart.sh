#!/usr/bin/env bash
# quickstart.sh: installs and builds frameprep, starts a frameprepd of its
# own on its built-in defaults but a private socket (a daemon already on the
# default socket is left alone and gets none of the photos), sends real
# photographs through it with the frameprep CLI and stops it. The tensors
# stay in build/demo (FPREP_DEMO_DIR), as .npy files for numpy.load.
# Usage: bash deploy/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/setup.sh build
bash tests/data/fetch-images.sh build/images

out=${FPREP_DEMO_DIR:-build/demo}
mkdir -p "$out"
out=$(cd "$out" && pwd)
run_dir=$(mktemp -d "${TMPDIR:-/tmp}/frameprep-quickstart.XXXXXX")
url=ipc://$run_dir/frameprepd.sock
if build/src/frameprep info >/dev/null 2>&1; then
	echo "== note: a frameprepd already answers on the default socket;" \
		"this demo starts its own on $url and leaves that one alone"
fi

build/service/frameprepd --listen "$url" &
pid=$!
stop_daemon() {
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid"
	fi
	wait "$pid" 2>/dev/null
}
trap 'stop_daemon || true; rm -rf "$run_dir"' EXIT

# Wait until the daemon answers.
for _ in $(seq 100); do
	build/src/frameprep info --socket "$url" >/dev/null 2>&1 && break
	if ! kill -0 "$pid" 2>/dev/null; then
		rc=0
		wait "$pid" || rc=$?
		echo "quickstart: frameprepd exited with status $rc before" \
			"answering (its log is above)" >&2
		exit 1
	fi
	sleep 0.1
done

echo "== frameprep info --socket $url"
build/src/frameprep info --socket "$url"
for img in astronaut.png coffee.png chelsea.png camera.png; do
	echo "== frameprep send $img --size 640x640 -o $img.npy"
	build/src/frameprep send "build/images/$img" --socket "$url" \
		--size 640x640 -o "$out/$img.npy"
done
/usr/bin/python3 - "$out" <<'PY' || true
import sys, glob, os
try:
    import numpy as np
except ImportError:
    sys.exit(0)
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.npy"))):
    t = np.load(f)
    print(f"numpy: {os.path.basename(f)} shape={t.shape} dtype={t.dtype} "
          f"min={t.min():.3f} max={t.max():.3f} mean={t.mean():.4f}")
PY
echo "== stopping frameprepd"
rc=0
stop_daemon || rc=$?
trap 'rm -rf "$run_dir"' EXIT
if [ "$rc" != 0 ]; then
	echo "quickstart: frameprepd exited with status $rc" >&2
	exit 1
fi
echo "frameprepd exited cleanly"
echo "== the tensors are in $out (numpy.load(\"$out/astronaut.png.npy\"))"
