"""The Python client against a real frameprepd (CPU backend): results equal
to the C CLI's bit for bit and within 1 LSB of OpenCV on real photographs;
inline, shared memory, threads and asyncio with 64 requests in flight;
every bad input gets its own exception and the daemon keeps serving; a
daemon killed mid-request gives an exception within the timeout."""
import asyncio
import dataclasses
import os
import pathlib
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import cv2
import numpy as np
import pytest

import frameprep
from conftest import CLI, IMAGES, ROOT, Daemon, ring_memory
from frameprep import _core
from frameprep.protocol import Kind, Location, Request

sys.path.insert(0, str(ROOT / "tests" / "ops"))
from compare_opencv import letterbox_ref  # noqa: E402

PHOTOS = ["astronaut.png", "coffee.png", "chelsea.png", "camera.png"]

# (CLI flags, Python keyword arguments), the same preprocessing
OPTIONS = [
    ([], {}),
    (["--size", "416x256", "--resize", "stretch", "--order", "bgr",
      "--dtype", "f16", "--layout", "nhwc"],
     dict(size=(416, 256), resize="stretch", order="bgr", dtype="float16",
          layout="nhwc")),
    (["--size", "333x517", "--dtype", "u8", "--pad", "0"],
     dict(size=(333, 517), dtype="uint8", pad=0)),
    (["--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225",
      "--size", "320x320"],
     dict(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
          size=(320, 320))),
]


def photo(name, gray_as_gray=True):
    """An image as cv2.imread gives it: BGR, or gray for gray files."""
    path = str(IMAGES / name)
    img = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    assert img is not None, path
    if img.ndim == 2 and gray_as_gray:
        return img
    return cv2.imread(path, cv2.IMREAD_COLOR)


def assert_serving(client):
    """The daemon still answers, and correctly."""
    frame = np.full((48, 64, 3), 200, np.uint8)
    r = client.preprocess(frame, size=(32, 32), dtype="uint8")
    assert r.tensor.shape == (1, 3, 32, 32)
    assert (r.tensor[:, :, 4:28, :] == 200).all()


def test_info(client):
    info = client.info()
    assert info["backend"] == "cpu"
    assert info["protocol"] == 1
    assert isinstance(info["max_frame_bytes"], int)
    assert client.limits() is not None


def test_default_address(monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1000")
    assert frameprep.default_address() == "ipc:///run/user/1000/frameprep.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", "")
    assert frameprep.default_address() == \
        f"ipc:///tmp/frameprep-{os.getuid()}.sock"


