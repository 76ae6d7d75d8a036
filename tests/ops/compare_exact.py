#!/usr/bin/python3
"""Exact mode (rounding=opencv) against OpenCV, bit for bit, on real photos.

The reference is the Ultralytics LetterBox recipe done with OpenCV:
cv2.resize(INTER_LINEAR) of the uint8 frame, cv2.copyMakeBorder(
BORDER_CONSTANT, value=pad), the channel order and layout, then numpy's
float32 (img * scale - mean) / std (float16: that, rounded by numpy).
STRETCH is cv2.resize to the tensor's size. Sources are real photographs
(python3-skimage's) as they are and resized (INTER_CUBIC) to 1920x1080,
1280x720 and 320x240, plus odd crops; tensors 640x640, 333x517 (letterbox)
and 416x256, 224x224 (stretch); dtypes u8, f32, f16; formats bgr8, rgb8,
bgra8, gray8. Every tensor of exact mode must equal the reference in every
bit. YUV sources (NV12, I420, YUYV) are first converted to RGB8 as
protocol.h says; exact mode then equals the reference made from that RGB8
image (which ops_dump gives by an identity resize). As a check that the
comparison can fail, the float mode (the default) must differ from the
reference somewhere.

With --daemon and --cli, a frameprepd on the CPU backend is started and
the CLI's `send --rounding opencv` (inline and --shm, and a JPEG file the
daemon decodes) is compared the same way, so the option's path through the
wire and the backend's row bands is covered too.

Run with /usr/bin/python3 (Debian's python3-opencv and python3-numpy).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_opencv import letterbox_geometry, source_bytes  # noqa: E402

PHOTOS = ["astronaut.png", "rocket.jpg", "camera.png"]
SCALED = [(1920, 1080), (1280, 720), (320, 240)]
CROPS = [(1023, 767), (101, 37), (37, 101), (3, 2), (1, 1)]
LETTERBOX_OUT = [(640, 640), (333, 517)]
STRETCH_OUT = [(416, 256), (224, 224)]
IMAGENET = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


def opencv_image(img, ow, oh, stretch, pad):
    """The uint8 image OpenCV's pipeline makes of img (BGR or gray)."""
    h, w = img.shape[:2]
    if stretch:
        return cv2.resize(img, (ow, oh), interpolation=cv2.INTER_LINEAR)
    nw, nh, (top, bottom, left, right) = letterbox_geometry(w, h, ow, oh)
    if (w, h) != (nw, nh):
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    return cv2.copyMakeBorder(img, top, bottom, left, right,
                              cv2.BORDER_CONSTANT, value=(pad, pad, pad))


def tensor_of(img, order, dtype, layout, scale, mean, std):
    """The tensor numpy makes of a uint8 image (H x W x 3 BGR or H x W)."""
    if img.ndim == 2:
        chw = img[None] if order == "gray" else np.repeat(img[None], 3, 0)
    else:
        chw = (img[:, :, ::-1] if order == "rgb" else img).transpose(2, 0, 1)
    if dtype == "u8":
        t = chw
    else:
        n = len(chw)
        m = np.array(mean[:n], np.float32).reshape(n, 1, 1)
        s = np.array(std[:n], np.float32).reshape(n, 1, 1)
        t = (chw.astype(np.float32) * np.float32(scale) - m) / s
        if dtype == "f16":
            t = t.astype(np.float16)
    if layout == "nhwc":
        t = t.transpose(1, 2, 0)
    return np.ascontiguousarray(t)[None]


