#!/usr/bin/python3
"""Compare frameprep's ROIS and BATCH reference (roi_dump, that is
fprep_preprocess_elements_cpu) with OpenCV, element by element, on real
photographs.

BOX (integer boxes, inside the frame, across its edges and wholly outside
it): the frame bordered with the pad value (cv2.copyMakeBorder), cropped to
the box, then letterboxed as Ultralytics does (cv2.resize INTER_LINEAR +
cv2.copyMakeBorder) or stretched (cv2.resize). AFFINE: cv2.warpAffine(frame,
M, size, flags=INTER_LINEAR | WARP_INVERSE_MAP, BORDER_CONSTANT,
borderValue=pad) for rotations, similarity transforms (face alignment
style), shears and maps partly outside the frame. BATCH: every frame
letterboxed as a FRAME would be.

Checks: U8 within 1 of OpenCV (AFFINE: equal), F32 within 1/255 + 1e-6 of
OpenCV / 255, the transforms roi_dump prints against the letterbox
geometry. Prints a line per image and a summary; exits 1 on any failure.
Run with /usr/bin/python3 (Debian's python3-opencv and python3-numpy).
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import cv2
import numpy as np

PAD = 114
IMAGES = ["astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg",
          "motorcycle_left.png", "camera.png", "hubble_deep_field.jpg"]


def letterbox_geometry(w, h, ow, oh):
    r = min(oh / h, ow / w)
    nw, nh = int(round(w * r)), int(round(h * r))
    nw, nh = max(1, min(nw, ow)), max(1, min(nh, oh))
    dw, dh = (ow - nw) / 2, (oh - nh) / 2
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return nw, nh, top, oh - nh - top, left, ow - nw - left


def resize_ref(img, ow, oh, stretch):
    h, w = img.shape[:2]
    if stretch:
        if (w, h) == (ow, oh):
            return img
        return cv2.resize(img, (ow, oh), interpolation=cv2.INTER_LINEAR)
    nw, nh, top, bottom, left, right = letterbox_geometry(w, h, ow, oh)
    if (w, h) != (nw, nh):
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    return cv2.copyMakeBorder(img, top, bottom, left, right,
                              cv2.BORDER_CONSTANT, value=(PAD,) * 3)


def box_ref(img, box, ow, oh, stretch):
    x, y, w, h = box
    m = max(0, -x, -y, x + w - img.shape[1], y + h - img.shape[0])
    big = cv2.copyMakeBorder(img, m, m, m, m, cv2.BORDER_CONSTANT,
                             value=(PAD,) * 3) if m else img
    crop = np.ascontiguousarray(big[y + m:y + m + h, x + m:x + m + w])
    return resize_ref(crop, ow, oh, stretch)


def affine_ref(img, mat, ow, oh):
    return cv2.warpAffine(img, np.array(mat, np.float64).reshape(2, 3),
                          (ow, oh), flags=cv2.INTER_LINEAR |
                          cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_CONSTANT,
                          borderValue=(PAD,) * 3)


def boxes_for(w, h, rng):
    """Integer boxes: inside, odd sizes, tiny, across every edge, outside,
    and the whole frame."""
    boxes = [(0, 0, w, h), (w // 4, h // 5, w // 2, h // 3),
             (1, 2, 37, 101), (w - 50, h - 30, 50, 30), (5, 7, 1, 1),
             (3, 4, 2, 3), (-20, -10, 80, 60), (w - 40, h - 25, 90, 70),
             (-30, h // 2, w + 60, 40), (w + 5, h + 5, 20, 20)]
    for _ in range(8):
        bw = int(rng.integers(1, w))
        bh = int(rng.integers(1, h))
        boxes.append((int(rng.integers(-bw // 3, w - bw // 2)),
                      int(rng.integers(-bh // 3, h - bh // 2)), bw, bh))
    return boxes


def affines_for(w, h, ow, oh):
    """Rotations about the centre, a similarity from 5-landmark style
    points, a shear, a map half outside the frame, a mirror."""
    out = []
    for deg, s in [(0, 1.0), (30, 1.3), (-47, 0.6), (90, 2.1), (180, 0.9)]:
        a = math.radians(deg)
        c, si = math.cos(a) * s, math.sin(a) * s
        cx, cy = w / 2, h / 2
        # source <- tensor: rotate the tensor about its centre onto the
        # frame's centre.
        out.append([c, -si, cx - c * ow / 2 + si * oh / 2,
                    si, c, cy - si * ow / 2 - c * oh / 2])
    out.append([0.7, 0.2, w * 0.3, -0.15, 0.8, h * 0.2])
    out.append([1.0, 0.0, w - ow / 2, 0.0, 1.0, -oh / 3])
    out.append([-1.0, 0.0, ow - 1.0, 0.0, 1.0, 0.0])
    return [[float(np.float32(v)) for v in m] for m in out]


def run_dump(dump, raw, fmt, w, h, out, args, tmp):
    path = os.path.join(tmp, "t.npy")
    cmd = [dump, "--src", fmt, "%dx%d" % (w, h), "--size",
           "%dx%d" % out] + args + [raw, path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd[:8]), r.stderr))
    return np.load(path), r.stdout.splitlines()


def compare(name, got, ref, kind, dtype, tol_u8, st):
    if dtype == "u8":
        d = np.abs(got.astype(np.int32) - ref.astype(np.int32))
        worst = int(d.max())
        ok = worst <= tol_u8
    else:
        d = np.abs(got.astype(np.float64) - ref.astype(np.float64) / 255)
        worst = float(d.max()) * 255
        ok = d.max() <= 1.0 / 255 + 1e-6
    key = (kind, dtype)
    st.setdefault(key, [0, 0, 0.0])
    st[key][0] += 1
    st[key][1] += 0 if ok else 1
    st[key][2] = max(st[key][2], worst)
    if not ok:
        print("FAIL %s %s %s: max diff %g LSB" % (name, kind, dtype, worst))
    return ok


def chw(img):
    return img.transpose(2, 0, 1) if img.ndim == 3 else img[None]


def check_image(dump, path, tmp, st, rng):
    bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    gray = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    h, w = bgr.shape[:2]
    ok = True
    for fmt, img in [("bgr8", bgr), ("gray8", gray)]:
        raw = os.path.join(tmp, "frame.raw")
        np.ascontiguousarray(img).tofile(raw)
        order = "bgr" if fmt == "bgr8" else "gray"
        for out in [(224, 224), (112, 96)]:
            boxes = boxes_for(w, h, rng)
            for resize in ["letterbox", "stretch"]:
                for dtype in ["u8", "f32"]:
                    args = ["--order", order, "--dtype", dtype,
                            "--resize", resize]
                    for b in boxes:
                        args += ["--box", "%d,%d,%d,%d" % b]
                    t, lines = run_dump(dump, raw, fmt, w, h, out, args, tmp)
                    for k, b in enumerate(boxes):
                        ref = chw(box_ref(img, b, out[0], out[1],
                                          resize == "stretch"))
                        ok &= compare(os.path.basename(path) + " box %s" %
                                      (b,), t[k], ref, "box-" + resize,
                                      dtype, 1, st)
                        if resize == "letterbox":
                            nw, nh, top, _, left, _ = letterbox_geometry(
                                b[2], b[3], out[0], out[1])
                            want = "%d resized=%dx%d pad=%d,%d" % (
                                k, nw, nh, left, top)
                            if not lines[k].startswith(want):
                                print("FAIL transform %s != %s" %
                                      (lines[k], want))
                                ok = False
            mats = affines_for(w, h, out[0], out[1])
            for dtype in ["u8", "f32"]:
                args = ["--order", order, "--dtype", dtype]
                for m in mats:
                    args += ["--affine", ",".join("%.9g" % v for v in m)]
                t, _ = run_dump(dump, raw, fmt, w, h, out, args, tmp)
                for k, m in enumerate(mats):
                    ref = chw(affine_ref(img, m, out[0], out[1]))
                    ok &= compare(os.path.basename(path) + " affine %d" % k,
                                  t[k], ref, "affine", dtype, 0, st)
    return ok


def check_batch(dump, paths, tmp, st):
    """BATCH: the images cropped to one size, one after another."""
    imgs = [cv2.imread(p, cv2.IMREAD_COLOR) for p in paths]
    h = min(i.shape[0] for i in imgs)
    w = min(i.shape[1] for i in imgs)
    imgs = [np.ascontiguousarray(i[:h, :w]) for i in imgs]
    raw = os.path.join(tmp, "frames.raw")
    np.concatenate([i.reshape(-1) for i in imgs]).tofile(raw)
    ok = True
    for out, resize in [((224, 224), "letterbox"), ((160, 96), "stretch")]:
        t, _ = run_dump(dump, raw, "bgr8", w, h, out,
                        ["--frames", str(len(imgs)), "--resize", resize,
                         "--order", "bgr"], tmp)
        for k, img in enumerate(imgs):
            ok &= compare("batch %d" % k, t[k],
                          chw(resize_ref(img, out[0], out[1],
                                         resize == "stretch")),
                          "batch-" + resize, "u8", 1, st)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--roi-dump", required=True)
    ap.add_argument("--images", required=True)
    args = ap.parse_args()
    paths = [os.path.join(args.images, n) for n in IMAGES
             if os.path.exists(os.path.join(args.images, n))]
    if len(paths) < 3:
        print("fewer than 3 of the images in %s" % args.images)
        return 1
    rng = np.random.default_rng(27)
    st = {}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for p in paths:
            ok &= check_image(args.roi_dump, p, tmp, st, rng)
            print("%s done" % os.path.basename(p))
        ok &= check_batch(args.roi_dump, paths, tmp, st)
    print("%-18s %-4s %6s %6s %s" % ("kind", "type", "cases", "fail",
                                      "max diff (LSB)"))
    for (kind, dtype), (n, bad, worst) in sorted(st.items()):
        print("%-18s %-4s %6d %6d %.3f" % (kind, dtype, n, bad, worst))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
