#!/usr/bin/python3
"""video_test.py: video streams through frameprepd (CPU backend) with
`frameprep video`.

video_frames: streams made here by Debian's ffmpeg from real photographs
(Debian's python3-skimage: astronaut, coffee, chelsea), panned and zoomed,
with B-frames: 8-bit H.264 (raw Annex-B), HEVC (.mp4, its parameter sets
out of band: the CLI's bitstream filter puts them in band) and an H.264 of
an odd size (330x186, not whole macroblocks: cropped) in .mkv. ffmpeg
decodes each to raw I420 (libavcodec's software decoder, every frame in
display order), and
  - the daemon's frames equal that decode bit for bit: asked for a U8
    RGB tensor of the frame's own size (STRETCH: the exact conversion),
    each equals libframeprep's CPU op (fprep_preprocess_cpu, through
    ctypes) run on ffmpeg's frame, byte for byte, and the pts come back
    in display order;
  - that RGB8 image is within 1 LSB of OpenCV's cvtColor
    (COLOR_YUV2RGB_I420) at every pixel, the "blacker than black" luma
    codes below 16 that the encoder leaves included (black in both);
  - each 160x160 letterboxed F32 tensor is within 1 LSB of cv2.resize +
    cv2.copyMakeBorder of that image.

video_errors: an H.264 and an HEVC stream, each with a corrupt slice and
one cut short, get EBITSTREAM ("broken bitstream") for the broken packets
(`frameprep video` exits 5) and frames again from the next IDR (H.264) or
IRAP (HEVC) picture, while a good stream on another connection decodes
unharmed; limits (max_width, max_streams_per_conn, max_packet_bytes,
max_stream_frames) are refused with ELIMIT naming the limit; a stream id
of no stream of the connection is EINVAL; the daemon answers INFO after
all of it.

Usage: video_test.py TEST --daemon PATH --cli PATH --images DIR
"""
import ctypes
import os
import struct
import subprocess
import sys

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "common"))
import daemon_test as dt  # noqa: E402
import fpwire  # noqa: E402
from daemon_test import Fail, Skip, check  # noqa: E402
from video_streams import pan_zoom_args  # noqa: E402

PAD = 114
OUT = 160
# (name, photograph, size, codec, container)
STREAMS = [
    ("h264", "astronaut.png", (320, 240), "libx264", "h264"),
    ("hevc", "coffee.png", (352, 240), "libx265", "mp4"),
    ("odd", "chelsea.png", (330, 186), "libx264", "mkv"),
]
FRAMES = 24


