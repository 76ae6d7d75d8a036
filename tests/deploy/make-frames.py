#!/usr/bin/env python3
"""make-frames.py IMAGES_DIR OUT_DIR [N]: for up to N photographs (default
6) writes OUT_DIR/frame_NAME.npy (the decoded uint8 BGR frame, as
cv2.imread gives) and OUT_DIR/ref_NAME.npy (OpenCV's letterbox to 640x640,
RGB, NCHW float32 / 255, Ultralytics' convention, as
tests/integration/daemon_test.py computes it): the consumer containers'
frames and the tensors they must get back."""
import os
import sys

import cv2
import numpy as np

src, out = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 6
names = ["astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg",
         "motorcycle_left.png", "camera.png", "hubble_deep_field.jpg"]
os.makedirs(out, exist_ok=True)
done = 0
for name in names:
    path = os.path.join(src, name)
    if done == n or not os.path.exists(path):
        continue
    img = cv2.imread(path, cv2.IMREAD_COLOR)
    h, w = img.shape[:2]
    r = min(640 / w, 640 / h)
    nw, nh = max(1, min(640, round(w * r))), max(1, min(640, round(h * r)))
    lb = img if (nw, nh) == (w, h) else cv2.resize(
        img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    left, top = round((640 - nw) / 2 - 0.1), round((640 - nh) / 2 - 0.1)
    lb = cv2.copyMakeBorder(lb, top, 640 - nh - top, left, 640 - nw - left,
                            cv2.BORDER_CONSTANT, value=(114, 114, 114))
    ref = (lb[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255)
    stem = os.path.splitext(name)[0]
    np.save(os.path.join(out, f"frame_{stem}.npy"), img)
    np.save(os.path.join(out, f"ref_{stem}.npy"), ref)
    done += 1
if done == 0:
    sys.exit(f"make-frames.py: no photographs in {src}")
print(f"make-frames: {done} frames and OpenCV references in {out}")
