#!/usr/bin/env bash
# ab_python.sh: the Python package's bench (python -m frameprep.bench: the
# simple call and the ring through its doorbell, each beside the C client's
# same path) for two builds taking turns on one GPU, each build's package,
# C client and daemon together: OLD_DIR (bin/frameprepd, bin/frameprep-bench,
# libs/libframeprep.so.0, whl/*.whl, COMMIT) against this bundle's.
# Run from a bundle staged by run-on-gpu.sh --stage, on the GPU machine.
#
# Usage: bash ab_python.sh OLD_DIR [ROUNDS]   (default 3 rounds)
# Prints each round's rows as frameprep.bench prints them, old then new.
# FPREP_AB_DEVICE: the daemons' --device (default 0; cpu tries it here).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
old=${1:?usage: ab_python.sh OLD_DIR [ROUNDS]}
old=$(cd "$old" && pwd)
rounds=${2:-3}
export LD_LIBRARY_PATH=$here/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export XDG_CACHE_HOME=$(mktemp -d)
tmp=$(mktemp -d)
declare -A dir=([old]=$old [new]=$here)
for w in old new; do
	mkdir -p "$tmp/site-$w"
	python3 -m pip install -q --no-index --no-deps --target "$tmp/site-$w" \
		"${dir[$w]}"/whl/*.whl || exit 1
done
for r in $(seq "$rounds"); do
	for w in old new; do
		d=${dir[$w]}
		libs=$d/libs:$LD_LIBRARY_PATH
		url=ipc://$tmp/$w.sock
		LD_LIBRARY_PATH=$libs "$d/bin/frameprepd" --device "${FPREP_AB_DEVICE:-0}" --listen "$url" \
			2>"$tmp/$w-$r.log" &
		dp=$!
		for _ in $(seq 300); do
			LD_LIBRARY_PATH=$libs "$d/bin/frameprep" info --socket "$url" >/dev/null 2>&1 && break
			sleep 0.1
		done
		echo "== round $r, $w ($(cat "$d/COMMIT" 2>/dev/null || echo this bundle))"
		LD_LIBRARY_PATH=$libs PATH="$d/bin:$PATH" PYTHONPATH=$tmp/site-$w \
			python3 -m frameprep.bench -u "$url" -c 1,16 \
			--paths "${FPREP_PY_PATHS:-inline,door}" -d 3 -w 0.5 -r 1 |
			grep -E '^(path|inline|door|shm|copy) '
		kill -TERM "$dp"
		wait "$dp"
	done
done
