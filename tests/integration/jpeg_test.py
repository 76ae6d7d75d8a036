#!/usr/bin/python3
"""jpeg_test.py: JPEG source frames through frameprepd (CPU backend).

jpeg_frames: real photographs (the .jpg files of Debian's python3-skimage,
and its PNGs re-encoded by encoders nobody here wrote: OpenCV's libjpeg at
quality 90, 4:2:0, grayscale, progressive, with restart markers; ffmpeg's
mjpeg at 4:2:2 and 4:4:4) are sent undecoded with `frameprep send --jpeg`
and each tensor is compared with cv2.imdecode + the OpenCV letterbox
(Ultralytics convention): within 1 LSB, in BGR, RGB and GRAY, U8 and F32,
inline and through shared memory; the reply's decoded size must be the
JPEG's.

jpeg_errors: a decompression bomb (a real JPEG whose SOF says 65535x65535,
and one within the width and height limits but not max_frame_bytes), a
truncated, a corrupt, a CMYK (made by libjpeg-turbo's own encoder), a
zero-length JPEG and a size on the wire that is not the header's are each
answered with the named error; the daemon answers INFO after each, and
its RSS stays flat over 50 rounds of them.

Usage: jpeg_test.py TEST --daemon PATH --cli PATH --images DIR
"""
import ctypes
import os
import struct
import subprocess
import sys

import cv2
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_test as dt  # noqa: E402
import fpwire  # noqa: E402
from daemon_test import Fail, check  # noqa: E402

PIX_JPEG = 9
PNGS = ["astronaut.png", "coffee.png", "chelsea.png", "camera.png",
        "motorcycle_left.png"]
JPGS = ["rocket.jpg", "retina.jpg", "hubble_deep_field.jpg"]
PAD = 114


# The Ultralytics letterbox of an image with OpenCV (pad PAD).
letterbox_ref = dt.letterbox_img


def ffmpeg_jpeg(png, pix_fmt, out):
    """png re-encoded by ffmpeg's mjpeg encoder (pix_fmt yuvj422p: 4:2:2,
    yuvj444p: 4:4:4), at about quality 90."""
    r = subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", png,
                        "-pix_fmt", pix_fmt, "-q:v", "2", "-frames:v", "1",
                        out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    check(r.returncode == 0, f"ffmpeg {pix_fmt}: {r.stderr.decode()}")
    return open(out, "rb").read()


