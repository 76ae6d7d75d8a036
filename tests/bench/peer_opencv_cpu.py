#!/usr/bin/env python3
"""peer_opencv_cpu: letterbox on the CPU with OpenCV, what users do today.

cv2.resize(INTER_LINEAR) + cv2.copyMakeBorder(114) + BGR->RGB + /255 +
HWC->CHW, float32, one frame at a time on the calling thread (OpenCV may
use its own threads inside cv2.resize).
"""
import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402


def letterbox_opencv(frame, dw, dh):
    import cv2
    import numpy as np

    h, w = frame.shape[:2]
    nw, nh, left, top, right, bottom = peer_common.letterbox_geometry(
        w, h, dw, dh)
    if (nw, nh) != (w, h):
        frame = cv2.resize(frame, (nw, nh), interpolation=cv2.INTER_LINEAR)
    frame = cv2.copyMakeBorder(frame, top, bottom, left, right,
                               cv2.BORDER_CONSTANT, value=(114, 114, 114))
    rgb = frame[:, :, ::-1].transpose(2, 0, 1)
    return np.ascontiguousarray(rgb, dtype=np.float32)[None] / np.float32(255)


def main():
    args = peer_common.arg_parser(__doc__.splitlines()[0]).parse_args()
    missing = [m for m in ("cv2", "numpy")
               if importlib.util.find_spec(m) is None]
    if missing:
        print(f"SKIP: peer_opencv_cpu needs {' and '.join(missing)}")
        return peer_common.SKIP
    peer_common.run_sync(
        "peer_opencv_cpu", args, lambda case: case[2:],
        lambda dst, frame: letterbox_opencv(frame, *dst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
