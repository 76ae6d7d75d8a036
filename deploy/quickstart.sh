#!/usr/bin/env bash
# quickstart.sh: installs and builds frameprep, starts frameprepd on its
# built-in defaults, sends real photographs through it with the frameprep CLI
# and stops the daemon. The tensors stay in build/demo (FPREP_DEMO_DIR), as
# .npy files for numpy.load. Usage: bash deploy/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/setup.sh build
bash tests/data/fetch-images.sh build/images

out=${FPREP_DEMO_DIR:-build/demo}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build/service/frameprepd &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT

# Wait until the daemon answers (it listens on its default socket).
for _ in $(seq 100); do
	build/src/frameprep info >/dev/null 2>&1 && break
	kill -0 $pid 2>/dev/null || { echo "frameprepd exited" >&2; exit 1; }
	sleep 0.1
done

echo "== frameprep info"
build/src/frameprep info
for img in astronaut.png coffee.png chelsea.png camera.png; do
	echo "== frameprep send $img --size 640x640 -o $img.npy"
	build/src/frameprep send "build/images/$img" --size 640x640 -o "$out/$img.npy"
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
kill -TERM $pid
wait $pid
trap - EXIT
echo "frameprepd exited cleanly"
echo "== the tensors are in $out (numpy.load(\"$out/astronaut.png.npy\"))"
