#!/usr/bin/env python3
"""frameprep-example-consumer: what an inference pod does with frameprepd.

Preprocesses frames in a loop through the node's daemon
($FRAMEPREP_SOCKET) and prints one line per round. Frames are the
frame_*.npy files (uint8 BGR, as cv2.imread gives) of FRAMES_DIR, else a
synthetic frame. With each frame's ref_*.npy beside it (the expected
(1, 3, 640, 640) float32 letterbox tensor), every tensor is checked within
1 LSB. A request that fails because the daemon went away (restarted,
draining) is sent again on a new connection until it succeeds within
RETRY_SECONDS: a restart loses no frame. Writes each round's line to
STATUS_FILE too, when set. ROUNDS (0: forever) bounds the loop.
"""
import glob
import os
import signal
import sys
import time

import numpy as np

import frameprep


def log(msg):
    print(msg, flush=True)
    path = os.environ.get("STATUS_FILE")
    if path:
        with open(path, "a") as f:
            f.write(msg + "\n")


def frames():
    d = os.environ.get("FRAMES_DIR", "")
    out = []
    for p in sorted(glob.glob(os.path.join(d, "frame_*.npy"))) if d else []:
        ref = p.replace("frame_", "ref_")
        out.append((os.path.basename(p), np.load(p),
                    np.load(ref) if os.path.exists(ref) else None))
    if not out:
        y, x = np.mgrid[0:480, 0:640]
        img = np.stack([x % 256, y % 256, (x + y) % 256], -1).astype(np.uint8)
        out.append(("synthetic", img, None))
    return out


def connect(deadline):
    while True:
        try:
            return frameprep.Client(timeout=10.0)
        except (frameprep.TransportError, OSError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def main():
    # PID 1 of its container: SIGTERM (pod deletion) ends it at once.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    retry = float(os.environ.get("RETRY_SECONDS", "120"))
    rounds = int(os.environ.get("ROUNDS", "0"))
    work = frames()
    client = connect(time.monotonic() + retry)
    log(f"consumer: connected to {client.address}, {len(work)} frames")
    n = 0
    retried = 0
    while rounds == 0 or n < rounds:
        n += 1
        worst = 0.0
        for name, img, ref in work:
            deadline = time.monotonic() + retry
            while True:
                try:
                    res = client.preprocess(img, size=(640, 640))
                    t = np.array(res.tensor, copy=True)
                    break
                except (frameprep.TransportError, TimeoutError,
                        frameprep.ServerShuttingDownError,
                        frameprep.ServerBusyError) as exc:
                    if time.monotonic() > deadline:
                        log(f"consumer: FAIL {name}: {exc!r}")
                        return 1
                    retried += 1
                    log(f"consumer: {name}: {type(exc).__name__}: "
                        f"{exc}; again on a new connection")
                    client.close()
                    client = connect(deadline)
            if ref is not None:
                d = float(np.abs(t.astype(np.float64) * 255.0 -
                                 ref.astype(np.float64) * 255.0).max())
                if t.shape != ref.shape or d > 1.0 + 1e-3:
                    log(f"consumer: FAIL {name}: shape {t.shape}, "
                        f"{d:.3f} LSB from the reference")
                    return 1
                worst = max(worst, d)
        log(f"round {n} ok: {len(work)} tensors, max {worst:.3f} LSB, "
            f"{retried} retried")
    return 0


if __name__ == "__main__":
    sys.exit(main())