@pytest.mark.parametrize("name", PHOTOS)
@pytest.mark.parametrize("opt", range(len(OPTIONS)))
def test_equals_c_cli_bit_for_bit(client, daemon, tmp_path, name, opt):
    flags, kwargs = OPTIONS[opt]
    out = tmp_path / "c.npy"
    r = subprocess.run([str(CLI), "send", str(IMAGES / name), "--socket",
                        daemon.url, "-o", str(out), *flags],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    c = np.load(out)
    py = client.preprocess(photo(name), **kwargs)
    assert py.tensor.dtype == c.dtype and py.tensor.shape == c.shape
    assert py.tensor.tobytes() == c.tobytes()


@pytest.mark.parametrize("name", PHOTOS)
@pytest.mark.parametrize("size", [(640, 640), (333, 517)])
def test_within_one_lsb_of_opencv(client, name, size):
    img = photo(name, gray_as_gray=False)
    ref = letterbox_ref(img, *size)[:, :, ::-1]  # RGB, (H, W, 3)
    r = client.preprocess(img, size=size, dtype="uint8", layout="nhwc")
    diff = np.abs(r.tensor[0].astype(int) - ref.astype(int))
    assert diff.max() <= 1, diff.max()
    f = client.preprocess(img, size=size)
    assert np.abs(f.tensor[0].transpose(1, 2, 0) - ref / 255.0).max() <= \
        1 / 255 + 1e-6


def _yuv_frames(bgr):
    """The photo (cropped to even sizes) as OpenCV's I420, NV12 and YUYV
    arrays (BT.601 limited, cv2's own forward conversion)."""
    h, w = bgr.shape[:2]
    bgr = bgr[:h // 2 * 2, :w // 2 * 2]
    h, w = bgr.shape[:2]
    i420 = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    u = i420[h:h + h // 4].reshape(h // 2, w // 2)
    v = i420[h + h // 4:].reshape(h // 2, w // 2)
    nv12 = np.concatenate([i420[:h], np.stack([u, v], 2).reshape(h // 2, w)])
    yuyv = np.zeros((h, w, 2), np.uint8)
    yuyv[:, :, 0] = i420[:h]
    yuyv[:, 0::2, 1] = np.repeat(u, 2, axis=0)
    yuyv[:, 1::2, 1] = np.repeat(v, 2, axis=0)
    return {"i420": (i420, cv2.COLOR_YUV2BGR_I420),
            "nv12": (nv12, cv2.COLOR_YUV2BGR_NV12),
            "yuyv": (yuyv, cv2.COLOR_YUV2BGR_YUY2)}


@pytest.mark.parametrize("fmt", ["nv12", "i420", "yuyv"])
def test_yuv_within_one_lsb_of_opencv(client, fmt):
    """YUV frames in OpenCV's layout, BT.601 limited: the tensor is within
    1 LSB of cvtColor then the letterbox (resized in float, so the
    reference adds no rounding)."""
    frame, code = _yuv_frames(photo("astronaut.png", False))[fmt]
    ref = letterbox_ref(cv2.cvtColor(frame, code).astype(np.float32),
                        640, 640)[:, :, ::-1]
    r = client.preprocess(frame, format=fmt)
    d = np.abs(r.tensor[0].transpose(1, 2, 0) * 255.0 - ref)
    assert d.max() <= 1.01, d.max()
    # Another matrix and range change the tensor.
    r2 = client.preprocess(frame, format=fmt, matrix="bt709",
                           yuv_range="full")
    assert np.abs(r2.tensor - r.tensor).max() > 0.01


def test_yuv_bad_frames_refused(client):
    with pytest.raises(frameprep.InvalidRequestError, match="even"):
        client.preprocess(np.zeros((48, 63), np.uint8), format="nv12")
    with pytest.raises(frameprep.InvalidRequestError, match=r"\(H, W, 2\)"):
        client.preprocess(np.zeros((48, 64, 3), np.uint8), format="yuyv")
    with pytest.raises(frameprep.InvalidRequestError, match="matrix"):
        client.preprocess(np.zeros((48, 64), np.uint8), format="i420",
                          matrix="bt2100")
    # The daemon names the field of an odd size the client let through.
    req = Request(src_format=6, src_width=63, src_height=32, src_stride=64,
                  uv_stride=64, u_offset=64 * 32, input_size=64 * 48)
    with pytest.raises(frameprep.InvalidRequestError, match="src_width 63"):
        client.request(req, bytes(req.input_size))
    assert_serving(client)


def test_transform_to_source(client):
    img = photo("chelsea.png")  # 451 x 300
    r = client.preprocess(img, size=(640, 640))
    xf = r.transform
    assert (xf.src_width, xf.src_height) == (451, 300)
    assert xf.scale_x == pytest.approx(640 / 451, rel=1e-3)
    assert xf.pad_x == 0 and xf.pad_y > 0
    boxes = np.array([[0, xf.pad_y, 640, 640 - xf.pad_y],
                      [-50, -50, 2000, 2000],
                      [xf.pad_x + 10 * xf.scale_x, xf.pad_y + 20 * xf.scale_y,
                       xf.pad_x + 30 * xf.scale_x, xf.pad_y + 40 * xf.scale_y]],
                     np.float32)
    src = xf.to_source(boxes)
    assert src.dtype == np.float32 and src.shape == (3, 4)
    np.testing.assert_allclose(src[0], [0, 0, 451, 300], atol=0.5)
    np.testing.assert_allclose(src[1], [0, 0, 451, 300])
    np.testing.assert_allclose(src[2], [10, 20, 30, 40], atol=1e-3)
    assert xf.to_source(np.zeros((0, 4))).shape == (0, 4)
    with pytest.raises(ValueError):
        xf.to_source(np.zeros((2, 3)))
    assert r.timings.total_us >= r.timings.compute_us > 0


def _mapping_of(addr):
    """The /proc/self/maps line of the mapping holding addr, or ""."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(v, 16) for v in line.split()[0].split("-"))
            if lo <= addr < hi:
                return line
    return ""


def test_simple_call_is_staged_and_not_copied(client, daemon):
    """On ipc:// Client.preprocess goes through the C library's stage: the
    tensor is a numpy view of the stage's shared memory (not a copy, not
    the socket's message), held while the array lives, and equal to the
    tensor sent inline (tcp:// or staging off gives the same bytes)."""
    rng = np.random.default_rng(5)
    f = rng.integers(0, 256, (120, 160, 3), np.uint8)
    r = client.preprocess(f, size=(64, 64))
    t = r.tensor
    assert not t.flags.owndata
    assert "/dev/shm/frameprep-" in _mapping_of(t.__array_interface__[
        "data"][0]), "the tensor views a shared-memory stage"
    with frameprep.Client(daemon.url, timeout=60) as plain:
        plain._s.native.set_staging(False)
        inline = plain.preprocess(f, size=(64, 64)).tensor
        assert "/dev/shm/" not in _mapping_of(inline.__array_interface__[
            "data"][0])
    assert inline.tobytes() == t.tobytes()
    del r
    assert t.tobytes() == inline.tobytes(), "the array holds its stage"


@pytest.mark.parametrize("dtype", ["float32", "float16", "uint8"])
def test_tensor_and_timings_made_in_c(client, dtype):
    """A result's tensor (_native.tensor) is the array that numpy makes
    from the reply's __array_interface__, writable, C-ordered and holding
    the reply; its timings (_native.timings) are the reply's; an array's
    address (_native.address) is its interface's, views and crops too."""
    from frameprep import _native
    rng = np.random.default_rng(6)
    f = rng.integers(0, 256, (90, 130, 3), np.uint8)
    r = client.preprocess(f, size=(48, 40), dtype=dtype, layout="nhwc")
    want = np.asarray(r._res)
    t = r.tensor
    assert (t.dtype, t.shape, t.strides) == (want.dtype, want.shape,
                                             want.strides)
    assert t.__array_interface__["data"] == want.__array_interface__["data"]
    assert t.flags.writeable and t.flags.c_contiguous and t.flags.aligned
    assert t.base is r._res and t.tobytes() == want.tobytes()
    assert r.timings == frameprep.Timings(*r._res.timings)
    assert r.timings.total_us == r.reply.t_total_us
    assert pickle.loads(pickle.dumps(r.timings)) == r.timings
    assert dataclasses.asdict(r.timings)["total_us"] == r.reply.t_total_us
    for a in (f, f[3:50, 7:90], f[:, ::-1], f.T, np.zeros(0, np.uint8)):
        assert _core.address_of(a) == a.__array_interface__["data"][0]
    with pytest.raises(TypeError):
        _native.address(b"not an array")
    with pytest.raises(TypeError):
        _native.tensor(want)


def test_crop_is_sent_with_its_stride(client):
    big = photo("astronaut.png")
    crop = big[37:401, 51:333]
    src = _core.check_frame(crop)
    assert src.stride == big.strides[0] and src.array is crop
    assert src.span < big.nbytes
    a = client.preprocess(crop, size=(320, 320))
    b = client.preprocess(np.ascontiguousarray(crop), size=(320, 320))
    assert a.tensor.tobytes() == b.tensor.tobytes()
    # A view whose pixels are not packed is copied first, same result.
    flipped = np.ascontiguousarray(crop[:, ::-1])[:, ::-1]
    c = client.preprocess(flipped, size=(320, 320))
    assert c.tensor.tobytes() == a.tensor.tobytes()


def test_pixel_formats_agree(client):
    bgr = photo("coffee.png")
    base = client.preprocess(bgr, size=(256, 256)).tensor
    rgb = np.ascontiguousarray(bgr[:, :, ::-1])
    bgra = cv2.cvtColor(bgr, cv2.COLOR_BGR2BGRA)
    rgba = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGBA)
    for frame, fmt in ((rgb, "rgb8"), (bgra, None), (rgba, "rgba8")):
        t = client.preprocess(frame, size=(256, 256), format=fmt).tensor
        assert t.tobytes() == base.tobytes(), fmt
    gray = photo("camera.png")
    g = client.preprocess(gray, size=(256, 256), order="gray").tensor
    assert g.shape == (1, 1, 256, 256)
    g3 = client.preprocess(gray[:, :, None], size=(256, 256)).tensor
    assert (g3 == g).all()


def test_ring_in_place_and_copied(client):
    img = photo("astronaut.png")
    want = client.preprocess(img).tensor.copy()
    crop_want = client.preprocess(img[10:300, 20:400]).tensor.copy()
    pid = os.getpid()
    # Through the socket: the reply lands in the slot (a doorbell's lands
    # in its entry; test_ring_through_a_doorbell).
    with client.ring(slots=3, frame=img.shape, doorbell=False) as ring:
        assert not [n for n in os.listdir("/dev/shm")
                    if n.startswith(f"frameprep-py-{pid}-")], \
            "the shared-memory name must be unlinked after registration"
        buf = ring.next_frame()
        assert buf.shape == img.shape and buf.flags.writeable
        buf[:] = img
        r = ring.preprocess(buf)
        assert r.tensor.tobytes() == want.tobytes()
        if True:
            # The daemon wrote the reply into the slot too (the ring waits
            # there), the request id last.
            # The header after the tensor (8-byte aligned), its request
            # id at byte 8.
            at = (r._hold.address - ring._c.base +
                  (ring.tensor_bytes + 7) // 8 * 8 + 8)
            mem = ring_memory(ring)
            assert int.from_bytes(mem[at:at + 8].tobytes(),
                                  "little") == r.reply.request_id
        assert r.reply.output_loc == Location.SHM
        assert r.reply.payload_size == 0
        assert r.reply.flags & 1  # input released
        assert r.tensor.base is not None and not r.tensor.flags.owndata
        r2 = ring.preprocess(img)  # copied into the next slot
        assert r2.tensor.tobytes() == want.tobytes()
        buf = ring.next_frame()
        buf[:] = img
        r3 = ring.preprocess(buf[10:300, 20:400])  # a crop of the slot
        assert r3.tensor.tobytes() == crop_want.tobytes()
        # The first tensor still holds its values: its slot was not reused.
        assert r.tensor.tobytes() == want.tobytes()
        with pytest.raises(frameprep.LimitExceededError):
            ring.preprocess(np.zeros((600, 600, 3), np.uint8))
        del buf, r, r2, r3
    with pytest.raises(frameprep.ClosedError):
        ring.preprocess(img)
    ring.close()
    assert_serving(client)


def info_count(client, key):
    return int(client.info()[key])


def test_ring_through_a_doorbell(tmp_path):
    """A daemon that spins polls the ring's doorbell: the ring's requests
    go that way (INFO counts them) and give the tensors and transforms of
    the socket's path, on real photographs, copied, in place and cropped;
    the ring's close ends the doorbell."""
    d = Daemon(tmp_path, "--spin-us", "100000")
    try:
        with frameprep.Client(d.url, timeout=60) as c:
            # The references go inline: a staged call would set up the
            # client's own doorbell, and count in INFO.
            c._s.native.set_staging(False)
            before = info_count(c, "doorbell_requests")
            n = 0
            with c.ring(slots=3, frame=(512, 600, 3), size=(320, 256),
                        dtype="float16") as ring:
                assert info_count(c, "doorbells") == 1
                for name in PHOTOS:
                    img = photo(name, gray_as_gray=False)
                    for frame in (img, img[17:400, 33:500]):
                        want = c.preprocess(frame, size=(320, 256),
                                            dtype="float16")
                        got = ring.preprocess(frame)
                        n += 1
                        assert got.tensor.tobytes() == \
                            want.tensor.tobytes(), name
                        assert (got.reply.scale_x, got.reply.pad_y) == \
                            (want.reply.scale_x, want.reply.pad_y)
                        buf = ring.next_frame()
                        buf[:] = 0
                        buf[:frame.shape[0], :frame.shape[1]] = frame
                        got = ring.preprocess(
                            buf[:frame.shape[0], :frame.shape[1]])
                        n += 1
                        assert got.tensor.tobytes() == \
                            want.tensor.tobytes(), name
                        del got, buf
            taken = info_count(c, "doorbell_requests") - before
            # The first request after a quiet spell may go through nng.
            assert n - 2 <= taken <= n, (n, taken)
            assert info_count(c, "doorbells") == 0
            assert_serving(c)
    finally:
        d.stop()


def test_simple_call_through_the_client_doorbell(tmp_path):
    """On a daemon that polls, Client.preprocess's staged requests go
    through the client's own doorbell (INFO counts each one), with the
    tensors of the inline path."""
    d = Daemon(tmp_path, "--spin-us", "100000")
    try:
        with frameprep.Client(d.url, timeout=60) as c, \
                frameprep.Client(d.url, timeout=60) as plain:
            plain._s.native.set_staging(False)
            img = photo("astronaut.png")
            want = plain.preprocess(img).tensor.copy()
            before = info_count(plain, "doorbell_requests")
            for _ in range(5):
                r = c.preprocess(img)
                assert r.tensor.tobytes() == want.tobytes()
                del r
            assert info_count(plain, "doorbell_requests") - before == 5
            assert info_count(plain, "doorbells") == 1
    finally:
        d.stop()


def test_ring_doorbell_unpolled_or_refused(client, tmp_path):
    """A daemon that does not spin (the CPU backend's default) accepts the
    doorbell but never polls it: where its kernel has futex_waitv (INFO
    doorbell_wake) the ring rings it and the daemon takes every request
    from the doorbell, else they go through the socket. One run with
    --max-doorbells 0 refuses the doorbell, and the ring uses the socket.
    Every request is answered as usual."""
    img = photo("coffee.png", gray_as_gray=False)
    want = client.preprocess(img).tensor.copy()
    rung = client.info()["doorbell_wake"] == "futex_waitv"
    before = info_count(client, "doorbell_requests")
    rings = info_count(client, "doorbell_rings")
    with client.ring(slots=2, frame=img.shape) as ring:
        assert info_count(client, "doorbells") >= 1
        for _ in range(4):
            assert ring.preprocess(img).tensor.tobytes() == want.tobytes()
    assert info_count(client, "doorbell_requests") == before + \
        (4 if rung else 0)
    assert info_count(client, "doorbell_rings") >= rings + \
        (4 if rung else 0)
    d = Daemon(tmp_path, "--spin-us", "100000", "--max-doorbells", "0")
    try:
        with frameprep.Client(d.url, timeout=60) as c:
            with c.ring(slots=2, frame=img.shape) as ring:
                assert not ring._c.doorbell
                for _ in range(4):
                    assert ring.preprocess(img).tensor.tobytes() == \
                        want.tobytes()
            assert info_count(c, "doorbells") == 0
            assert info_count(c, "doorbell_requests") == 0
    finally:
        d.stop()


def test_ring_wakes_a_sleeping_daemon(tmp_path):
    """A daemon that polls for 200 us after its last event sleeps again
    before each request of a slow stream (20 ms apart) comes: the ring
    finds its wake word armed and rings it, and the daemon takes every
    request from the doorbell (INFO counts the requests and the rings),
    with the socket's tensors."""
    img = photo("astronaut.png", gray_as_gray=False)
    d = Daemon(tmp_path, "--spin-us", "200")
    try:
        with frameprep.Client(d.url, timeout=60) as c:
            if c.info()["doorbell_wake"] != "futex_waitv":
                pytest.skip("the daemon's kernel has no futex_waitv")
            want = c.preprocess(img).tensor.copy()
            before = info_count(c, "doorbell_requests")
            rings = info_count(c, "doorbell_rings")
            with c.ring(slots=2, frame=img.shape) as ring:
                for _ in range(5):
                    time.sleep(0.02)
                    assert ring.preprocess(img).tensor.tobytes() == \
                        want.tobytes()
            assert info_count(c, "doorbell_requests") == before + 5
            assert info_count(c, "doorbell_rings") >= rings + 5
    finally:
        d.stop()


def test_bench_through_the_doorbell(tmp_path):
    """python -m frameprep.bench measures the doorbell path beside the
    socket's, with frameprep-bench --doorbell as the C side, and the bare
    floor (CRing.bare) against the same C side; both go through the
    doorbell (INFO counts them)."""
    bench = pathlib.Path(CLI).parent / "frameprep-bench"
    d = Daemon(tmp_path, "--spin-us", "100000")
    try:
        with frameprep.Client(d.url, timeout=60) as c:
            before = info_count(c, "doorbell_requests")
        r = subprocess.run(
            [sys.executable, "-m", "frameprep.bench", "-u", d.url,
             "--c-bench", str(bench), "--paths", "shm,door,bare", "-c", "1",
             "-d", "0.3", "-w", "0.1", "--frame", "160x120", "-s", "64x64"],
            capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in r.stdout.splitlines()
                if line.startswith(("shm ", "door ", "bare "))]
        assert [row[:2] for row in rows] == [["shm", "1"], ["door", "1"],
                                             ["bare", "1"]]
        assert all(float(row[2]) > 0 and float(row[3]) > 0 for row in rows)
        assert "floor, a Python loop around the bare C request, door c=1" \
            in r.stdout, r.stdout
        with frameprep.Client(d.url, timeout=60) as c:
            taken = info_count(c, "doorbell_requests") - before
        # Both sides of door and bare ran through the doorbell for 0.3 s
        # after a 0.1 s warm-up: at least half of the frames their rates
        # account for (frames/s x 0.3 s; a rate, so that load cannot break
        # the count).
        counted = sum((float(row[2]) + float(row[3])) * 0.3
                      for row in rows if row[0] in ("door", "bare"))
        assert taken > 0 and taken >= 0.5 * counted, (taken, counted)
    finally:
        d.stop()


def test_bench_simple_call_against_the_ring_copy(daemon):
    """python -m frameprep.bench's copy path (ring.preprocess of a plain
    array) runs Python alone, and at c=1 the bench prints the simple
    call's p50 and rate over that path's, with the bars; --check's exit
    status follows the verdicts."""
    bench = pathlib.Path(CLI).parent / "frameprep-bench"
    r = subprocess.run(
        [sys.executable, "-m", "frameprep.bench", "-u", daemon.url,
         "--c-bench", str(bench), "--paths", "inline,copy", "-c", "1",
         "-d", "0.3", "-w", "0.1", "--frame", "160x120", "-s", "64x64",
         "--check"],
        capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()
            if line.startswith(("inline ", "copy "))}
    assert sorted(rows) == ["copy", "inline"]
    assert float(rows["inline"][2]) > 0 and float(rows["inline"][3]) > 0
    assert rows["copy"][2] == "-" and float(rows["copy"][3]) > 0
    p50 = float(rows["inline"][6]) / float(rows["copy"][6])
    rate = float(rows["inline"][3]) / float(rows["copy"][3])
    verdict = [line for line in r.stdout.splitlines()
               if line.startswith("simple call vs ring.preprocess(array)")]
    assert len(verdict) == 1, r.stdout
    got = re.search(r"= ([0-9.]+)x \(bar <= 1.2x\) (PASS|FAIL); .* = "
                    r"([0-9.]+)x \(bar >= 0.8x\) (PASS|FAIL)$", verdict[0])
    assert got, verdict
    # The table's figures are rounded (p50 to the microsecond), the
    # verdict's ratios to two decimals (under load a ratio can be 0.04x).
    assert float(got[1]) == pytest.approx(p50, rel=0.02, abs=0.006), \
        (verdict, p50)
    assert float(got[3]) == pytest.approx(rate, rel=0.02, abs=0.006), \
        (verdict, rate)
    assert got[2] == ("PASS" if float(got[1]) <= 1.2 else "FAIL")
    assert got[4] == ("PASS" if float(got[3]) >= 0.8 else "FAIL")
    assert r.returncode == (0 if got[2] == got[4] == "PASS" else 1)


def test_ring_options_and_gray(client):
    gray = photo("camera.png")
    want = client.preprocess(gray, size=(160, 96), order="gray",
                             dtype="uint8", layout="nhwc").tensor.copy()
    with client.ring(slots=2, frame=gray.shape, size=(160, 96), order="gray",
                     dtype="uint8", layout="nhwc") as ring:
        for _ in range(5):
            r = ring.preprocess(gray)
            assert r.tensor.shape == (1, 96, 160, 1)
            assert r.tensor.tobytes() == want.tobytes()


def frames_for(n):
    """n different frames (crops of a photograph) and their tensors."""
    img = photo("astronaut.png")
    return [img[i:i + 200 + i, 2 * i:300 + i] for i in range(n)]


def in_threads(threads, rounds, frames, want, send):
    """Calls send(k, i) (the tensor's bytes for frames[k]) for rounds i on
    each thread t, with k = (t + i) % len(frames); returns what went wrong
    (a tensor other than want[k], an exception)."""
    errors = []

    def worker(t):
        try:
            for i in range(rounds):
                k = (t + i) % len(frames)
                if send(k, i) != want[k]:
                    errors.append(f"thread {t} frame {k} differs")
        except Exception as exc:  # reported by the caller
            errors.append(repr(exc))

    workers = [threading.Thread(target=worker, args=(t,))
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    return errors


def test_threads_share_one_client(client):
    frames = frames_for(16)
    want = [client.preprocess(f, size=(128, 128)).tensor.tobytes()
            for f in frames]
    assert in_threads(16, 8, frames, want, lambda k, i: client.preprocess(
        frames[k], size=(128, 128)).tensor.tobytes()) == []


def place(ring, frame):
    """Writes frame into the ring's next slot and sends it from there."""
    buf = ring.next_frame(frame.shape)
    buf[:] = frame
    return ring.preprocess(buf).tensor.tobytes()


def test_ring_shared_by_threads(client):
    frames = frames_for(8)
    want = [client.preprocess(f, size=(128, 128)).tensor.tobytes()
            for f in frames]
    with client.ring(slots=32, frame=(512, 512, 3), size=(128, 128)) as ring:
        errors = in_threads(16, 6, frames, want,
                            lambda k, i: place(ring, frames[k]))
    assert errors == []


def test_ring_whole_slot_views(client):
    """Views from next_frame() sent as they are take the quick path; views
    changed in place, sent twice or cropped still give the right tensor,
    and nothing is left behind for them."""
    img = photo("astronaut.png")
    frames = [img[i:i + 200, 2 * i:2 * i + 300] for i in range(8)]
    want = [client.preprocess(f, size=(96, 96)).tensor.tobytes()
            for f in frames]

    def whole(ring, k):
        buf = ring.next_frame()
        buf[:] = frames[k]
        return ring.preprocess(buf).tensor.tobytes()

    with client.ring(slots=32, frame=(200, 300, 3), size=(96, 96)) as ring:
        assert in_threads(16, 6, frames, want,
                          lambda k, i: whole(ring, k)) == []
        buf = ring.next_frame()
        buf[:] = frames[1]
        assert ring.preprocess(buf).tensor.tobytes() == want[1]
        assert ring.preprocess(buf).tensor.tobytes() == want[1]  # copied
        buf = ring.next_frame()
        buf.shape = (100, 600, 3)  # the same bytes, read as another frame
        other = client.preprocess(buf.copy(), size=(96, 96)).tensor
        assert ring.preprocess(buf).tensor.tobytes() == other.tobytes()
        for i in range(40):
            buf = ring.next_frame()
            buf[:] = frames[2]
            crop = frames[2][5:150, 7:250]
            got = ring.preprocess(buf[5:150, 7:250]).tensor
            assert got.tobytes() == client.preprocess(
                crop, size=(96, 96)).tensor.tobytes()
        # Every slot was given back (by the results' collection) but
        # the last one's, which its tensor still holds.
        assert len(ring._free) == 31
        del got
        assert sorted(ring._free) == list(range(32))
        # The result's header fields, read when asked for, agree with the
        # inline request's and with one another; the result is read-only.
        buf = ring.next_frame()
        buf[:] = frames[3]
        r = ring.preprocess(buf)
        inline = client.preprocess(frames[3], size=(96, 96))
        assert r.transform == inline.transform
        assert r.reply.request_id == r.request_id
        assert r.reply.t_total_us == r.timings.total_us > 0
        assert r.reply.shape == inline.reply.shape == (1, 3, 96, 96)
        with pytest.raises(AttributeError):
            r.tensor = None
    async def in_async_ring():
        async with frameprep.AsyncClient(client.address) as ac:
            async with await ac.ring(slots=4, frame=(200, 300, 3),
                                     size=(96, 96)) as aring:
                async def one(k):
                    buf = await aring.next_frame()
                    buf[:] = frames[k]
                    return (await aring.preprocess(buf)).tensor.tobytes()

                return await asyncio.gather(*[one(k) for k in range(4)])

    assert asyncio.run(in_async_ring()) == want[:4]
    # A reply other than the usual one is decoded and checked in full.
    with client.ring(slots=2, frame=(200, 300, 3), size=(96, 96),
                     std=0) as ring:
        with pytest.raises(frameprep.InvalidRequestError, match="std"):
            ring.preprocess(ring.next_frame())
        assert_serving(client)


def test_ring_with_fewer_slots_than_threads(daemon):
    """Threads wait for a free slot and are woken when one is released."""
    frames = frames_for(8)
    with frameprep.Client(daemon.url, timeout=20) as client:
        want = [client.preprocess(f, size=(64, 64)).tensor.tobytes()
                for f in frames]
        with client.ring(slots=2, frame=(512, 512, 3),
                         size=(64, 64)) as ring:
            errors = in_threads(
                8, 10, frames, want, lambda k, i: place(ring, frames[k])
                if i % 2 else ring.preprocess(frames[k]).tensor.tobytes())
    assert errors == []


def test_preprocess_batch(client):
    """preprocess_batch: frames of different sizes into one (N, C, H, W)
    array (or NHWC), each row the single call's tensor; out= fills a numpy
    array in place; preprocess(out=numpy) copies into it; wrong outs are
    refused before anything is sent."""
    fs = [photo(n, gray_as_gray=False) for n in ("astronaut.png",
                                                 "coffee.png",
                                                 "chelsea.png")]
    fs.append(fs[0][10:200, 30:300])
    want = [client.preprocess(f, size=(96, 64)).tensor[0] for f in fs]
    got = client.preprocess_batch(fs, size=(96, 64)).tensor
    assert got.shape == (4, 3, 64, 96) and got.dtype == np.float32
    assert all((got[k] == want[k]).all() for k in range(4))
    out = np.zeros((4, 64, 96, 3), np.float16)
    r = client.preprocess_batch(fs, out=out, size=(96, 64), layout="nhwc",
                                dtype="float16")
    assert r.tensor is out
    nhwc = [client.preprocess(f, size=(96, 64), layout="nhwc",
                              dtype="float16").tensor[0] for f in fs]
    assert all((out[k] == nhwc[k]).all() for k in range(4))
    with pytest.raises(ValueError, match="at least one frame"):
        client.preprocess_batch([], size=(96, 64))
    one = np.zeros((1, 3, 64, 96), np.float32)
    res = client.preprocess(fs[1], size=(96, 64), out=one)
    assert res.tensor is one and (one[0] == want[1]).all()
    row = np.zeros((3, 64, 96), np.float32)
    client.preprocess(fs[2], size=(96, 64), out=row)
    assert (row == want[2]).all()
    for bad, match in ((np.zeros((3, 3, 64, 96), np.float32), "shape"),
                       (np.zeros((4, 3, 64, 96), np.float16), "dtype")):
        with pytest.raises(frameprep.InvalidRequestError, match=match):
            client.preprocess_batch(fs, out=bad, size=(96, 64))
    with pytest.raises(frameprep.InvalidRequestError, match="order gray"):
        client.preprocess_batch(fs, size=(96, 64), order="gray")


def test_options_reused_only_when_equal(client):
    """Requests keep the prepared form of their options for the next
    request with equal ones: each set still gets its own tensor."""
    frame = photo("coffee.png")[:120, :160]
    cases = [dict(size=(32, 32)), dict(size=(48, 32)),
             dict(size=(32, 32), dtype="uint8"),
             dict(size=[32, 32], dtype=np.uint8),
             dict(size=(32, 32), dtype=np.dtype("float16")),
             dict(size=(32, 32), mean=0.5), dict(size=(32, 32), mean=0.25),
             dict(size=(32, 32), mean=np.array([0.25, 0.25, 0.25])),
             dict(size=(32, 32), layout="nhwc")]
    for _ in range(2):
        got = [client.preprocess(frame, **kw).tensor for kw in cases]
        shapes = [(t.shape, t.dtype.str) for t in got]
        assert shapes == [((1, 3, 32, 32), "<f4"), ((1, 3, 32, 48), "<f4"),
                          ((1, 3, 32, 32), "|u1"), ((1, 3, 32, 32), "|u1"),
                          ((1, 3, 32, 32), "<f2"), ((1, 3, 32, 32), "<f4"),
                          ((1, 3, 32, 32), "<f4"), ((1, 3, 32, 32), "<f4"),
                          ((1, 32, 32, 3), "<f4")]
        np.testing.assert_allclose(got[5], got[0] - 0.5, atol=1e-6)
        np.testing.assert_allclose(got[6], got[0] - 0.25, atol=1e-6)
        assert (got[7] == got[6]).all()
    with pytest.raises(frameprep.InvalidRequestError, match="dtype"):
        client.preprocess(frame, dtype="e")


def test_limits_checked_against_each_limits_dict():
    """A prepared set of options checks against whichever limits it is
    given: new limits are read, not the first ones remembered."""
    plan = _core.plan((64, 64), "letterbox", "rgb", "float32", "nchw",
                      1 / 255, 0.0, 1.0, 114)
    src = _core.check_frame(np.zeros((100, 200, 3), np.uint8))
    plan.check(src, {"max_width": 200, "max_tensor_bytes": 64 * 64 * 12})
    with pytest.raises(frameprep.LimitExceededError,
                       match="src_width 200 exceeds the daemon's max_width"):
        plan.check(src, {"max_width": 199})
    with pytest.raises(frameprep.LimitExceededError,
                       match="input_size 60000 exceeds"):
        plan.check(src, {"max_out_width": 32, "max_frame_bytes": 59999})
    with pytest.raises(frameprep.LimitExceededError,
                       match="out_width 64 exceeds"):
        plan.check(src, {"max_out_width": 32})
    with pytest.raises(frameprep.LimitExceededError, match="tensor bytes"):
        plan.check(src, {"max_tensor_bytes": 64 * 64 * 12 - 1})
    plan.check(src, {})


def test_asyncio_64_in_flight(daemon, client):
    frames = frames_for(64)
    want = [client.preprocess(f, size=(96, 96)).tensor.tobytes()
            for f in frames]

    async def main():
        async with frameprep.AsyncClient(daemon.url, timeout=120) as ac:
            info = await ac.info()
            assert info["max_inflight"] >= 64
            results = await asyncio.gather(
                *(ac.preprocess(f, size=(96, 96)) for f in frames))
            inline = [r.tensor.tobytes() for r in results]
            async with await ac.ring(slots=64, frame=(512, 512, 3),
                                     size=(96, 96)) as ring:
                results = await asyncio.gather(
                    *(ring.preprocess(f) for f in frames))
                shm = [r.tensor.tobytes() for r in results]
                for r in results:
                    r.release()
                buf = await ring.next_frame(frames[5].shape)
                buf[:] = frames[5]
                placed = (await ring.preprocess(buf)).tensor.tobytes()
                del buf, results
            return inline, shm, placed

    inline, shm, placed = asyncio.run(main())
    assert inline == want
    assert shm == want
    assert placed == want[5]


def test_async_errors(daemon):
    async def main():
        async with frameprep.AsyncClient(daemon.url, timeout=30) as ac:
            with pytest.raises(frameprep.InvalidRequestError):
                await ac.preprocess(np.zeros((8, 8), np.float32))
            with pytest.raises(frameprep.InvalidRequestError, match="std"):
                await ac.preprocess(np.zeros((8, 8, 3), np.uint8), std=-1)
            r = await ac.preprocess(np.zeros((8, 8, 3), np.uint8))
            assert r.tensor.shape == (1, 3, 640, 640)

    asyncio.run(main())


BAD_INPUTS = [
    # (keyword arguments, exception, text in the message); the frame
    # defaults to a small BGR image
    (dict(frame=np.zeros((16, 16, 3), np.float32)),
     frameprep.InvalidRequestError, "dtype"),
    (dict(frame=np.zeros((2, 16, 16, 3), np.uint8)),
     frameprep.InvalidRequestError, "shape"),
    (dict(frame=np.zeros((16, 16, 2), np.uint8)),
     frameprep.InvalidRequestError, "shape"),
    (dict(frame=np.zeros((0, 16, 3), np.uint8)),
     frameprep.InvalidRequestError, "empty"),
    (dict(frame=[[1, 2], [3, 4]]), frameprep.InvalidRequestError, "ndarray"),
    (dict(format="rgba8"), frameprep.InvalidRequestError, "channels"),
    (dict(format="yuv"), frameprep.InvalidRequestError, "format"),
    (dict(resize="crop"), frameprep.InvalidRequestError, "resize"),
    (dict(dtype="int32"), frameprep.InvalidRequestError, "dtype"),
    (dict(layout="chw"), frameprep.InvalidRequestError, "layout"),
    (dict(order="gray"), frameprep.InvalidRequestError, "gray8"),
    (dict(size=(0, 640)), frameprep.InvalidRequestError, "size"),
    (dict(mean=(1, 2)), frameprep.InvalidRequestError, "mean"),
    (dict(size=(4096, 640)), frameprep.LimitExceededError, "max_out_width"),
    (dict(frame=np.zeros((300, 8193), np.uint8)),
     frameprep.LimitExceededError, "max_width"),
    (dict(frame=np.zeros((4100, 4100, 4), np.uint8), size=(64, 64)),
     frameprep.LimitExceededError, "max_frame_bytes"),
    # the daemon's refusals, its message kept
    (dict(std=0), frameprep.InvalidRequestError, "std"),
    (dict(scale=float("nan")), frameprep.InvalidRequestError, "scale"),
    (dict(pad=300), frameprep.InvalidRequestError, "pad"),
    (dict(dtype="uint8", mean=0.5), frameprep.InvalidRequestError, "mean"),
]


@pytest.mark.parametrize("case", range(len(BAD_INPUTS)))
def test_bad_input_gets_its_exception(client, case):
    kwargs, exc, text = BAD_INPUTS[case]
    kwargs = dict(kwargs)
    frame = kwargs.pop("frame", np.zeros((16, 16, 3), np.uint8))
    with pytest.raises(exc, match=text) as info:
        client.preprocess(frame, **kwargs)
    assert info.value.status == exc.status
    assert_serving(client)


def test_protocol_level_refusals(client):
    with pytest.raises(frameprep.RegionError):
        client.request(Request(kind=Kind.UNREGISTER, region_id=12345))
    req = Request(src_width=16, src_height=16, src_stride=48,
                  input_size=48 * 16, input_loc=Location.SHM, in_region=999)
    with pytest.raises(frameprep.FrameprepError) as info:
        client.request(req)
    assert info.value.status in (frameprep.RegionError.status,
                                 frameprep.InvalidRequestError.status)
    with pytest.raises(frameprep.InvalidRequestError, match="name"):
        client.request(Request(kind=Kind.REGISTER, region_size=4096,
                               region_name="/no/slashes"))
    with pytest.raises(frameprep.InvalidRequestError):
        client.request(Request(kind=99))
    assert_serving(client)


def test_error_classes_cover_every_status():
    for status in range(1, 19):
        exc = frameprep.error_for_status(status, "why")
        assert type(exc) is frameprep.BY_STATUS[status]
        assert exc.status == status and exc.message == "why"
    assert isinstance(frameprep.error_for_status(10, ""), ConnectionError)
    assert isinstance(frameprep.error_for_status(11, ""), TimeoutError)
    assert frameprep.error_for_status(1000, "x").status == 1000


def test_no_daemon_is_a_connection_error(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(ConnectionError):
        frameprep.Client(f"ipc://{tmp_path}/nobody.sock", timeout=2)
    assert time.monotonic() - t0 < 10


def test_closed_client(daemon):
    c = frameprep.Client(daemon.url, timeout=10)
    c.close()
    c.close()
    with pytest.raises(frameprep.ClosedError):
        c.info()


def test_daemon_killed_mid_request(tmp_path):
    d = Daemon(tmp_path)
    timeout = 4.0
    try:
        c = frameprep.Client(d.url, timeout=timeout)
        c.info()
        ac = frameprep.AsyncClient(d.url, timeout=timeout)
        big = np.random.default_rng(1).integers(0, 255, (3000, 5000, 3),
                                                np.uint8)
        outcome = {}

        def send():
            t0 = time.monotonic()
            try:
                for _ in range(50):  # the daemon dies during one of these
                    c.preprocess(big, size=(2048, 2048))
                outcome["error"] = None
            except frameprep.FrameprepError as exc:
                outcome["error"] = exc
            outcome["seconds"] = time.monotonic() - t0

        t = threading.Thread(target=send)
        t.start()
        time.sleep(1.0)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        killed = time.monotonic()
        t.join(timeout + 30)
        assert not t.is_alive(), "the request hangs past the timeout"
        assert isinstance(outcome["error"], (TimeoutError, ConnectionError)), \
            f"the call failed with {outcome['error']!r}"
        assert time.monotonic() - killed < timeout + 5
        # The next request on the dead connection fails just as quickly.
        t0 = time.monotonic()
        with pytest.raises((TimeoutError, ConnectionError)):
            c.info()
        assert time.monotonic() - t0 < timeout + 5
        c.close()
        t0 = time.monotonic()
        with pytest.raises((TimeoutError, ConnectionError)):
            asyncio.run(ac.info())
        assert time.monotonic() - t0 < timeout + 5
        ac.close()
    finally:
        d.kill()


@pytest.mark.parametrize("path", ["simple", "ring"])
def test_waiting_call_lets_other_threads_run(tmp_path, path):
    """A call waiting for the daemon's reply holds no GIL: with the daemon
    stopped (SIGSTOP) a call of another thread stays in its wait while
    this thread goes on running Python, and after SIGCONT it returns the
    same tensor as before. A call that kept the GIL while waiting would
    stall this thread until the client's timeout (10 s: the gap below),
    and then fail with TimeoutError. The bound on the gap is half the
    timeout, not a scheduling window: a thread beside stress-ng --cpu 2
    on 2 cores was seen descheduled for 0.35 s."""
    d = Daemon(tmp_path)
    timeout = 10.0
    try:
        frame = np.random.default_rng(3).integers(0, 256, (120, 160, 3),
                                                  np.uint8)
        with frameprep.Client(d.url, timeout=timeout) as c:
            ring = (c.ring(slots=2, frame=frame.shape, size=(64, 64))
                    if path == "ring" else None)

            def call():
                if ring is None:
                    return c.preprocess(frame, size=(64, 64)).tensor.copy()
                with ring.preprocess(frame) as r:
                    return r.tensor.copy()

            want = call()  # the stage or the ring registered, warm
            out = {}
            entered = threading.Event()

            def waiter():
                entered.set()
                try:
                    out["tensor"] = call()
                except BaseException as exc:  # checked below
                    out["error"] = exc

            d.pause()
            try:
                t = threading.Thread(target=waiter)
                t0 = last = time.monotonic()  # a stall after this counts
                gap = 0.0
                t.start()
                assert entered.wait(timeout)
                while last - t0 < 1.0:
                    now = time.monotonic()
                    gap, last = max(gap, now - last), now
                waiting = t.is_alive()
            finally:
                d.resume()
            t.join(timeout + 5)
            assert not t.is_alive()
            assert "error" not in out, out
            assert gap < timeout / 2, f"this thread stalled {gap:.3f} s"
            assert waiting, f"the call returned early: {out}"
            np.testing.assert_array_equal(out["tensor"], want)
            if ring is not None:
                ring.close()
    finally:
        d.kill()


def test_module_cli(daemon, tmp_path):
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "frameprep", "info", "--socket",
                        daemon.url], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "backend: cpu" in r.stdout
    out = tmp_path / "py.npy"
    r = subprocess.run([sys.executable, "-m", "frameprep", "send",
                        str(IMAGES / "coffee.png"), "--socket", daemon.url,
                        "--size", "320x320", "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "shape     (1, 3, 320, 320)" in r.stdout
    cout = tmp_path / "c.npy"
    subprocess.run([str(CLI), "send", str(IMAGES / "coffee.png"), "--socket",
                    daemon.url, "--size", "320x320", "-o", str(cout)],
                   check=True, capture_output=True, timeout=60)
    assert np.load(out).tobytes() == np.load(cout).tobytes()
    r = subprocess.run([sys.executable, "-m", "frameprep", "send",
                        str(IMAGES / "coffee.png"), "--socket", daemon.url,
                        "--size", "320x320", "--shm", "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "(shared memory)" in r.stdout
    assert np.load(out).tobytes() == np.load(cout).tobytes()
    r = subprocess.run([sys.executable, "-m", "frameprep", "send",
                        str(tmp_path / "missing.png"), "--socket", daemon.url],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "missing.png" in r.stderr


def test_frameprep_socket_and_urls(daemon, monkeypatch, tmp_path):
    """FRAMEPREP_SOCKET comes before the built-in default (the C library's
    rule); URLs other than ipc:// or tcp:// and lists are refused; a path
    that is no socket says so as the C CLI does."""
    monkeypatch.setenv("FRAMEPREP_SOCKET", daemon.url)
    assert frameprep.default_address() == daemon.url
    with frameprep.Client() as c:
        assert c.address == daemon.url and c.info()["backend"] == "cpu"
    monkeypatch.delenv("FRAMEPREP_SOCKET")
    assert frameprep.default_address() != daemon.url
    for url in ("foo://x", f"{daemon.url},{daemon.url}"):
        with pytest.raises(frameprep.InvalidRequestError):
            frameprep.Client(url)
    with pytest.raises(frameprep.TransportError,
                       match=r"no socket at .*none\.sock \(is frameprepd "
                             r"running\?\)"):
        frameprep.Client(f"ipc://{tmp_path}/none.sock")


def test_module_cli_exit_codes_match_the_c_cli(daemon, tmp_path):
    """python -m frameprep fails with the C CLI's exit status for the same
    failures (1 refused by the daemon, 2 usage, 3 input or transport), and
    with its words for a missing socket; a truncated JPEG is refused by
    both."""
    img = cv2.imread(str(IMAGES / "astronaut.png"))
    jpg = tmp_path / "a.jpg"
    cv2.imwrite(str(jpg), img)
    data = jpg.read_bytes()
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(data[:len(data) // 2])
    url = daemon.url
    nosock = f"ipc://{tmp_path}/none.sock"
    cases = [
        ("ok", ["send", str(jpg), "--socket", url], 0),
        ("no socket", ["send", str(jpg), "--socket", nosock], 3),
        ("info, no socket", ["info", "--socket", nosock], 3),
        ("missing image", ["send", str(tmp_path / "x.png"), "--socket", url],
         3),
        ("truncated JPEG", ["send", str(cut), "--socket", url], 3),
        ("bad URL", ["send", str(jpg), "--socket", "foo://x"], 2),
        ("std 0", ["send", str(jpg), "--socket", url, "--std", "0"], 2),
        ("size", ["send", str(jpg), "--socket", url, "--size", "0x9"], 2),
        ("pad", ["send", str(jpg), "--socket", url, "--pad", "300"], 2),
        ("option", ["send", str(jpg), "--bogus"], 2),
        ("over the limit", ["send", str(jpg), "--socket", url, "--size",
                            "60000x60000"], 1),
    ]
    for name, args, want in cases:
        c = subprocess.run([str(CLI), *args], capture_output=True,
                           text=True, timeout=60)
        py = subprocess.run([sys.executable, "-m", "frameprep", *args],
                            capture_output=True, text=True, timeout=60)
        assert (c.returncode, py.returncode) == (want, want), \
            (name, c.stderr, py.stderr)
        if name == "no socket":
            assert py.stderr == c.stderr
            assert "no socket at" in py.stderr and \
                "(is frameprepd running?)" in py.stderr
        if name == "truncated JPEG":
            assert "cut.jpg" in py.stderr and "cut.jpg" in c.stderr


def test_module_cli_without_opencv(daemon):
    code = ("import runpy, sys; sys.modules['cv2'] = None; "
            "sys.argv = ['frameprep', 'send', sys.argv[1], '--socket', "
            "sys.argv[2]]; runpy.run_module('frameprep', run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code,
                        str(IMAGES / "coffee.png"), daemon.url],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "OpenCV" in r.stderr and ".npy" in r.stderr
