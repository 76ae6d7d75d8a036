#!/usr/bin/python3
"""Compare frameprep's CPU preprocessing with OpenCV on real photographs.

For every image in --images (colour and grayscale), for whole images and a
few odd-sized crops, in every source pixel format and several tensor sizes,
the tensor written by ops_dump (fprep_preprocess_cpu) is compared with the
Ultralytics LetterBox recipe done with OpenCV: cv2.resize(INTER_LINEAR),
then cv2.copyMakeBorder(BORDER_CONSTANT, 114). STRETCH is compared with
cv2.resize to the exact size.

Checks: U8 within 1 of OpenCV; F32 within 1/255 + 1e-6 of OpenCV / 255;
F16 bit-equal to the F32 tensor rounded by numpy (round to nearest even)
and within 1/255 + 2^-11 of OpenCV / 255; NHWC equal to NCHW transposed;
padding exactly pad_value (U8) or pad_value * scale (F32). Prints one row
per (image, source size, format, tensor size) and a summary per format and
dtype, and exits 1 on any failure.

Run with /usr/bin/python3 (Debian's python3-opencv and python3-numpy).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import cv2
import numpy as np

SIZES = [(640, 640), (320, 320), (1280, 1280), (416, 256), (333, 517)]
CROP_SIZES = [(1023, 767), (101, 37), (37, 101), (1, 1), (3, 2)]
CROP_OUT = [(333, 517), (97, 61)]
EXTRA_OUT = [(640, 640), (333, 517)]
FORMATS = ["bgr8", "rgb8", "bgra8", "rgba8", "gray8"]
PAD = 114
F16_TOL = 1.0 / 255 + 2.0 ** -11
F32_TOL = 1.0 / 255 + 1e-6


def letterbox_geometry(w, h, ow, oh):
    """Ultralytics LetterBox: resized size and (top, bottom, left, right)."""
    r = min(oh / h, ow / w)
    nw, nh = int(round(w * r)), int(round(h * r))
    dw, dh = (ow - nw) / 2, (oh - nh) / 2
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    return nw, nh, (top, bottom, left, right)


def letterbox_ref(img, ow, oh):
    """The reference letterbox of img (H x W [x C] uint8), as Ultralytics."""
    h, w = img.shape[:2]
    nw, nh, (top, bottom, left, right) = letterbox_geometry(w, h, ow, oh)
    if (w, h) != (nw, nh):
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    return cv2.copyMakeBorder(img, top, bottom, left, right,
                              cv2.BORDER_CONSTANT, value=(PAD, PAD, PAD))


def pad_mask(w, h, ow, oh, stretch):
    mask = np.zeros((oh, ow), bool)
    if stretch:
        return mask
    nw, nh, (top, _, left, _) = letterbox_geometry(w, h, ow, oh)
    mask[:, :] = True
    mask[top:top + nh, left:left + nw] = False
    return mask


def source_bytes(bgr, gray, fmt):
    """The source frame in fmt (alpha is a varying pattern: it must be
    ignored)."""
    if fmt == "gray8":
        return gray
    img = bgr if fmt.startswith("bgr") else bgr[:, :, ::-1]
    if fmt.endswith("a8"):
        alpha = (np.arange(img.shape[0] * img.shape[1]) * 37 % 256).astype(
            np.uint8).reshape(img.shape[:2] + (1,))
        img = np.concatenate([img, alpha], axis=2)
    return np.ascontiguousarray(img)


def tensor_ref(ref_hwc, order):
    """Reference image (H x W x 3 BGR, or H x W gray) as CHW in order."""
    if ref_hwc.ndim == 2:
        if order == "gray":
            return ref_hwc[None]
        return np.repeat(ref_hwc[None], 3, axis=0)
    if order == "rgb":
        ref_hwc = ref_hwc[:, :, ::-1]
    return ref_hwc.transpose(2, 0, 1)


class Case:
    def __init__(self, name, src_size, fmt, out, opts, ref, mask, stride):
        self.name, self.src_size, self.fmt, self.out = name, src_size, fmt, out
        self.opts, self.ref, self.mask, self.stride = opts, ref, mask, stride
        self.npy = None


class Stats:
    def __init__(self):
        self.rows = {}     # (image, src size, fmt, out) -> {kind: (max, frac)}
        self.summary = {}  # (fmt, kind) -> (max, frac, where)
        self.failures = []

    def add(self, case, kind, maxdiff, frac, ok, what=""):
        key = (case.name, case.src_size, case.fmt, case.out)
        row = self.rows.setdefault(key, {})
        old = row.get(kind)
        if old is None or maxdiff > old[0]:
            row[kind] = (maxdiff, frac)
        where = "%s %s %s->%s" % (case.name, case.src_size, case.fmt, case.out)
        s = self.summary.get((case.fmt, kind))
        if s is None or (maxdiff, frac) > s[:2]:
            self.summary[(case.fmt, kind)] = (maxdiff, frac, where)
        if not ok:
            self.failures.append("%s [%s %s]: %s max diff %g %s" % (
                where, kind, " ".join(case.opts), kind, maxdiff, what))


def check_case(case, st, f32_of):
    """Compare one ops_dump output with its reference."""
    try:
        out = np.load(case.npy)
    except (OSError, ValueError) as e:
        st.add(case, "run", float("inf"), 1.0, False, "no output: %s" % e)
        return
    opts = dict(zip(case.opts[::2], case.opts[1::2]))
    dtype, layout = opts["--dtype"], opts["--layout"]
    ow, oh = case.out
    t = out[0]
    if layout == "nhwc":
        t = t.transpose(2, 0, 1)
    ref = case.ref.astype(np.float32)
    if t.shape != ref.shape:
        st.add(case, dtype, float("inf"), 1.0, False,
               "shape %s, expected %s" % (t.shape, ref.shape))
        return
    mask = case.mask
    if dtype == "u8":
        d = np.abs(t.astype(np.int32) - case.ref.astype(np.int32))
        st.add(case, "u8", int(d.max()), float((d > 0).mean()),
               d.max() <= 1)
        padok = bool(np.all(t[:, mask] == PAD))
        st.add(case, "pad", 0 if padok else 1, 0.0, padok, "pad != 114")
        return
    d = np.abs(t.astype(np.float32) - ref / np.float32(255))
    kind = "%s-%s" % (dtype, layout)
    if dtype == "f32":
        st.add(case, kind, float(d.max()) * 255, float((d > 1e-6).mean()),
               d.max() <= F32_TOL, "(in 1/255 units)")
        padv = np.float32(PAD) * np.float32(1.0 / 255)
        padok = bool(np.all(t[:, mask] == padv))
        st.add(case, "pad", 0 if padok else 1, 0.0, padok, "pad value")
        f32_of[(case.name, case.src_size, case.fmt, case.out,
                opts["--order"], opts["--resize"])] = t
    else:
        st.add(case, kind, float(d.max()) * 255, float((d > 1e-6).mean()),
               d.max() <= F16_TOL, "(in 1/255 units)")
    # NHWC and F16 tensors must agree exactly with the NCHW F32 one.
    base = f32_of.get((case.name, case.src_size, case.fmt, case.out,
                       opts["--order"], opts["--resize"]))
    if base is not None and (dtype != "f32" or layout != "nchw"):
        expect = base.astype(np.float16) if dtype == "f16" else base
        same = bool(np.array_equal(t.view(np.uint16) if dtype == "f16"
                                   else t,
                                   expect.view(np.uint16) if dtype == "f16"
                                   else expect))
        st.add(case, "consistency", 0 if same else 1, 0.0, same,
               "differs from the NCHW f32 tensor")


def cases_for(name, bgr, gray, is_gray, src_size, sizes, full):
    """The cases of one source image (or crop)."""
    out = []
    h, w = bgr.shape[:2]
    fmts = ["gray8"] if is_gray else FORMATS
    for fmt in fmts:
        src_gray = fmt == "gray8"
        for ow, oh in sizes:
            nw, nh, _ = letterbox_geometry(w, h, ow, oh)
            if nw == 0 or nh == 0:
                continue  # Ultralytics itself cannot do these
            base = gray if src_gray else bgr
            lb = letterbox_ref(base, ow, oh)
            st = cv2.resize(base, (ow, oh), interpolation=cv2.INTER_LINEAR)
            lbmask = pad_mask(w, h, ow, oh, False)
            nomask = pad_mask(w, h, ow, oh, True)

            def add(order, dtype, layout, resize, ref, mask, stride=0):
                opts = ["--order", order, "--dtype", dtype, "--layout",
                        layout, "--resize", resize]
                out.append(Case(name, src_size, fmt, (ow, oh), opts,
                                tensor_ref(ref, order), mask, stride))

            order = "gray" if src_gray and is_gray else "rgb"
            add(order, "u8", "nchw", "letterbox", lb, lbmask)
            if src_gray and not is_gray:
                add("gray", "u8", "nchw", "letterbox", lb, lbmask)
            add("rgb", "f32", "nchw", "letterbox", lb, lbmask)
            if full and (ow, oh) in EXTRA_OUT:
                add("rgb", "f32", "nhwc", "letterbox", lb, lbmask)
                add("rgb", "f16", "nchw", "letterbox", lb, lbmask)
                add("bgr", "u8", "nhwc", "letterbox", lb, lbmask,
                    stride=13)
                add(order, "u8", "nchw", "stretch", st, nomask)
                add("rgb", "f32", "nchw", "stretch", st, nomask)
                add("rgb", "f16", "nhwc", "stretch", st, nomask)
    return out


def run_image(path, args, st, tmp):
    name = os.path.splitext(os.path.basename(path))[0]
    raw = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if raw is None:
        print("skip %s: OpenCV cannot read it" % name)
        return 0
    is_gray = raw.ndim == 2 or raw.shape[2] == 1
    if is_gray:
        gray = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
        bgr = cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)
    else:
        bgr = cv2.imread(path, cv2.IMREAD_COLOR)
        gray = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    h, w = bgr.shape[:2]
    sources = [("%dx%d" % (w, h), bgr, gray, SIZES, True)]
    for cw, ch in CROP_SIZES:
        if cw < w and ch < h:
            x, y = (w - cw) // 3, (h - ch) // 2
            sources.append(("%dx%d@%d,%d" % (cw, ch, x, y),
                            bgr[y:y + ch, x:x + cw], gray[y:y + ch, x:x + cw],
                            CROP_OUT, False))
    cases, lines = [], []
    for src_size, b, g, sizes, full in sources:
        for case in cases_for(name, b, g, is_gray, src_size, sizes, full):
            fmt = case.fmt
            img = source_bytes(b, g, fmt)
            ih, iw = img.shape[:2]
            bpp = 1 if img.ndim == 2 else img.shape[2]
            rows = img.reshape(ih, iw * bpp)
            stride = iw * bpp + case.stride
            rawfile = os.path.join(tmp, "%s-%s-%s-%d.raw" % (
                name, src_size, fmt, stride))
            if not os.path.exists(rawfile):
                buf = np.zeros((ih, stride), np.uint8)
                buf[:, :iw * bpp] = rows
                buf[:, iw * bpp:] = 0xA5
                buf.tofile(rawfile)
            case.npy = os.path.join(tmp, "out%d.npy" % len(cases))
            lines.append(" ".join(
                ["--raw", fmt, "%dx%d+%d" % (iw, ih, stride),
                 "--size", "%dx%d" % case.out] + case.opts +
                [rawfile, case.npy]))
            cases.append(case)
    proc = subprocess.run([args.ops_dump, "--batch"],
                          input="\n".join(lines) + "\n", text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
    f32_of = {}
    # F32 NCHW first: the others are checked against it.
    order = sorted(range(len(cases)), key=lambda i: (
        cases[i].opts[3] != "f32" or cases[i].opts[5] != "nchw"))
    for i in order:
        check_case(cases[i], st, f32_of)
        os.unlink(cases[i].npy) if os.path.exists(cases[i].npy) else None
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    return len(cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops-dump", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--only", help="comma-separated image names")
    args = ap.parse_args()
    names = sorted(f for f in os.listdir(args.images)
                   if f.endswith((".png", ".jpg")))
    if args.only:
        keep = set(args.only.split(","))
        names = [n for n in names if os.path.splitext(n)[0] in keep]
    if not names:
        print("no images in %s" % args.images)
        return 1
    st = Stats()
    tmp = tempfile.mkdtemp(prefix="fprep-ops-", dir="/dev/shm" if os.path.isdir(
        "/dev/shm") else None)
    ncases = 0
    try:
        for n in names:
            ncases += run_image(os.path.join(args.images, n), args, st, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    kinds = ["u8", "f32-nchw", "f32-nhwc", "f16-nchw", "f16-nhwc"]
    print("%-18s %-16s %-6s %-10s %s" % ("image", "src size", "format",
                                         "out size",
                                         "max diff: u8 (frac) | f32, f16 "
                                         "in 1/255"))
    for key in sorted(st.rows):
        row = st.rows[key]
        name, src_size, fmt, out = key
        cells = []
        for k in kinds:
            if k in row:
                m, frac = row[k]
                cells.append("%s %d (%.4f)" % (k, m, frac) if k == "u8"
                             else "%s %.4f" % (k, m))
        print("%-18s %-16s %-6s %-10s %s" % (name, src_size, fmt,
                                             "%dx%d" % out, "  ".join(cells)))
    print("\nlargest difference per format and dtype:")
    print("  %-6s %-9s %-8s %-8s %s" % ("format", "dtype", "max", "frac",
                                        "where"))
    for (fmt, kind), (m, frac, where) in sorted(st.summary.items()):
        if kind in ("pad", "consistency"):
            continue
        print("  %-6s %-9s %-8.4g %-8.4f %s" % (fmt, kind, m, frac, where))
    bad = {k for (_, k), (m, _, _) in st.summary.items()
           if k in ("pad", "consistency") and m}
    print("padding exact: %s; NHWC/F16 consistent with NCHW F32: %s" % (
        "no" if "pad" in bad else "yes",
        "no" if "consistency" in bad else "yes"))
    print("%d cases, %d images, %d failures" % (ncases, len(names),
                                                len(st.failures)))
    for f in st.failures[:50]:
        print("FAIL " + f)
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