def sof(data):
    """(offset of the SOF segment's height field, chroma subsampling: "gray",
    "4:4:4", "4:2:2", "4:2:0" or the factors) of a JPEG, read from its
    markers."""
    i = 2
    while i + 4 <= len(data):
        check(data[i] == 0xFF, f"no marker at {i}")
        m = data[i + 1]
        n = struct.unpack(">H", data[i + 2:i + 4])[0]
        if m in (0xC0, 0xC1, 0xC2):
            nc = data[i + 9]
            samp = [data[i + 11 + 3 * k] for k in range(nc)]
            if nc == 1:
                return i + 5, "gray"
            # Luma's factors over chroma's, horizontally and vertically.
            hv = ((samp[0] >> 4) // (samp[1] >> 4),
                  (samp[0] & 15) // (samp[1] & 15))
            return i + 5, {(1, 1): "4:4:4", (2, 1): "4:2:2",
                           (2, 2): "4:2:0"}.get(hv, str(samp))
        i += 2 + n
    raise Fail("no SOF marker")


def samples(tmp, images_dir):
    """Yields (name, JPEG bytes): the photographs' own JPEGs, and PNGs
    re-encoded every way listed in the module's comment."""
    for n in JPGS:
        p = os.path.join(images_dir, n)
        if os.path.exists(p):
            yield n, open(p, "rb").read()
    # FPREP_JPEG_QUICK=1 (the ThreadSanitizer build, where each frame
    # costs ~10x): one PNG's six encodings, which still cover every
    # sampling; the other builds send all of them.
    names = PNGS[:1] if os.environ.get("FPREP_JPEG_QUICK") == "1" else PNGS
    pngs = [os.path.join(images_dir, n) for n in names
            if os.path.exists(os.path.join(images_dir, n))]
    check(pngs, f"no test images ({', '.join(PNGS)}) in {images_dir}")
    for p in pngs:
        base = os.path.basename(p)[:-4]
        img = cv2.imread(p, cv2.IMREAD_COLOR)
        q90 = [cv2.IMWRITE_JPEG_QUALITY, 90]
        yield base + ".q90-420", cv2.imencode(".jpg", img, q90)[1].tobytes()
        yield base + ".q90-gray", cv2.imencode(
            ".jpg", cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), q90)[1].tobytes()
        yield base + ".q90-progressive", cv2.imencode(
            ".jpg", img, q90 + [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
        yield base + ".q90-restart", cv2.imencode(
            ".jpg", img, q90 + [cv2.IMWRITE_JPEG_RST_INTERVAL, 4])[1].tobytes()
        yield base + ".q75-422", ffmpeg_jpeg(
            p, "yuvj422p", os.path.join(tmp, base + ".422.jpg"))
        yield base + ".q75-444", ffmpeg_jpeg(
            p, "yuvj444p", os.path.join(tmp, base + ".444.jpg"))


def send(d, path, out, *opts):
    r = dt.cli("send", path, "--jpeg", "--socket", d.url, "-o", out, *opts)
    return r.stdout.decode(), np.load(out)


def test_jpeg_frames(tmp):
    d = dt.Daemon(tmp)
    worst = decode_worst = 0.0
    kinds = set()
    try:
        for name, data in samples(tmp, dt.ARGS.images):
            path = os.path.join(tmp, name + ".jpg")
            open(path, "wb").write(data)
            _, samp = sof(data)
            kinds.add(samp)
            bgr = cv2.imdecode(np.frombuffer(data, np.uint8),
                               cv2.IMREAD_COLOR)
            gray = cv2.imdecode(np.frombuffer(data, np.uint8),
                                cv2.IMREAD_GRAYSCALE)
            h, w = bgr.shape[:2]
            out = os.path.join(tmp, "t.npy")
            line = []
            # The tensor at the frame's own size (no resize): the decode
            # alone against cv2.imdecode.
            _, t = send(d, path, out, "--size", f"{w}x{h}", "--dtype", "u8",
                        "--layout", "nhwc", "--order", "bgr")
            diff = np.abs(t[0].astype(int) - bgr.astype(int))
            check(diff.max() <= 1, f"{name}: the decode is {diff.max()} LSB "
                                   f"from cv2.imdecode")
            decode_worst = max(decode_worst, float(diff.max()))
            line.append(f"decode max {diff.max()} mean {diff.mean():.4f}")
            for (ow, oh) in ((640, 640), (320, 256)):
                # U8 NHWC BGR: the pixels themselves.
                text, t = send(d, path, out, "--size", f"{ow}x{oh}",
                               "--dtype", "u8", "--layout", "nhwc",
                               "--order", "bgr")
                check(f"decoded   JPEG {w}x{h}" in text,
                      f"{name}: the reply's decoded size is not {w}x{h}:\n"
                      f"{text}")
                ref = letterbox_ref(bgr, ow, oh)
                diff = np.abs(t[0].astype(int) - ref.astype(int))
                check(diff.max() <= 1,
                      f"{name} {ow}x{oh} BGR: {diff.max()} LSB from "
                      f"cv2.imdecode + letterbox at "
                      f"{np.unravel_index(diff.argmax(), diff.shape)}")
                worst = max(worst, float(diff.max()))
                line.append(f"bgr {ow}x{oh} max {diff.max()} mean "
                            f"{diff.mean():.4f}")
            # F32 NCHW RGB (the defaults), inline and through shm.
            _, t = send(d, path, out, "--size", "640x640")
            ref = letterbox_ref(bgr, 640, 640)[:, :, ::-1].transpose(2, 0, 1)
            diff = np.abs(t[0].astype(np.float64) * 255 - ref)
            check(diff.max() <= 1 + 1e-3,
                  f"{name} RGB f32: {diff.max():.3f} LSB from OpenCV")
            _, t2 = send(d, path, os.path.join(tmp, "s.npy"), "--size",
                         "640x640", "--shm")
            check(np.array_equal(t, t2), f"{name}: shm differs from inline")
            line.append(f"rgb f32 max {diff.max():.3f}")
            # GRAY: the luma, as cv2.IMREAD_GRAYSCALE decodes it.
            _, t = send(d, path, out, "--size", "640x640", "--dtype", "u8",
                        "--order", "gray")
            diff = np.abs(t[0, 0].astype(int) -
                          letterbox_ref(gray, 640, 640).astype(int))
            check(diff.max() <= 1,
                  f"{name} GRAY: {diff.max()} LSB from OpenCV")
            worst = max(worst, float(diff.max()))
            line.append(f"gray max {diff.max()}")
            print(f"ok {name} {w}x{h} sampling {samp}: " + ", ".join(line))
        # 4:2:0, 4:2:2, 4:4:4 and grayscale were all seen.
        for s in ("4:2:0", "4:2:2", "4:4:4", "gray"):
            check(s in kinds, f"no sample with sampling {s}")
        print(f"worst difference from cv2.imdecode: {decode_worst} LSB; "
              f"from cv2.imdecode + letterbox: {worst} LSB")
        check(d.alive(), "frameprepd died")
    finally:
        d.stop()


def cmyk_jpeg():
    """A 16x16 CMYK JPEG written by libjpeg-turbo's own encoder (OpenCV
    and ffmpeg write none)."""
    tj = ctypes.CDLL("libturbojpeg.so.0")
    tj.tjInitCompress.restype = ctypes.c_void_p
    tj.tjCompress2.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
        ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_ulong), ctypes.c_int, ctypes.c_int,
        ctypes.c_int]
    tj.tjFree.argtypes = [ctypes.c_void_p]
    tj.tjDestroy.argtypes = [ctypes.c_void_p]
    h = tj.tjInitCompress()
    px = bytes((i * 37) & 255 for i in range(16 * 16 * 4))
    buf, size = ctypes.c_void_p(), ctypes.c_ulong()
    TJPF_CMYK, TJSAMP_444 = 11, 0
    rc = tj.tjCompress2(h, px, 16, 0, 16, TJPF_CMYK, ctypes.byref(buf),
                        ctypes.byref(size), TJSAMP_444, 90, 0)
    check(rc == 0, "tjCompress2 of a CMYK image failed")
    data = ctypes.string_at(buf, size.value)
    tj.tjFree(buf)
    tj.tjDestroy(h)
    return data


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def sanitized(pid):
    """True when the process runs with a sanitizer's runtime."""
    with open(f"/proc/{pid}/maps") as f:
        return any("libasan" in line or "libtsan" in line for line in f)