def ffmpeg(*argv):
    r = subprocess.run(["ffmpeg", "-v", "error", "-y", *argv],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    check(r.returncode == 0, f"ffmpeg {' '.join(argv)}: {r.stderr.decode()}")
    return r.stdout


def make_stream(tmp, photo, size, codec, container, frames=FRAMES, name=None):
    """A pan and zoom over photo, frames long at 25 fps, 2 B-frames, an IDR
    picture every 8 frames."""
    w, h = size
    out = os.path.join(tmp, (name or f"{codec}-{w}x{h}") + "." + container)
    ffmpeg(*pan_zoom_args(os.path.join(dt.ARGS.images, photo), size, codec,
                          frames, out))
    return out


def decode_ref(path, size):
    """ffmpeg's own software decode of path: (N, h*3/2, w) I420 frames."""
    w, h = size
    raw = ffmpeg("-i", path, "-f", "rawvideo", "-pix_fmt", "yuv420p",
                 "-fps_mode", "passthrough", "-")
    n = len(raw) // (w * h * 3 // 2)
    check(n * w * h * 3 // 2 == len(raw), f"{path}: {len(raw)} raw bytes")
    return np.frombuffer(raw, np.uint8).reshape(n, h * 3 // 2, w)


class CpuOp:
    """libframeprep's fprep_preprocess_cpu through ctypes: the reference
    op, run on ffmpeg's frames."""

    class Limits(ctypes.Structure):
        _fields_ = [("max_width", ctypes.c_uint32),
                    ("max_height", ctypes.c_uint32),
                    ("max_frame_bytes", ctypes.c_uint64),
                    ("max_out_width", ctypes.c_uint32),
                    ("max_out_height", ctypes.c_uint32),
                    ("max_tensor_bytes", ctypes.c_uint64),
                    ("max_elements", ctypes.c_uint32),
                    ("max_batch_bytes", ctypes.c_uint64),
                    ("max_jpeg_scans", ctypes.c_uint32),
                    ("max_jpeg_scan_pixels", ctypes.c_uint64),
                    ("max_packet_bytes", ctypes.c_uint64),
                    ("max_streams_per_conn", ctypes.c_uint32),
                    ("max_streams_per_uid", ctypes.c_uint32),
                    ("max_stream_frames", ctypes.c_uint32),
                    ("max_video_sessions", ctypes.c_uint32)]

    def __init__(self):
        lib = os.path.join(os.path.dirname(dt.ARGS.cli), "libframeprep.so.0")
        if not os.path.exists(lib):
            raise Skip(f"no {lib} (a static build): the CPU op is not "
                       f"reachable from Python")
        self.lib = None
        ldd = subprocess.run(["ldd", lib], stdout=subprocess.PIPE,
                             timeout=60).stdout.decode()
        if "libasan" in ldd or "libtsan" in ldd:
            return  # a sanitizer's runtime cannot load into Python late
        self.lib = ctypes.CDLL(lib)
        vp = ctypes.c_void_p
        self.lib.fprep_request_decode.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, vp, vp, vp, ctypes.c_size_t]
        self.lib.fprep_preprocess_cpu.argtypes = [vp, vp, vp,
                                                  ctypes.c_size_t, vp]
        self.lim = self.Limits(*([0xFFFFFFFF, 0xFFFFFFFF, 1 << 62,
                                  0xFFFFFFFF, 0xFFFFFFFF, 1 << 62, 1,
                                  1 << 62, 1, 1 << 62, 1 << 62, 1, 1, 1]))

    def rgb(self, frame, w, h):
        """The exact RGB8 image of an I420 frame (STRETCH to its own size,
        U8, NHWC), as the daemon makes it; None in a sanitizer build."""
        if self.lib is None:
            return None
        hdr = struct.pack("<IHHQHBBIIIIIBBBBff3f3fBBHIIQQQQII",
                          fpwire.REQUEST_MAGIC, 1, 1, 1, 7, 0, 0, w, h, w,
                          w, h, 2, 1, 3, 2, PAD, 1 / 255.0, 0, 0, 0, 1, 1,
                          1, 0, 0, w // 2, 0, 0, 0, 0, 0, frame.nbytes,
                          w * h, w * h + (w // 2) * (h // 2))
        msg = hdr + frame.tobytes()
        req = ctypes.create_string_buffer(1024)
        err = self.lib.fprep_request_decode(
            msg, len(msg), ctypes.cast(ctypes.byref(self.lim),
                                       ctypes.c_void_p), req, None, 0)
        check(err == 0, f"fprep_request_decode: {err}")
        out = np.zeros((h, w, 3), np.uint8)
        src = np.ascontiguousarray(frame)
        err = self.lib.fprep_preprocess_cpu(
            req, src.ctypes.data_as(ctypes.c_void_p),
            out.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(out.nbytes),
            None)
        check(err == 0, f"fprep_preprocess_cpu: {err}")
        return out


# The Ultralytics letterbox of an RGB8 image with OpenCV (pad 114).
letterbox_ref = dt.letterbox_img


def video(url, path, *opts, ok=(0,)):
    """`frameprep video path` on url: (its output lines, its exit status)."""
    r = dt.cli("video", path, "--socket", url, *opts, ok=ok)
    return r.stdout.decode().splitlines(), r.returncode


def frame_lines(lines):
    """(pts, width, height) of each tensor line."""
    out = []
    for line in lines:
        f = line.split()
        if f[0] == "frame":
            out.append((int(f[3]), *map(int, f[4].split("x"))))
    return out


def test_video_frames(tmp):
    op = CpuOp()
    d = dt.Daemon(tmp)
    try:
        for name, photo, size, codec, container in STREAMS:
            w, h = size
            path = make_stream(tmp, photo, size, codec, container)
            ref = decode_ref(path, size)
            check(len(ref) == FRAMES, f"{name}: ffmpeg decoded {len(ref)}")
            # The decode, bit for bit.
            npy = os.path.join(tmp, name + "-exact.npy")
            lines, _ = video(d.url, path, "--size", f"{w}x{h}", "--resize",
                             "stretch", "--dtype", "u8", "--layout", "nhwc",
                             "-o", npy)
            got = np.load(npy)
            frames = frame_lines(lines)
            check(len(got) == FRAMES and len(frames) == FRAMES,
                  f"{name}: {len(got)} tensors, {len(frames)} lines, want "
                  f"{FRAMES}:\n" + "\n".join(lines))
            check(all(f[1:] == (w, h) for f in frames),
                  f"{name}: decoded sizes {set(f[1:] for f in frames)}")
            pts = [f[0] for f in frames]
            check(pts == sorted(pts) or container == "h264",
                  f"{name}: pts not in display order: {pts}")
            conv = dark = 0
            for k in range(FRAMES):
                want = op.rgb(ref[k], w, h)
                check(want is None or np.array_equal(got[k], want),
                      f"{name} frame {k}: differs from libavcodec's decode "
                      f"in {int((got[k] != want).any(axis=2).sum())} pixels")
                # OpenCV's conversion, luma codes below 16 included.
                cv = cv2.cvtColor(ref[k], cv2.COLOR_YUV2RGB_I420)
                conv = max(conv, int(np.abs(cv.astype(int)
                                            - got[k].astype(int)).max()))
                dark += int((ref[k][:h] < 16).sum())
            check(conv <= 1, f"{name}: {conv} LSB from OpenCV's cvtColor")
            print(f"ok {name}: {FRAMES} frames "
                  + ("equal libavcodec's decode; " if op.lib else
                     "(sanitizer build: the bit-exact check needs the "
                     "CPU op in Python) ")
                  + f"their RGB within {conv} LSB of cvtColor ({dark} "
                  "pixels with Y < 16)")
            exact = got
            # The tensors, against OpenCV's letterbox of those frames.
            npy = os.path.join(tmp, name + "-f32.npy")
            video(d.url, path, "--size", f"{OUT}x{OUT}", "-o", npy)
            got = np.load(npy)
            worst = 0.0
            for k in range(FRAMES):
                want = letterbox_ref(exact[k], OUT, OUT).transpose(2, 0, 1)
                diff = float(np.abs(got[k] * 255.0 - want).max())
                worst = max(worst, diff)
            check(worst <= 1.0 + 1e-3,
                  f"{name}: tensor {worst:.3f} LSB from OpenCV's")
            print(f"ok {name}: tensors within {worst:.3f} LSB of OpenCV's "
                  f"letterbox")
    finally:
        d.stop()


# Per codec: (NAL type of a NAL header at data[j + 3], the slice types,
# the types that open an access unit, the byte whose top bit is a slice's
# "first in its picture" flag, relative to the NAL header).
NAL = {
    "h264": (lambda b: b & 0x1F, range(1, 6), (7, 9), 1),
    "hevc": (lambda b: (b >> 1) & 0x3F, range(0, 22), (32, 35), 2),
}


def annexb_units(data, codec):
    """The access units of a raw H.264 or HEVC file, split before each
    access unit delimiter or first parameter set (SPS for H.264, VPS for
    HEVC) and, without them, before each slice that is the first of its
    picture, unless what came since the last split holds no slice."""
    nal_type, slices, openers, first = NAL[codec]
    starts = [0]
    i = 0
    while True:
        j = data.find(b"\x00\x00\x01", i)
        if j < 0:
            break
        nal = nal_type(data[j + 3])
        begin = j - 1 if j > 0 and data[j - 1] == 0 else j
        if nal in openers or (nal in slices and data[j + 3 + first] & 0x80):
            if not _no_slice(data, starts[-1], begin, codec):
                starts.append(begin)
        i = j + 3
    starts.append(len(data))
    return [data[a:b] for a, b in zip(starts, starts[1:]) if b > a]


def _no_slice(data, start, at, codec):
    """Whether the bytes from start to at hold no slice (only parameter
    sets, delimiters and SEI: the slice at `at` belongs with them)."""
    nal_type, slices, _, _ = NAL[codec]
    i = start
    while True:
        j = data.find(b"\x00\x00\x01", i, at)
        if j < 0:
            return True
        if nal_type(data[j + 3]) in slices:
            return False
        i = j + 3


def broken_stream(tmp, photo, codec, container):
    """A 32-frame stream of the codec (an IDR/IRAP picture every 8) and a
    copy with a corrupt slice (frame 3) and one cut short (frame 19):
    (good path, broken path)."""
    path = make_stream(tmp, photo, (320, 240), codec, container, frames=32,
                       name=f"good-{container}")
    data = open(path, "rb").read()
    units = annexb_units(data, container)
    check(len(units) == 32,
          f"{container}: {len(units)} access units, want 32")
    bad = list(units)
    u = bytearray(bad[3])
    if container == "h264":
        # The second half of the slice data scrambled.
        for k in range(len(u) // 2, len(u)):
            u[k] = (u[k] * 7 + 91) & 0xFF
    else:
        # HEVC's decoder conceals scrambled slice data; a slice header
        # naming a picture parameter set past any (ue(v) of 28 leading
        # zero bits) it refuses.
        j = u.rfind(b"\x00\x00\x01")
        u[j + 5:j + 9] = b"\x80\x00\x00\x04"
    bad[3] = bytes(u)
    bad[19] = bad[19][:len(bad[19]) // 3]
    bpath = os.path.join(tmp, f"bad.{container}")
    open(bpath, "wb").write(b"".join(bad))
    return path, bpath


def test_video_errors(tmp):
    d = dt.Daemon(tmp)
    try:
        for photo, codec, container, irap in (
                ("astronaut.png", "libx264", "h264", "IDR"),
                ("coffee.png", "libx265", "hevc", "IRAP")):
            path, bpath = broken_stream(tmp, photo, codec, container)
            good = subprocess.Popen([dt.ARGS.cli, "video", path, "--socket",
                                     d.url, "--size", "64x64", "-o",
                                     os.path.join(tmp, "good.npy")],
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE)
            # Exit status 5: every refusal a broken bitstream.
            lines, rc = video(d.url, bpath, "--size", "64x64", ok=(5,))
            gout, gerr = good.communicate(timeout=120)
            check(good.returncode == 0,
                  f"the good stream beside: {gout.decode()}{gerr.decode()}")
            errors = [line for line in lines if line.startswith("error")]
            check(len(errors) >= 2 and
                  all("EBITSTREAM: broken bitstream" in e and
                      f"the next {irap} picture" in e for e in errors),
                  f"{container}: broken packets:\n" + "\n".join(lines))
            pts = [f[0] for f in frame_lines(lines)]
            # Frames again after each break, from the next IDR/IRAP (every
            # 8).
            check(any(p >= 8 for p in pts) and any(p >= 24 for p in pts),
                  f"{container}: no recovery after the broken packets: "
                  f"pts {pts}")
            print(f"ok {container} broken packets: {len(errors)} named "
                  f"errors ({errors[0]}), {len(pts)} frames, recovered at "
                  f"the {irap} pictures")
            ref = np.load(os.path.join(tmp, "good.npy"))
            lines, _ = video(d.url, path, "--size", "64x64", "-o",
                             os.path.join(tmp, "again.npy"))
            check(np.array_equal(ref,
                                 np.load(os.path.join(tmp, "again.npy"))),
                  f"{container}: the good stream decoded beside the "
                  "broken one differs")
            print(f"ok {container}: the stream beside the broken one: "
                  "unharmed")
    finally:
        d.stop()
    path = os.path.join(tmp, "good-h264.h264")
    limits = [
        (("--max-width", "200"), (), "max_width 200"),
        (("--max-streams-per-conn", "0"), (), "max_streams_per_conn 0"),
        (("--max-packet-bytes", "2000"), (), "max_packet_bytes 2000"),
        (("--max-stream-frames", "1"), (), "max_stream_frames 1"),
    ]
    for flags, opts, needle in limits:
        d = dt.Daemon(tmp, *flags)
        try:
            r = dt.cli("video", path, "--socket", d.url, "--size", "64x64",
                       *opts, ok=(1,))
            text = r.stdout.decode() + r.stderr.decode()
            check("ELIMIT" in text and needle in text,
                  f"{' '.join(flags)}: {text}")
            print(f"ok {' '.join(flags)}: ELIMIT naming {needle}")
            bogus = struct.pack("<IHHQIIqQ88x", fpwire.REQUEST_MAGIC, 1, 11,
                                5, 99, 0, 0, 4) + b"\x00\x00\x01\x09"
            rep = fpwire.reply(dt.nngcat(d.url, bogus, tmp=tmp))
            check(rep["status_name"] == "EINVAL" and
                  "stream_id 99 is not an open stream" in rep["message"],
                  f"a packet on no stream: {rep}")
            check(fpwire.reply(dt.nngcat(d.url, fpwire.request(kind=2),
                                         tmp=tmp))["status"] == 0,
                  "INFO after the refusals")
        finally:
            d.stop()
    print("ok a packet on no stream: EINVAL; INFO answered after each")
    # Without libavcodec (loaded at run time, never linked) streams are
    # refused, naming it, and everything else is served.
    d = dt.Daemon(tmp, env={"FPREP_AVCODEC": "off"})
    try:
        r = dt.cli("video", path, "--socket", d.url, "--size", "64x64",
                   ok=(1,))
        text = r.stdout.decode() + r.stderr.decode()
        check("EUNSUPPORTED" in text and "libavcodec" in text,
              f"a stream without libavcodec: {text}")
        info = fpwire.reply(dt.nngcat(d.url, fpwire.request(kind=2),
                                      tmp=tmp))
        check(b"video_decoder: none (libavcodec turned off" in
              info["payload"], f"INFO without libavcodec: {info}")
        dt.cli("send", os.path.join(dt.ARGS.images, "astronaut.png"),
               "--size", "64x64", "--socket", d.url)
    finally:
        d.stop()
    print(f"ok without libavcodec: {text.strip()}; INFO says so; frames "
          "served")


if __name__ == "__main__":
    # daemon_test's driver: arguments, scratch directory, logs on failure.
    sys.exit(dt.run(globals()))
