#!/usr/bin/python3
"""roi_test.py: ROIS and BATCH requests through frameprepd (CPU backend),
written on the wire by this file (struct, independently of the C codec).

roi_frames: a real photograph with boxes (inside, across the edges,
outside) and affine maps in one ROIS request, and three photographs in
one BATCH request, inline; every element of the (N, C, H, W) tensor is
compared with OpenCV (cv2 crop + resize + copyMakeBorder, warpAffine
INTER_LINEAR | WARP_INVERSE_MAP): within 1 LSB (affine: equal); the
reply's per-element transforms are checked against the letterbox
geometry, and INFO tells max_elements and max_batch_bytes.

roi_errors: bad element lists answered with named errors (N = 0, N past
--max-elements, a degenerate box named by index, a non-finite value, an
unknown type, a YUV source, a batch payload that is not its span, the
tensor past --max-batch-bytes), the daemon answering after each.

Usage: roi_test.py TEST --daemon PATH --cli PATH --images DIR
"""
import os
import struct
import sys

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "ops"))
import compare_roi as ref  # noqa: E402
import daemon_test as dt  # noqa: E402
import fpwire  # noqa: E402
from daemon_test import check  # noqa: E402

KIND_ROIS, KIND_BATCH = 8, 9
BOX, AFFINE, FRAME = 1, 2, 3
U8, NCHW, BGR = 3, 1, 2


def table(elements):
    """The element table: count, reserved, 32-byte records."""
    out = struct.pack("<II", len(elements), 0)
    for e in elements:
        if e[0] == FRAME:
            out += struct.pack("<B7xQ16x", FRAME, e[1])
        else:
            kind, resize, v = e
            v = list(v) + [0.0] * (6 - len(v))
            out += struct.pack("<BBH6fI", kind, resize, 0, *v, 0)
    return out


def request(kind, img, elements, frames=None, out=(96, 64), request_id=5,
            src_format=1, payload=None):
    h, w = img.shape[:2]
    bpp = img.shape[2] if img.ndim == 3 else 1
    hdr = fpwire.request(kind=kind, request_id=request_id,
                         src_format=src_format, width=w, height=h,
                         out_width=out[0], out_height=out[1], order=BGR,
                         dtype=U8, payload=b"")
    if payload is None:
        payload = (b"".join(f.tobytes() for f in frames)
                   if frames is not None else img.tobytes())
    return hdr + table(elements) + payload


def transforms(rep, n):
    """The reply's n transform records, after the tensor."""
    tail = rep["payload"][rep["tensor_size"]:]
    check(len(tail) == 32 * n, f"{len(tail)} bytes of transforms for {n}")
    return [struct.unpack_from("<4I4f", tail, 32 * k) for k in range(n)]


def tensor(rep):
    return np.frombuffer(rep["payload"][:rep["tensor_size"]],
                         np.uint8).reshape(rep["shape"])


def test_roi_frames(tmp):
    d = dt.Daemon(tmp)
    try:
        info = fpwire.reply(dt.nngcat(d.url, fpwire.request(kind=2),
                                      tmp=tmp))["payload"].decode()
        check("max_elements: 256" in info and "max_batch_bytes:" in info,
              f"INFO lacks the ROIS limits:\n{info}")
        img = cv2.imread(os.path.join(dt.ARGS.images, "astronaut.png"))
        img = np.ascontiguousarray(img[:300, :400])
        h, w = img.shape[:2]
        out = (96, 64)
        boxes = [(0, 0, w, h), (100, 50, 120, 200), (-20, -10, 80, 60),
                 (w - 40, h - 25, 90, 70), (w + 5, 10, 20, 20),
                 (7, 9, 3, 2)]
        mats = ref.affines_for(w, h, *out)[:4]
        els = [(BOX, 0, b) for b in boxes]
        els += [(BOX, 2, boxes[1])]  # per-box STRETCH
        els += [(AFFINE, 0, m) for m in mats]
        rep = fpwire.reply(dt.nngcat(d.url, request(KIND_ROIS, img, els,
                                                    out=out), tmp=tmp))
        check(rep["status"] == 0, f"ROIS: {rep['status_name']} "
                                  f"'{rep['message']}'")
        check(rep["shape"] == (len(els), 3, out[1], out[0]),
              f"shape {rep['shape']}")
        t = tensor(rep)
        xfs = transforms(rep, len(els))
        worst = 0
        for k, (kind, resize, v) in enumerate(els):
            if kind == BOX:
                want = ref.chw(ref.box_ref(img, v, out[0], out[1],
                                           resize == 2))
            else:
                want = ref.chw(ref.affine_ref(img, v, out[0], out[1]))
            diff = int(np.abs(t[k].astype(int) - want.astype(int)).max())
            worst = max(worst, diff)
            check(diff <= (0 if kind == AFFINE else 1),
                  f"element {k} {kind} {v}: max diff {diff}")
            if kind == BOX and resize == 0:
                nw, nh, top, _, left, _ = ref.letterbox_geometry(
                    v[2], v[3], *out)
                check(xfs[k][:4] == (nw, nh, left, top) and
                      xfs[k][6:] == (v[0], v[1]),
                      f"element {k} transform {xfs[k]}")
        print(f"ok ROIS: {len(els)} elements, max diff {worst} LSB")

        names = ["astronaut.png", "coffee.png", "chelsea.png"]
        frames = [np.ascontiguousarray(cv2.imread(
            os.path.join(dt.ARGS.images, n))[:200, :300]) for n in names]
        n = frames[0].nbytes
        els = [(FRAME, k * n) for k in range(3)]
        rep = fpwire.reply(dt.nngcat(d.url, request(
            KIND_BATCH, frames[0], els, frames=frames, out=out), tmp=tmp))
        check(rep["status"] == 0, f"BATCH: {rep['status_name']} "
                                  f"'{rep['message']}'")
        t = tensor(rep)
        for k, f in enumerate(frames):
            want = ref.chw(ref.resize_ref(f, out[0], out[1], False))
            diff = int(np.abs(t[k].astype(int) - want.astype(int)).max())
            check(diff <= 1, f"batch frame {k}: max diff {diff}")
        xfs = transforms(rep, 3)
        check(all(x == xfs[0] for x in xfs), f"batch transforms {xfs}")
        print("ok BATCH: 3 frames within 1 LSB")

        # The CLI: frameprep crops IMAGE --boxes BOXES.json -o OUT.npy.
        path = os.path.join(dt.ARGS.images, "astronaut.png")
        full = cv2.imread(path)
        mat = ref.affines_for(512, 512, 80, 48)[1]
        with open(os.path.join(tmp, "boxes.json"), "w") as f:
            f.write('[[30, 40, 200, 100], {"box": [-10, 400, 150, 150], '
                    '"resize": "stretch"}, {"affine": [%s]}]' %
                    ", ".join(repr(v) for v in mat))
        npy = os.path.join(tmp, "crops.npy")
        dt.cli("crops", path, "--boxes", os.path.join(tmp, "boxes.json"),
               "--size", "80x48", "--dtype", "u8", "--order", "bgr",
               "--socket", d.url, "-o", npy)
        t = np.load(npy)
        wants = [ref.box_ref(full, (30, 40, 200, 100), 80, 48, False),
                 ref.box_ref(full, (-10, 400, 150, 150), 80, 48, True),
                 ref.affine_ref(full, mat, 80, 48)]
        for k, want in enumerate(wants):
            diff = int(np.abs(t[k].astype(int) -
                              ref.chw(want).astype(int)).max())
            check(diff <= 1, f"frameprep crops element {k}: diff {diff}")
        print("ok frameprep crops: 3 elements within 1 LSB")
    finally:
        d.stop()