def jpeg_request(data, width=0, height=0):
    return fpwire.request(src_format=PIX_JPEG, width=width, height=height,
                          stride=0, input_size=len(data), payload=data)


def test_jpeg_errors(tmp):
    d = dt.Daemon(tmp)
    try:
        img = cv2.imread(os.path.join(dt.ARGS.images, "astronaut.png"))
        check(img is not None, "no astronaut.png in the images")
        good = cv2.imencode(".jpg", img)[1].tobytes()
        at, _ = sof(good)

        def resized(w, h):
            return good[:at] + struct.pack(">HH", h, w) + good[at + 4:]
        scan = good.index(b"\xff\xda")
        cases = [
            ("bomb 65535x65535", resized(65535, 65535), 0, 0, "ELIMIT",
             "exceeds max_width 8192"),
            ("bomb 8000x8000", resized(8000, 8000), 0, 0, "ELIMIT",
             "exceeds max_frame_bytes"),
            ("truncated", good[:len(good) // 2], 0, 0, "EINVAL",
             "Premature end of JPEG file"),
            ("corrupt", good[:scan + 400] + b"\xff\xd3" * 8 +
             good[scan + 416:], 0, 0, "EINVAL", "Corrupt JPEG data"),
            ("not a JPEG", b"\x89PNG" + bytes(300), 0, 0, "EINVAL",
             "JPEG header:"),
            ("bad marker", b"\xff\xd8\xff\x9a" + bytes(300), 0, 0, "EINVAL",
             "JPEG header: Unsupported marker type 0x9a"),
            ("CMYK", cmyk_jpeg(), 0, 0, "EINVAL", "colour space YCCK"),
            ("zero-length", b"", 0, 0, "EINVAL", "at least 4 bytes"),
            ("size mismatch", good, 511, 512, "EINVAL",
             "!= the JPEG header's 512x512"),
        ]
        rss0 = None
        for rnd in range(50):
            for name, data, w, h, want, needle in cases:
                rep = fpwire.reply(dt.nngcat(d.url, jpeg_request(data, w, h),
                                             tmp=tmp))
                if rnd == 0:
                    check(rep["status_name"] == want and
                          needle in rep["message"],
                          f"{name}: got {rep['status_name']} "
                          f"'{rep['message']}', want {want} '{needle}'")
                    info = fpwire.reply(dt.nngcat(
                        d.url, fpwire.request(kind=2, request_id=9),
                        tmp=tmp))
                    check(info["status"] == 0,
                          f"after {name}: INFO answered {info}")
                    print(f"ok {name}: {want} '{rep['message']}', INFO "
                          f"answered after it")
            if rnd == 4:
                rss0 = rss_kb(d.proc.pid)
        rss1 = rss_kb(d.proc.pid)
        print(f"RSS after 5 rounds {rss0} kB, after 50 rounds {rss1} kB")
        if sanitized(d.proc.pid):
            # ASan keeps freed memory in quarantine; LSan checks for leaks
            # when the daemon exits instead.
            print("note: a sanitizer build: RSS not judged")
        else:
            check(rss1 - rss0 < 4096, f"RSS grew by {rss1 - rss0} kB over "
                                      f"45 rounds of bad JPEGs")
        # Every worker has failed frames by now: each still decodes.
        for k in range(20):
            rep = fpwire.reply(dt.nngcat(d.url, jpeg_request(good),
                                         tmp=tmp))
            check(rep["status"] == 0,
                  f"good JPEG {k} after the bad ones: "
                  f"{rep['status_name']} '{rep['message']}'")
        check(d.alive(), "frameprepd died")
    finally:
        d.stop()


if __name__ == "__main__":
    # daemon_test's driver: arguments, scratch directory, logs on failure.
    sys.exit(dt.run(globals()))