def differ(a, b):
    """(number of differing elements, largest difference in LSB of u8 or
    in 1/255 for floats), comparing floats by their bits."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return -1, float("inf")
    if a.dtype == np.uint8:
        d = np.abs(a.astype(int) - b.astype(int))
        return int((d > 0).sum()), float(d.max())
    bits = np.uint32 if a.dtype == np.float32 else np.uint16
    n = int((a.view(bits) != b.view(bits)).sum())
    return n, float(np.abs(a.astype(np.float64) - b).max() * 255)


class Case:
    """One tensor: the options and the expected tensor."""

    def __init__(self, what, opts, want, exact):
        self.what, self.opts, self.want = what, opts, want
        self.exact = exact


def variants(src_name, bgr, gray, outs, stretch, full):
    """The cases of one source image: (format, source bytes) -> cases."""
    rs = "stretch" if stretch else "letterbox"
    for ow, oh in outs:
        def case(order, dtype, layout, scale=1 / 255, mean=(0, 0, 0),
                 std=(1, 1, 1), pad=114.0, rounding="opencv", img=None):
            src = bgr if img is None else img
            ref = opencv_image(src, ow, oh, stretch, pad)
            want = tensor_of(ref, order, dtype, layout, scale, mean, std)
            opts = ["--size", "%dx%d" % (ow, oh), "--resize", rs,
                    "--order", order, "--dtype", dtype, "--layout", layout,
                    "--scale", repr(float(np.float32(scale))),
                    "--mean", ",".join(repr(float(v)) for v in mean),
                    "--std", ",".join(repr(float(v)) for v in std),
                    "--pad", repr(pad), "--rounding", rounding]
            what = "%s %s %dx%d %s %s %s %s" % (
                src_name, rs, ow, oh, order, dtype, layout, rounding)
            if mean != (0, 0, 0) or std != (1, 1, 1) or scale != 1 / 255:
                what += " scale %g mean %s std %s" % (scale, mean, std)
            if pad != 114.0:
                what += " pad %g" % pad
            return Case(what, opts, want, rounding == "opencv")
        yield "bgr8", case("rgb", "f32", "nchw")
        yield "bgr8", case("bgr", "u8", "nhwc")
        yield "rgb8", case("rgb", "f16", "nchw")
        yield "bgr8", case("rgb", "f32", "nchw", rounding="float")
        if gray is not None:
            yield "gray8", case("gray", "u8", "nchw", img=gray)
        if not full:
            continue
        yield "bgra8", case("bgr", "f32", "nhwc", mean=tuple(IMAGENET[0]),
                            std=tuple(IMAGENET[1]))
        yield "bgr8", case("rgb", "f32", "nchw", scale=1.0,
                           std=(255.0, 255.0, 255.0))
        yield "rgb8", case("bgr", "f16", "nhwc", mean=tuple(IMAGENET[0]),
                           std=tuple(IMAGENET[1]))
        yield "bgr8", case("rgb", "u8", "nchw", pad=100.5)
        yield "bgr8", case("rgb", "f32", "nchw", pad=0.5)
        if gray is not None:
            yield "gray8", case("rgb", "f32", "nchw", img=gray)


def yuv_bytes(bgr, fmt):
    """An NV12, I420 or YUYV frame of an even-sized BGR image (OpenCV's
    BT.601 limited-range conversion; any real YUV frame would do)."""
    h, w = bgr.shape[:2]
    if fmt == "yuyv":
        yuv = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV)
        out = np.empty((h, w * 2), np.uint8)
        out[:, 0::2] = yuv[:, :, 0]
        out[:, 1::4] = yuv[:, 0::2, 1]
        out[:, 3::4] = yuv[:, 0::2, 2]
        return out.tobytes()
    i420 = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420).reshape(-1)
    if fmt == "i420":
        return i420.tobytes()
    y, u, v = (i420[:w * h], i420[w * h:w * h * 5 // 4],
               i420[w * h * 5 // 4:])
    uv = np.empty(u.size * 2, np.uint8)
    uv[0::2], uv[1::2] = u, v
    return y.tobytes() + uv.tobytes()


class Runner:
    def __init__(self, ops_dump, tmp):
        self.ops_dump, self.tmp = ops_dump, tmp
        self.lines, self.cases = [], []
        self.failures, self.rows = [], []
        self.exact = self.float_differs = 0

    def add(self, raw_opts, rawfile, case):
        case.npy = os.path.join(self.tmp, "out%d.npy" % len(self.cases))
        self.lines.append(" ".join(raw_opts + case.opts + [rawfile,
                                                           case.npy]))
        self.cases.append(case)

    def run(self):
        p = subprocess.run([self.ops_dump, "--batch"],
                           input="\n".join(self.lines) + "\n", text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            sys.stderr.write(p.stderr)
        for c in self.cases:
            if not os.path.exists(c.npy):
                self.failures.append("%s: ops_dump wrote nothing" % c.what)
                continue
            self.judge(c, np.load(c.npy))
            os.unlink(c.npy)
        self.lines, self.cases = [], []

    def judge(self, c, got):
        n, m = differ(got, c.want)
        self.rows.append((c.what, n, m))
        if not c.exact:
            self.float_differs += n > 0
            return
        self.exact += 1
        if n != 0:
            self.failures.append("%s: %d elements differ, max %g" % (
                c.what, n, m))

    def identity(self, rawfile, raw_opts, w, h):
        """frameprep's RGB8 conversion of a YUV frame (BGR), through an
        identity stretch (source column x reads x alone)."""
        out = os.path.join(self.tmp, "conv.npy")
        subprocess.run([self.ops_dump] + raw_opts +
                       ["--size", "%dx%d" % (w, h), "--resize", "stretch",
                        "--order", "bgr", "--dtype", "u8", "--layout", "nhwc",
                        rawfile, out], check=True, stdout=subprocess.DEVNULL)
        return np.load(out)[0]


def sources(photo):
    """(name, bgr, gray, full): the photo, its rescaled versions, crops."""
    name = os.path.splitext(os.path.basename(photo))[0]
    raw = cv2.imread(photo, cv2.IMREAD_UNCHANGED)
    if raw.ndim == 2:
        gray = raw
        bgr = cv2.cvtColor(gray, cv2.COLOR_GRAY2BGR)
    else:
        bgr = cv2.imread(photo, cv2.IMREAD_COLOR)
        gray = None
    h, w = bgr.shape[:2]
    out = [("%s %dx%d" % (name, w, h), bgr, gray, True)]
    for sw, sh in SCALED:
        b = cv2.resize(bgr, (sw, sh), interpolation=cv2.INTER_CUBIC)
        g = None if gray is None else cv2.cvtColor(b, cv2.COLOR_BGR2GRAY)
        out.append(("%s %dx%d" % (name, sw, sh), b, g, True))
    big = out[1][1]
    for cw, ch in CROPS:
        x, y = (1920 - cw) // 3, (1080 - ch) // 2
        b = np.ascontiguousarray(big[y:y + ch, x:x + cw])
        g = None if gray is None else cv2.cvtColor(b, cv2.COLOR_BGR2GRAY)
        out.append(("%s %dx%d@%d,%d" % (name, cw, ch, x, y), b, g,
                    False))
    return out


def run_photos(r, images):
    for photo in PHOTOS:
        path = os.path.join(images, photo)
        if not os.path.exists(path):
            r.failures.append("%s: missing" % path)
            continue
        for src_name, bgr, gray, full in sources(path):
            h, w = bgr.shape[:2]
            written = {}
            for stretch, outs in ((False, LETTERBOX_OUT),
                                  (True, STRETCH_OUT)):
                for fmt, case in variants(src_name, bgr, gray, outs,
                                          stretch, full):
                    img = source_bytes(bgr, gray if gray is not None else
                                       cv2.cvtColor(bgr,
                                                    cv2.COLOR_BGR2GRAY), fmt)
                    if fmt not in written:
                        f = os.path.join(r.tmp, "src-%s.raw" % fmt)
                        img.tofile(f)
                        written[fmt] = f
                    r.add(["--raw", fmt, "%dx%d" % (w, h)], written[fmt],
                          case)
            r.run()


def run_yuv(r, images):
    """YUV frames: exact mode equals OpenCV's resize of the frame's RGB8
    conversion (the one frameprep documents)."""
    bgr0 = cv2.imread(os.path.join(images, "coffee.png"), cv2.IMREAD_COLOR)
    for sw, sh in [(1280, 720), (102, 58)]:
        bgr = cv2.resize(bgr0, (sw, sh), interpolation=cv2.INTER_CUBIC)
        for fmt in ("nv12", "i420", "yuyv"):
            f = os.path.join(r.tmp, "yuv-%s.raw" % fmt)
            with open(f, "wb") as fh:
                fh.write(yuv_bytes(bgr, fmt))
            raw_opts = ["--raw", fmt, "%dx%d" % (sw, sh)]
            conv = r.identity(f, raw_opts, sw, sh)
            name = "coffee %dx%d %s" % (sw, sh, fmt)
            for fmt2, case in variants(name, conv, None, [(640, 640)],
                                       False, False):
                if fmt2 == "bgr8":
                    r.add(raw_opts, f, case)
            for fmt2, case in variants(name, conv, None, [(224, 224)],
                                       True, False):
                if fmt2 == "bgr8":
                    r.add(raw_opts, f, case)
            r.run()


def run_daemon(r, args, images):
    """The CLI's --rounding opencv through a CPU-backend daemon."""
    sock = os.path.join(r.tmp, "d.sock")
    url = "ipc://" + sock
    log = open(os.path.join(r.tmp, "d.log"), "wb")
    d = subprocess.Popen([args.daemon, "--device", "cpu", "--listen", url,
                          "--workers", "3"], stdout=log,
                         stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if subprocess.run([args.cli, "info", "--socket", url],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                break
            time.sleep(0.1)
        else:
            r.failures.append("frameprepd did not answer INFO")
            return
        for photo in ("motorcycle_left.png",):
            path = os.path.join(images, photo)
            bgr = cv2.imread(path, cv2.IMREAD_COLOR)
            for opts, stretch, size, dtype in (
                    ([], False, (640, 640), "f32"),
                    (["--dtype", "u8", "--layout", "nhwc"], False,
                     (333, 517), "u8"),
                    (["--resize", "stretch", "--dtype", "f16"], True,
                     (416, 256), "f16")):
                layout = "nhwc" if "nhwc" in opts else "nchw"
                ref = opencv_image(bgr, size[0], size[1], stretch, 114)
                want = tensor_of(ref, "rgb", dtype, layout, 1 / 255,
                                 (0, 0, 0), (1, 1, 1))
                for shm in ([], ["--shm"]):
                    out = os.path.join(r.tmp, "cli.npy")
                    p = subprocess.run(
                        [args.cli, "send", path, "--socket", url,
                         "--size", "%dx%d" % size, "--rounding", "opencv",
                         "-o", out] + opts + shm,
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True)
                    what = "daemon %s %s %s%s" % (
                        photo, " ".join(opts), "%dx%d" % size,
                        " --shm" if shm else "")
                    if p.returncode != 0:
                        r.failures.append("%s: %s" % (what, p.stderr))
                        continue
                    r.exact += 1
                    n, m = differ(np.load(out), want)
                    r.rows.append((what, n, m))
                    if n:
                        r.failures.append("%s: %d differ, max %g" % (
                            what, n, m))
        # A JPEG file decoded by the daemon (as cv2.imdecode decodes it),
        # then resized exactly.
        path = os.path.join(images, "rocket.jpg")
        out = os.path.join(r.tmp, "cli.npy")
        want = tensor_of(opencv_image(cv2.imread(path, cv2.IMREAD_COLOR),
                                      640, 640, False, 114), "rgb", "f32",
                         "nchw", 1 / 255, (0, 0, 0), (1, 1, 1))
        p = subprocess.run([args.cli, "send", path, "--socket", url,
                            "--jpeg", "--rounding", "opencv", "-o", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        if p.returncode != 0:
            r.failures.append("daemon rocket.jpg --jpeg: %s" % p.stderr)
        else:
            r.exact += 1
            n, m = differ(np.load(out), want)
            r.rows.append(("daemon rocket.jpg --jpeg 640x640", n, m))
            if n:
                r.failures.append("daemon rocket.jpg --jpeg: %d differ, "
                                  "max %g" % (n, m))
        p = subprocess.run([args.cli, "send", os.path.join(
            images, "astronaut.png"), "--socket", url, "--rounding",
            "nearest"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        r.rows.append(("CLI --rounding nearest: exit %d" % p.returncode,
                       0, 0))
        if p.returncode != 2:
            r.failures.append("--rounding nearest: exit %d, not 2" %
                              p.returncode)
    finally:
        d.terminate()
        d.wait(10)
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops-dump", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--daemon", help="frameprepd: also test through it")
    ap.add_argument("--cli", help="the frameprep CLI (with --daemon)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fprep-exact-", dir="/dev/shm" if
                           os.path.isdir("/dev/shm") else None)
    r = Runner(args.ops_dump, tmp)
    t0 = time.monotonic()
    try:
        run_photos(r, args.images)
        run_yuv(r, args.images)
        if args.daemon and args.cli:
            run_daemon(r, args, args.images)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for what, n, m in r.rows:
        print("%-100s differ %7d max %.4g" % (what, n, m))
    print("%d exact-mode tensors: %d equal OpenCV bit for bit; float mode "
          "differs from OpenCV in %d tensors (%.1f s)" % (
              r.exact, r.exact - len(r.failures), r.float_differs,
              time.monotonic() - t0))
    if r.float_differs == 0:
        r.failures.append("float mode never differs from OpenCV: the "
                          "comparison cannot tell the modes apart")
    for f in r.failures[:50]:
        print("FAIL " + f)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
