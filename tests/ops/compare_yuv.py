#!/usr/bin/python3
"""Compare frameprep's CPU preprocessing of YUV frames with references.

Real photographs are converted to NV12, I420 and YUYV (4:2:0 / 4:2:2
chroma taken as the mean of each block), sent through ops_dump
(fprep_preprocess_cpu), and the tensor is compared with:

- BT.601 limited range: OpenCV's cvtColor (COLOR_YUV2BGR_NV12, _I420,
  _YUY2), then the reference letterbox (frameprep's CPU op on that RGB8
  image, itself checked against cv2.resize + cv2.copyMakeBorder by
  compare_opencv.py): within 1 LSB;
- every matrix (BT.601, BT.709, BT.2020) and range: a float64 conversion
  written here from the ITU-R equations (BT.601-7, BT.709-6, BT.2020-2),
  then the same letterbox: within 1 LSB;
- with --ffmpeg, FFmpeg's own conversion (swscale, point chroma
  upsampling) of the same bytes, then the same letterbox: mean absolute
  difference at most 0.5 LSB.

Dark frames (a photograph's luma squeezed into codes 0..47, a third below
16, as video leaves them) are compared with OpenCV and the float64
reference in BT.601 limited range: codes below 16 are black in both
(--dark-only: only those).

Frames are sent with padded planes (strides and plane offsets with gaps
filled with 0xA5) as well as unpadded ones, and odd sizes must be refused.
Prints one row per case and exits 1 on any failure. Run with
/usr/bin/python3 (Debian's python3-opencv and python3-numpy).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import cv2
import numpy as np

FORMATS = ["nv12", "i420", "yuyv"]
MATRICES = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722),
            "bt2020": (0.2627, 0.0593)}
RANGES = ["limited", "full"]
OPENCV_CODES = {"nv12": cv2.COLOR_YUV2BGR_NV12, "i420": cv2.COLOR_YUV2BGR_I420,
                "yuyv": cv2.COLOR_YUV2BGR_YUY2}
FFMPEG_PIX = {"nv12": "nv12", "i420": "yuv420p", "yuyv": "yuyv422"}
FFMPEG_MATRIX = {"bt601": "bt601", "bt709": "bt709", "bt2020": "bt2020"}
OUT_SIZES = [(640, 640), (333, 517)]
# 1 LSB in 1/255 units of the F32 tensor (plus float rounding).
TOL = 1.0 + 1e-4
MAD_TOL = 0.5
PAD = 0xA5


def coefs(matrix, rng):
    """(y offset, y scale, c scale, Kr, Kb) of the ITU-R equations."""
    kr, kb = MATRICES[matrix]
    if rng == "limited":
        return 16.0, 255.0 / 219.0, 255.0 / 224.0, kr, kb
    return 0.0, 1.0, 1.0, kr, kb


def rgb_to_yuv444(rgb, matrix, rng):
    """The forward conversion the frameprep CLI documents (tool_yuv.c), in
    float64 and not yet quantised: Y, U, V planes at full resolution."""
    yo, ys, cs, kr, kb = coefs(matrix, rng)
    kg = 1.0 - kr - kb
    r, g, b = [rgb[:, :, i].astype(np.float64) / 255.0 for i in range(3)]
    y = kr * r + kg * g + kb * b
    cb = (b - y) / (2.0 * (1.0 - kb))
    cr = (r - y) / (2.0 * (1.0 - kr))
    return y * 255.0 / ys + yo, cb * 255.0 / cs + 128.0, cr * 255.0 / cs + 128.0


def quantise(p):
    """Rounded half up, saturated to uint8."""
    return np.clip(np.floor(p + 0.5), 0, 255).astype(np.uint8)


def yuv444_to_rgb(Y, U, V, matrix, rng):
    """The ITU-R equations in float64: RGB uint8, rounded half up. Luma
    codes below the range's black (16, limited) are black, as protocol.h
    says and OpenCV's cvtColor does."""
    yo, ys, cs, kr, kb = coefs(matrix, rng)
    kg = 1.0 - kr - kb
    y = np.maximum(Y.astype(np.float64) - yo, 0.0) * ys
    u = (U.astype(np.float64) - 128.0) * cs
    v = (V.astype(np.float64) - 128.0) * cs
    r = y + 2.0 * (1.0 - kr) * v
    g = y - 2.0 * kb * (1.0 - kb) / kg * u - 2.0 * kr * (1.0 - kr) / kg * v
    b = y + 2.0 * (1.0 - kb) * u
    return quantise(np.stack([r, g, b], axis=2))