def test_roi_errors(tmp):
    d = dt.Daemon(tmp, "--max-elements", "4", "--max-batch-bytes", "100000")
    try:
        img = np.zeros((48, 64, 3), np.uint8)
        box = (BOX, 0, (0, 0, 10, 10))
        nv12 = np.zeros((72, 64), np.uint8)
        cases = [
            ("N = 0", request(KIND_ROIS, img, []), "EINVAL", "elements is 0"),
            ("N past the limit", request(KIND_ROIS, img, [box] * 5),
             "ELIMIT", "elements 5 exceeds max_elements 4"),
            ("degenerate box", request(KIND_ROIS, img, [
                box, box, (BOX, 0, (1, 2, 0, 5))]), "EINVAL",
             "element 2: w 0 is not > 0"),
            ("negative h", request(KIND_ROIS, img, [
                box, (BOX, 0, (1, 2, 5, -3))]), "EINVAL",
             "element 1: h -3 is not > 0"),
            ("NaN", request(KIND_ROIS, img, [
                (AFFINE, 0, (1, 0, float("nan"), 0, 1, 0))]), "EINVAL",
             "element 0: m02 nan is not finite"),
            ("unknown type", request(KIND_ROIS, img, [(9, 0, (0,) * 6)]),
             "EINVAL", "element 0: type 9 in a ROIS"),
            ("frame in a ROIS", request(KIND_ROIS, img, [(FRAME, 0)]),
             "EINVAL", "element 0: type 3 in a ROIS"),
            ("box in a BATCH", request(KIND_BATCH, img, [box]), "EINVAL",
             "element 0: type 1 in a BATCH"),
            ("short batch payload", request(
                KIND_BATCH, img, [(FRAME, 0), (FRAME, img.nbytes)]),
             "EPROTO", "the frames' span"),
            ("YUV source", request(KIND_ROIS, nv12, [box], src_format=6,
                                   payload=nv12.tobytes()), "EINVAL",
             "src_format 6 in a ROIS request"),
            ("past max-batch-bytes", request(KIND_ROIS, img, [box] * 4,
                                             out=(128, 128)),
             "ELIMIT", "exceed max_batch_bytes 100000"),
        ]
        for name, msg, want, needle in cases:
            rep = fpwire.reply(dt.nngcat(d.url, msg, tmp=tmp))
            check(rep["status_name"] == want and needle in rep["message"],
                  f"{name}: got {rep['status_name']} '{rep['message']}', "
                  f"want {want} '{needle}'")
            print(f"ok {name}: {want} '{rep['message']}'")
        rep = fpwire.reply(dt.nngcat(d.url, request(KIND_ROIS, img, [box]),
                                     tmp=tmp))
        check(rep["status"] == 0, f"a good ROIS after the bad ones: {rep}")
        check(d.alive(), "frameprepd died")
    finally:
        d.stop()


if __name__ == "__main__":
    # daemon_test's driver: arguments, scratch directory, logs on failure.
    sys.exit(dt.run(globals()))