class Frame:
    """A YUV frame: the planes (Y full size, U and V the mean of each
    block, as the frameprep CLI makes them), their byte layout in a buffer
    (optionally padded), and the buffer."""

    def __init__(self, rgb, fmt, matrix, rng, padded):
        h, w = rgb.shape[:2]
        Y, U, V = rgb_to_yuv444(rgb, matrix, rng)
        if fmt == "yuyv":
            U = U.reshape(h, w // 2, 2).mean(axis=2)
            V = V.reshape(h, w // 2, 2).mean(axis=2)
        else:
            U = U.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))
            V = V.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))
        self.Y, self.U, self.V = quantise(Y), quantise(U), quantise(V)
        self.fmt, self.w, self.h = fmt, w, h
        self.layout(padded)

    @classmethod
    def dark(cls, rgb, fmt, padded):
        """A dark frame made from a photograph, as a camera at night sends
        it: BT.601 limited-range chroma of the photo, its luma squeezed
        into codes 0..47 (a third of them below 16, "blacker than black",
        which encoders and sensors leave in real video)."""
        frame = cls(rgb, fmt, "bt601", "limited", padded)
        frame.Y = (frame.Y.astype(np.uint16) * 48 // 256).astype(np.uint8)
        frame.layout(padded)
        return frame

    def layout(self, padded):
        w, h, fmt = self.w, self.h, self.fmt
        gap = 64 if padded else 0
        if fmt == "yuyv":
            self.stride = 2 * w + gap
            rows = np.zeros((h, 2 * w), np.uint8)
            rows[:, 0::2] = self.Y
            rows[:, 1::4] = self.U
            rows[:, 3::4] = self.V
            buf = np.full((h, self.stride), PAD, np.uint8)
            buf[:, :2 * w] = rows
            self.buf = buf.reshape(-1)
            self.uoff = self.voff = self.uvstride = 0
            return
        self.stride = w + gap
        ch = h // 2
        crow = w if fmt == "nv12" else w // 2
        self.uvstride = crow + gap // 2
        # Decoders pad the Y plane's height too (1080 rows stored as 1088).
        yrows = h + (8 if padded else 0)
        self.uoff = self.stride * yrows + gap
        cbytes = self.uvstride * ch
        self.voff = self.uoff + cbytes + gap if fmt == "i420" else 0
        size = (self.voff or self.uoff) + cbytes + gap
        buf = np.full(size, PAD, np.uint8)
        ys = buf[:self.stride * h].reshape(h, self.stride)
        ys[:, :w] = self.Y
        up = buf[self.uoff:self.uoff + cbytes].reshape(ch, self.uvstride)
        if fmt == "nv12":
            up[:, 0:w:2] = self.U
            up[:, 1:w:2] = self.V
        else:
            up[:, :crow] = self.U
            vp = buf[self.voff:self.voff + cbytes].reshape(ch, self.uvstride)
            vp[:, :crow] = self.V
        self.buf = buf

    def opencv_bytes(self):
        """The unpadded layout OpenCV's cvtColor takes."""
        if self.fmt == "yuyv":
            rows = np.zeros((self.h, self.w, 2), np.uint8)
            rows[:, :, 0] = self.Y
            rows[:, 0::2, 1] = self.U
            rows[:, 1::2, 1] = self.V
            return rows
        if self.fmt == "nv12":
            uv = np.stack([self.U, self.V], axis=2).reshape(self.h // 2,
                                                            self.w)
            return np.concatenate([self.Y, uv])
        flat = np.concatenate([self.Y.reshape(-1), self.U.reshape(-1),
                               self.V.reshape(-1)])
        return flat.reshape(self.h * 3 // 2, self.w)

    def packed_bytes(self):
        """The unpadded frame as FFmpeg's rawvideo reads it."""
        return self.opencv_bytes().tobytes()

    def upsampled(self):
        """Y, U, V at full resolution, each block sharing its sample."""
        if self.fmt == "yuyv":
            return (self.Y, np.repeat(self.U, 2, axis=1),
                    np.repeat(self.V, 2, axis=1))
        up = lambda p: np.repeat(np.repeat(p, 2, axis=0), 2, axis=1)
        return self.Y, up(self.U), up(self.V)

    def dump_args(self):
        return ["--raw", self.fmt, "%dx%d+%d" % (self.w, self.h, self.stride),
                "--planes", "%d,%d,%d,%d" % (self.uoff, self.voff,
                                             self.uvstride, self.buf.size)]


def ffmpeg_rgb(frame, matrix, rng, tmp):
    """FFmpeg's conversion of the frame to RGB24 (point chroma upsampling,
    accurate rounding), or None when ffmpeg is missing or fails."""
    src = os.path.join(tmp, "ff.yuv")
    dst = os.path.join(tmp, "ff.rgb")
    with open(src, "wb") as f:
        f.write(frame.packed_bytes())
    vf = ("scale=in_color_matrix=%s:in_range=%s:out_range=full:"
          "flags=neighbor+accurate_rnd+full_chroma_int+bitexact" % (
              FFMPEG_MATRIX[matrix], "tv" if rng == "limited" else "pc"))
    cmd = ["ffmpeg", "-loglevel", "error", "-y", "-f", "rawvideo",
           "-pix_fmt", FFMPEG_PIX[frame.fmt], "-s",
           "%dx%d" % (frame.w, frame.h), "-i", src, "-vf", vf,
           "-pix_fmt", "rgb24", "-f", "rawvideo", dst]
    try:
        subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as e:
        print("ffmpeg failed: %s" % e)
        return None
    out = np.fromfile(dst, np.uint8)
    if out.size != frame.w * frame.h * 3:
        return None
    return out.reshape(frame.h, frame.w, 3)


def check_cli(cli, path, rgb, r):
    """`frameprep request IMAGE --format F` writes the frame its
    documentation describes: byte for byte (up to 1 where float64 rounding
    in another order lands on the other side of .5) the Frame made here from
    the same documented equations."""
    for fmt in FORMATS:
        for matrix in MATRICES:
            for rng in RANGES:
                req = os.path.join(r.tmp, "req.bin")
                p = subprocess.run([cli, "request", path, "--format", fmt,
                                    "--matrix", matrix, "--range", rng,
                                    "-o", req], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
                what = "CLI %s %s %s %s" % (os.path.basename(path), fmt,
                                            matrix, rng)
                if p.returncode != 0:
                    r.failures.append("%s: %s" % (what, p.stderr.strip()))
                    continue
                got = np.fromfile(req, np.uint8)[128:]
                h, w = rgb.shape[:2]
                even = rgb[:h if fmt == "yuyv" else h // 2 * 2, :w // 2 * 2]
                want = Frame(even, fmt, matrix, rng, False).packed_bytes()
                want = np.frombuffer(want, np.uint8)
                if got.size != want.size:
                    r.failures.append("%s: %d bytes, expected %d" % (
                        what, got.size, want.size))
                    continue
                d = np.abs(got.astype(int) - want.astype(int))
                ok = d.max() <= 1 and (d > 0).mean() < 1e-3
                print("%-60s max %d differ %.6f %s" % (
                    what, d.max(), (d > 0).mean(), "ok" if ok else "FAIL"))
                if not ok:
                    r.failures.append("%s: max %d" % (what, d.max()))


class Runner:
    def __init__(self, ops_dump, tmp):
        self.ops_dump, self.tmp, self.n = ops_dump, tmp, 0
        self.failures = []

    def run(self, frame, matrix, rng, out, extra=()):
        """The F32 NCHW RGB tensor ops_dump makes of frame, or None (and the
        error text) when it refuses."""
        self.n += 1
        raw = os.path.join(self.tmp, "in%d.raw" % self.n)
        npy = os.path.join(self.tmp, "out%d.npy" % self.n)
        frame.buf.tofile(raw)
        cmd = [self.ops_dump] + frame.dump_args() + [
            "--matrix", matrix, "--range", rng, "--size", "%dx%d" % out,
            "--dtype", "f32", "--order", "rgb"] + list(extra) + [raw, npy]
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        os.unlink(raw)
        if p.returncode != 0:
            return None, p.stderr.strip()
        t = np.load(npy)[0]
        os.unlink(npy)
        return t, ""

    def reference(self, rgb, out):
        """The reference letterbox (the CPU op on an RGB8 source, which
        ops_vs_opencv checks against OpenCV) of an RGB uint8 image: as the
        resize is linear with positive weights summing to 1, a difference
        of at most 1 between converted pixels stays at most 1 in the
        tensor, without rounding of its own."""
        self.n += 1
        raw = os.path.join(self.tmp, "ref%d.raw" % self.n)
        npy = os.path.join(self.tmp, "ref%d.npy" % self.n)
        np.ascontiguousarray(rgb).tofile(raw)
        h, w = rgb.shape[:2]
        subprocess.run([self.ops_dump, "--raw", "rgb8", "%dx%d" % (w, h),
                        "--size", "%dx%d" % out, "--dtype", "f32", "--order",
                        "rgb", raw, npy], check=True, stdout=subprocess.PIPE)
        os.unlink(raw)
        t = np.load(npy)[0]
        os.unlink(npy)
        return t

    def check(self, what, t, ref_bgr, bound, mad_bound=None):
        """Compares tensor t with the reference letterbox of ref_bgr (BGR
        uint8)."""
        if t is None:
            self.failures.append("%s: ops_dump refused the frame" % what)
            print("%-60s REFUSED" % what)
            return
        ow, oh = t.shape[2], t.shape[1]
        ref = self.reference(ref_bgr[:, :, ::-1], (ow, oh)) * 255.0
        d = np.abs(t.astype(np.float64) * 255.0 - ref.astype(np.float64))
        mx, mad = float(d.max()), float(d.mean())
        ok = mx <= bound if mad_bound is None else mad <= mad_bound
        print("%-60s max %.4f mad %.4f %s" % (what, mx, mad,
                                              "ok" if ok else "FAIL"))
        if not ok:
            self.failures.append("%s: max %.4f mad %.4f" % (what, mx, mad))


def photos(images, only):
    names = sorted(f for f in os.listdir(images)
                   if f.endswith((".png", ".jpg")))
    out = []
    for n in names:
        name = os.path.splitext(n)[0]
        if only and name not in only:
            continue
        img = cv2.imread(os.path.join(images, n), cv2.IMREAD_COLOR)
        if img is None:
            continue
        h, w = img.shape[:2]
        # Even sizes, and an odd crop offset so chroma blocks move.
        out.append((name, os.path.join(images, n),
                    img[1:1 + (h - 1) // 2 * 2, 1:1 + (w - 1) // 2 * 2]))
    return out


def check_dark(r, name, rgb):
    """Dark frames (luma below 16) of each format against OpenCV's cvtColor
    and the float64 reference: within 1 LSB."""
    for fmt in FORMATS:
        for padded in (False, True):
            frame = Frame.dark(rgb, fmt, padded)
            tag = "%s %dx%d %s dark (Y %d..%d)%s" % (
                name, frame.w, frame.h, fmt, frame.Y.min(), frame.Y.max(),
                " padded" if padded else "")
            below = float((frame.Y < 16).mean())
            if below < 0.1:
                r.failures.append("%s: only %.1f%% of Y below 16" % (
                    tag, 100 * below))
            cv = cv2.cvtColor(frame.opencv_bytes(), OPENCV_CODES[fmt])
            ref = yuv444_to_rgb(*frame.upsampled(), "bt601",
                                "limited")[:, :, ::-1]
            for out in OUT_SIZES:
                t, _ = r.run(frame, "bt601", "limited", out)
                r.check("%s -> %dx%d vs OpenCV" % (tag, *out), t, cv, TOL)
                r.check("%s -> %dx%d vs ITU float64" % (tag, *out), t,
                        ref, TOL)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops-dump", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--only", default="astronaut,coffee,chelsea,rocket",
                    help="comma-separated image names ('' for all)")
    ap.add_argument("--cli", help="the frameprep CLI: check its "
                    "conversion of the photos")
    ap.add_argument("--ffmpeg", action="store_true",
                    help="cross-check against FFmpeg's conversion")
    ap.add_argument("--dark-only", action="store_true",
                    help="only the dark frames (luma below 16) against "
                    "OpenCV")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    pics = photos(args.images, only)
    if not pics:
        print("no images in %s" % args.images)
        return 1
    if args.ffmpeg and shutil.which("ffmpeg") is None:
        print("ffmpeg not found")
        return 1
    tmp = tempfile.mkdtemp(prefix="fprep-yuv-")
    r = Runner(args.ops_dump, tmp)
    try:
        for name, path, bgr in pics:
            rgb = bgr[:, :, ::-1]
            check_dark(r, name, rgb)
            if args.dark_only:
                continue
            # PNG only: JPEG decoders (stb_image, libjpeg) differ.
            if args.cli and path.endswith(".png"):
                check_cli(args.cli, path,
                          cv2.imread(path, cv2.IMREAD_COLOR)[:, :, ::-1], r)
            for fmt in FORMATS:
                for matrix in MATRICES:
                    for rng in RANGES:
                        for padded in (False, True):
                            frame = Frame(rgb, fmt, matrix, rng, padded)
                            tag = "%s %dx%d %s %s %s%s" % (
                                name, frame.w, frame.h, fmt, matrix, rng,
                                " padded" if padded else "")
                            ref = yuv444_to_rgb(*frame.upsampled(), matrix,
                                                rng)[:, :, ::-1]
                            for out in OUT_SIZES if not padded else [(640,
                                                                      640)]:
                                t, _ = r.run(frame, matrix, rng, out)
                                r.check("%s -> %dx%d vs ITU float64" % (
                                    tag, *out), t, ref, TOL)
                                if matrix == "bt601" and rng == "limited":
                                    cv = cv2.cvtColor(frame.opencv_bytes(),
                                                      OPENCV_CODES[fmt])
                                    r.check("%s -> %dx%d vs OpenCV" % (
                                        tag, *out), t, cv, TOL)
                                if args.ffmpeg and not padded:
                                    ff = ffmpeg_rgb(frame, matrix, rng, tmp)
                                    if ff is None:
                                        r.failures.append("ffmpeg failed")
                                        continue
                                    r.check("%s -> %dx%d vs FFmpeg" % (
                                        tag, *out), t, ff[:, :, ::-1],
                                        None, MAD_TOL)
            # Odd sizes are refused, naming the field.
            for fmt, (dw, dh) in (("nv12", (1, 0)), ("nv12", (0, 1)),
                                  ("i420", (1, 0)), ("i420", (0, 1)),
                                  ("yuyv", (1, 0))):
                odd = Frame(rgb, fmt, "bt601", "limited", False)
                odd.w, odd.h = odd.w - dw, odd.h - dh
                t, err = r.run(odd, "bt601", "limited", (640, 640))
                field = "src_width" if dw else "src_height"
                ok = t is None and field in err and "odd" in err
                print("%-60s %s" % ("%s %s %dx%d refused" % (
                    name, fmt, odd.w, odd.h), "ok: " + err if ok else "FAIL"))
                if not ok:
                    r.failures.append("%s %dx%d was not refused naming %s "
                                      "(%r)" % (fmt, odd.w, odd.h, field, err))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d runs, %d failures" % (r.n, len(r.failures)))
    for f in r.failures[:50]:
        print("FAIL " + f)
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
