"""The Python client's exact mode (rounding="opencv"), JPEG frames, crops
(ROIS) and one-request batches (BATCH) against a real frameprepd (CPU
backend): exact mode equal to OpenCV's pipeline bit for bit, a JPEG's
tensor equal to the C CLI's and within 1 LSB of cv2.imdecode + letterbox,
crops within 1 LSB of cv2.resize of the crop (+ copyMakeBorder), a bad box
refused with its index, a batch equal to single requests."""
import subprocess
import sys

import cv2
import numpy as np
import pytest

import frameprep
from conftest import CLI, IMAGES, ROOT, serving
from frameprep.protocol import Request, Rounding

sys.path.insert(0, str(ROOT / "tests" / "ops"))
from compare_opencv import letterbox_ref  # noqa: E402

PAD = 114


def photo(name):
    img = cv2.imread(str(IMAGES / name), cv2.IMREAD_COLOR)
    assert img is not None, name
    return img


def chw_rgb(img):
    """(1, 3, H, W) of a BGR uint8 image, channels RGB."""
    return np.ascontiguousarray(img[:, :, ::-1].transpose(2, 0, 1))[None]


def opencv_tensor(img, ow, oh, stretch):
    """OpenCV's pipeline (compare_exact.py): cv2.resize INTER_LINEAR (+
    copyMakeBorder 114 for letterbox), RGB, NCHW, numpy float32 / 255."""
    if stretch:
        ref = cv2.resize(img, (ow, oh), interpolation=cv2.INTER_LINEAR)
    else:
        ref = letterbox_ref(img, ow, oh)
    return chw_rgb(ref).astype(np.float32) / np.float32(255)


def same_bits(a, b):
    """Whether two arrays have one shape, one dtype and the same bytes."""
    return a.shape == b.shape and a.dtype == b.dtype and \
        a.tobytes() == b.tobytes()


def test_constants_are_protocol_h():
    """Rounding and the ROIS and BATCH kinds are protocol.h's (the C
    library's values, through frameprep._native)."""
    from frameprep import _native, protocol
    c = _native.constants
    assert {m.name: int(m) for m in Rounding} == {
        k[len("FPREP_ROUNDING_"):]: v for k, v in c.items()
        if k.startswith("FPREP_ROUNDING_")}
    assert (protocol.Kind.ROIS, protocol.Kind.BATCH) == (
        c["FPREP_KIND_ROIS"], c["FPREP_KIND_BATCH"])


def test_rounding_is_on_the_wire():
    """rounding goes in bits 4-7 of byte 40 (the resize byte)."""
    assert Request(rounding=Rounding.OPENCV).encode()[40] == 0x11
    assert Request(resize=2, rounding=1).encode()[40] == 0x12
    assert Request().encode()[40] == 0x01
    with pytest.raises(frameprep.InvalidRequestError, match="rounding"):
        frameprep.Options.make(rounding="nearest")  # type: ignore


@pytest.mark.parametrize("name", ["astronaut.png", "rocket.jpg"])
def test_exact_mode_equals_opencv_bit_for_bit(client, name):
    """rounding="opencv", scale 1 and std 255 (a pipeline that divides by
    255, as protocol.h says): every float equals OpenCV + numpy's in every
    bit, letterboxed and stretched, single call, batch and ring; the float
    mode differs somewhere (the comparison can fail)."""
    img = photo(name)
    differs = False
    for (ow, oh), stretch in (((640, 640), False), ((333, 517), False),
                              ((416, 256), True)):
        want = opencv_tensor(img, ow, oh, stretch)
        opts = dict(size=(ow, oh), resize="stretch" if stretch else
                    "letterbox", scale=1.0, std=255.0)
        got = client.preprocess(img, rounding="opencv", **opts).tensor
        assert got.shape == want.shape
        assert same_bits(got, want), (name, ow, oh, stretch)
        flt = client.preprocess(img, **opts).tensor
        differs = differs or not same_bits(flt, want)
        assert np.abs(flt - want).max() <= 1 / 255 + 1e-6
        batch = client.preprocess_batch([img, img[1:]], rounding="opencv",
                                        **opts)
        assert same_bits(batch.tensor[:1], want)
    assert differs
    with client.ring(slots=2, frame=img.shape, size=(640, 640), scale=1.0,
                     std=255.0, rounding="opencv") as ring:
        with ring.preprocess(img) as rr:
            want = opencv_tensor(img, 640, 640, False)
            assert same_bits(rr.tensor, want)


def test_cli_rounding(daemon, tmp_path):
    """python -m frameprep send --rounding opencv equals the C CLI's."""
    out, cout = tmp_path / "py.npy", tmp_path / "c.npy"
    args = [str(IMAGES / "astronaut.png"), "--socket", daemon.url, "--size",
            "320x320", "--rounding", "opencv", "--scale", "1", "--std",
            "255"]
    r = subprocess.run([sys.executable, "-m", "frameprep", "send", *args,
                        "-o", str(out)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    subprocess.run([str(CLI), "send", *args, "-o", str(cout)], check=True,
                   capture_output=True, timeout=60)
    assert same_bits(np.load(out), np.load(cout))
    want = opencv_tensor(photo("astronaut.png"), 320, 320, False)
    assert same_bits(np.load(out), want)


def test_jpeg_frames(client, daemon, tmp_path):
    """A JPEG's bytes (bytes, bytearray, memoryview or a uint8 array) are
    decoded by the daemon: the tensor equals the C CLI's --jpeg bit for
    bit, is within 1 LSB of cv2.imdecode + letterbox, and the result
    carries the decoded size and decode time; the transform uses the
    decoded size. The Python CLI's --jpeg equals the C CLI's."""
    path = IMAGES / "rocket.jpg"
    data = path.read_bytes()
    dec = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    h, w = dec.shape[:2]
    cout = tmp_path / "c.npy"
    subprocess.run([str(CLI), "send", str(path), "--jpeg", "--socket",
                    daemon.url, "--size", "320x320", "-o", str(cout)],
                   check=True, capture_output=True, timeout=60)
    want = np.load(cout)
    ref = chw_rgb(letterbox_ref(dec, 320, 320)).astype(np.float32) / 255
    for form in (data, bytearray(data), memoryview(data),
                 np.frombuffer(data, np.uint8)):
        r = client.preprocess(form, size=(320, 320), format="jpeg")
        assert same_bits(r.tensor, want)
        assert np.abs(r.tensor - ref).max() <= 1 / 255 + 1e-6
        assert r.decoded_size == (w, h)
        assert r.reply.decoded_width == w and r.timings.decode_us > 0
        assert r.transform.src_width == w and r.transform.src_height == h
    plain = client.preprocess(dec, size=(320, 320))
    assert plain.decoded_size is None and plain.timings.decode_us == 0
    out = tmp_path / "py.npy"
    r2 = subprocess.run([sys.executable, "-m", "frameprep", "send",
                         str(path), "--jpeg", "--socket", daemon.url,
                         "--size", "320x320", "-o", str(out)],
                        capture_output=True, text=True, timeout=60)
    assert r2.returncode == 0, r2.stderr
    assert f"decoded   JPEG {w}x{h} in" in r2.stdout
    assert same_bits(np.load(out), want)
    r3 = subprocess.run([sys.executable, "-m", "frameprep", "send",
                         str(path), "--jpeg", "--shm", "--socket",
                         daemon.url, "--size", "320x320", "-o", str(out)],
                        capture_output=True, text=True, timeout=60)
    assert r3.returncode == 0, r3.stderr
    assert "(shared memory)" in r3.stdout
    assert same_bits(np.load(out), want)
    with pytest.raises(frameprep.InvalidRequestError):
        client.preprocess(data[: len(data) // 2], format="jpeg")
    for bad in (b"", np.zeros((4, 4), np.uint8), "text"):
        with pytest.raises(frameprep.InvalidRequestError, match="jpeg"):
            client.preprocess(bad, format="jpeg")
    assert client.preprocess(dec, size=(32, 32)).tensor.shape == \
        (1, 3, 32, 32)


def box_ref(img, box, ow, oh, stretch):
    """compare_roi.py's reference: the frame bordered with the pad value,
    cropped to the box, letterboxed or stretched with OpenCV."""
    x, y, w, h = box
    m = max(0, -x, -y, x + w - img.shape[1], y + h - img.shape[0])
    big = cv2.copyMakeBorder(img, m, m, m, m, cv2.BORDER_CONSTANT,
                             value=(PAD,) * 3) if m else img
    crop = big[y + m:y + m + h, x + m:x + m + w]
    if stretch:
        return cv2.resize(crop, (ow, oh), interpolation=cv2.INTER_LINEAR)
    return letterbox_ref(crop, ow, oh)


def test_crops_within_one_lsb_of_opencv(client):
    """N boxes of one frame in one request: each row within 1 LSB of
    cv2.resize of the crop (+ copyMakeBorder), a box partly outside the
    frame padded; transforms give the box's origin and scale; an affine
    element matches cv2.warpAffine(WARP_INVERSE_MAP) within 1 LSB."""
    img = photo("astronaut.png")
    boxes = [(0, 0, 512, 512), (100, 50, 200, 120), (30, 200, 61, 250),
             (450, 400, 100, 150)]
    for resize in ("letterbox", "stretch"):
        r = client.crops(img, np.array(boxes, np.float32), size=(224, 224),
                         resize=resize, dtype="uint8")
        assert r.tensor.shape == (4, 3, 224, 224)
        assert len(r.transforms) == 4
        for k, b in enumerate(boxes):
            ref = chw_rgb(box_ref(img, b, 224, 224, resize == "stretch"))[0]
            d = np.abs(r.tensor[k].astype(int) - ref.astype(int)).max()
            assert d <= 1, (resize, b, d)
            xf = r.transforms[k]
            assert (xf.origin_x, xf.origin_y) == (b[0], b[1])
            back = xf.to_source([[xf.pad_x, xf.pad_y,
                                  xf.pad_x + xf.resized_w,
                                  xf.pad_y + xf.resized_h]])
            assert np.allclose(back, [[b[0], b[1], b[0] + b[2],
                                       b[1] + b[3]]], atol=0.5)
    m = [0.5, 0.1, 40.0, -0.1, 0.5, 60.0]
    r = client.crops(img, [boxes[1], {"affine": m}], size=(96, 64),
                     dtype="uint8")
    warp = cv2.warpAffine(img, np.array(m, np.float64).reshape(2, 3),
                          (96, 64), flags=cv2.INTER_LINEAR |
                          cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_CONSTANT,
                          borderValue=(PAD,) * 3)
    d = np.abs(r.tensor[1].astype(int) - chw_rgb(warp)[0].astype(int))
    assert d.max() <= 1 and r.transforms[1].affine
    out = np.zeros((2, 64, 96, 3), np.float32)
    r2 = client.crops(img, [boxes[1], {"affine": m}], size=(96, 64),
                      layout="nhwc", out=out)
    assert r2.tensor is out and out.any()


def test_bad_box_refused_with_its_index(client):
    """A box with w <= 0 or a non-finite value is refused with the
    element's index; a malformed item before sending; the daemon keeps
    serving."""
    img = photo("astronaut.png")
    with pytest.raises(frameprep.InvalidRequestError, match="element 2"):
        client.crops(img, [(0, 0, 10, 10), (5, 5, 20, 20), (0, 0, -1, 10)])
    with pytest.raises(frameprep.InvalidRequestError, match="element 1"):
        client.crops(img, [(0, 0, 10, 10), (float("nan"), 0, 5, 5)])
    for bad in ([(0, 0, 10)], [{"affine": [1, 2]}], [], np.zeros((3, 5))):
        with pytest.raises(frameprep.InvalidRequestError):
            client.crops(img, bad)
    with pytest.raises(frameprep.LimitExceededError, match="max_elements"):
        n = client.limits()["max_elements"] + 1
        client.crops(img, np.tile([0.0, 0.0, 8.0, 8.0], (n, 1)),
                     size=(8, 8))
    assert client.crops(img, [(0, 0, 8, 8)], size=(8, 8)).tensor.shape == \
        (1, 3, 8, 8)


class _Capturing:
    """A stand-in for the client's native connection that appends each
    call's (name, args) to sent."""

    def __init__(self, native, sent):
        self._native, self._sent = native, sent

    def __getattr__(self, name):
        fn = getattr(self._native, name)

        def call(*args):
            self._sent.append((name, args))
            return fn(*args)
        return call


def test_box_arrays_go_as_float32_bytes(client, monkeypatch):
    """An (N, 4) float array of boxes goes to the C extension as the
    bytes of its float32 values (no tuple a box): float32, float64, a
    strided view and a list of tuples give the same tensor and
    transforms; a float64 value beyond float32 is refused by index with
    no warning; the result's transforms and reply are made when first
    read."""
    import warnings
    img = photo("astronaut.png")
    boxes = [(0.5, 1.0, 100.25, 90.0), (50, 60, 200, 120),
             (400, 400, 112, 90)]
    want = client.crops(img, boxes, size=(64, 48))
    wide = np.zeros((3, 6), np.float64)
    wide[:, 1:5] = boxes
    sent = []
    native = client._s.native
    monkeypatch.setattr(client._s, "native", _Capturing(native, sent))
    for arr in (np.array(boxes, np.float32), np.array(boxes, np.float64),
                wide[:, 1:5]):
        got = client.crops(img, arr, size=(64, 48))
        assert same_bits(got.tensor, want.tensor)
        assert got.transforms == want.transforms
        assert got.reply.request_id == got.request_id
    monkeypatch.setattr(client._s, "native", native)
    assert [name for name, _ in sent] == ["elements"] * 3
    assert all(args[1] == np.array(boxes, np.float32).tobytes()
               for _, args in sent)
    big = np.array(boxes, np.float64)
    big[2, 1] = 1e39
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(frameprep.InvalidRequestError,
                           match="element 2"):
            client.crops(img, big, size=(64, 48))
    with pytest.raises(AttributeError, match="read-only"):
        want.tensor = None
    assert "3 transforms" in repr(want)


class _Counting:
    """A stand-in for the client's native connection that counts the
    requests of each kind of call."""

    def __init__(self, native):
        self._native = native
        self.calls = {}

    def __getattr__(self, name):
        fn = getattr(self._native, name)

        def counted(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*args)
        return counted


def test_crops_of_a_ring_frame_read_in_place(client, daemon, monkeypatch):
    """A RingFrame reserved in a ring of the client goes as (region,
    offset), its bytes not in the request; its crops equal the numpy
    frame's bit for bit (a view of rows too) and it stays reserved, so it
    is cropped again; once cancelled it is refused, and so is a ring frame
    of another connection. A batch of ring frames is one BATCH request
    naming the region, equal to the numpy frames' batch."""
    img = photo("astronaut.png")
    boxes = [(0, 0, 100, 100), (50, 60, 200, 120), (400, 400, 112, 90)]
    want = client.crops(img, boxes, size=(64, 48))
    rows = client.crops(np.ascontiguousarray(img[10:300]), boxes,
                        size=(64, 48))
    sent = []
    native = client._s.native

    with client.ring(slots=1, frame=img.shape, size=(8, 8)) as ring:
        buf = ring.next_frame()
        buf[:] = img
        monkeypatch.setattr(client._s, "native", _Capturing(native, sent))
        for _ in range(2):
            got = client.crops(buf, boxes, size=(64, 48))
            assert same_bits(got.tensor, want.tensor)
            assert got.transforms == want.transforms
        got = client.crops(buf[10:300], boxes, size=(64, 48))
        assert same_bits(got.tensor, rows.tensor)
        monkeypatch.setattr(client._s, "native", native)
        assert [name for name, _ in sent] == ["elements"] * 3
        at = buf.__array_interface__["data"][0] - \
            ring._c.base  # the slot's frame area
        # Client.elements's input_loc (SHM), in_region, in_offset.
        assert sent[0][1][11:14] == (1, ring.region_id, at)
        assert sent[2][1][11:14] == (1, ring.region_id,
                                     at + 10 * img.shape[1] * 3)
        with frameprep.Client(daemon.url) as other:
            with pytest.raises(frameprep.InvalidRequestError,
                               match="another connection"):
                other.crops(buf, boxes, size=(64, 48))
        buf.cancel()
        with pytest.raises(frameprep.InvalidRequestError, match="cancelled"):
            client.crops(buf, boxes, size=(64, 48))
    # A batch of ring frames: one BATCH request naming the region.
    fs = [img, 255 - img, np.ascontiguousarray(img[::-1])]
    batch = client.preprocess_batch(fs, size=(96, 64)).tensor
    with client.ring(slots=3, frame=img.shape, size=(8, 8)) as ring:
        bufs = [ring.next_frame() for _ in fs]
        for b, f in zip(bufs, fs):
            b[:] = f
        del sent[:]
        monkeypatch.setattr(client._s, "native", _Capturing(native, sent))
        got = client.preprocess_batch(bufs, size=(96, 64)).tensor
        monkeypatch.setattr(client._s, "native", native)
        assert same_bits(got, batch)
        assert [name for name, _ in sent] == ["elements"]
        args = sent[0][1]
        assert args[11:13] == (1, ring.region_id)
        bases = [b.__array_interface__["data"][0] - ring._c.base
                 for b in bufs]
        assert args[13] == min(bases)
        assert sorted(e[8] for e in args[1]) == \
            sorted(b - min(bases) for b in bases)
        for b in bufs:
            b.cancel()
    # Not packed (channels reversed): copied into the request as before.
    with client.ring(slots=1, frame=img.shape, size=(8, 8)) as ring:
        buf = ring.next_frame()
        buf[:] = img
        rgb = client.crops(buf[:, :, ::-1], boxes, size=(64, 48),
                           format="rgb8")
        assert same_bits(rgb.tensor, want.tensor)
        buf.cancel()


def test_crops_cuda_out_refused_without_a_gpu(client, daemon):
    """A non-numpy out: the asyncio client refuses it before sending; the
    blocking client takes only CUDA arrays (an object that is neither
    numpy nor CUDA is refused by name)."""
    import asyncio
    img = photo("astronaut.png")

    async def run():
        async with frameprep.AsyncClient(daemon.url) as ac:
            await ac.crops(img, [(0, 0, 8, 8)], size=(8, 8), out=[0.0])

    with pytest.raises(frameprep.InvalidRequestError, match="numpy"):
        asyncio.run(run())
    with pytest.raises(frameprep.InvalidRequestError,
                       match="__cuda_array_interface__"):
        client.crops(img, [(0, 0, 8, 8)], size=(8, 8), out=[0.0])


def test_batch_is_one_request(client, monkeypatch):
    """4 frames of one shape go in ONE BATCH request, equal to 4 single
    requests bit for bit (also into out=, NHWC f16); mixed shapes still go
    one request per frame."""
    img = photo("astronaut.png")
    fs = [img, img[::-1].copy(), np.ascontiguousarray(img[:, ::-1]),
          255 - img]
    want = np.concatenate([client.preprocess(f, size=(160, 96)).tensor
                           for f in fs])
    counting = _Counting(client._s.native)
    monkeypatch.setattr(client._s, "native", counting)
    got = client.preprocess_batch(fs, size=(160, 96)).tensor
    assert counting.calls == {"elements": 1}
    assert got.shape == (4, 3, 96, 160) and same_bits(got, want)
    out = np.zeros((4, 96, 160, 3), np.float16)
    assert client.preprocess_batch(fs, out=out, size=(160, 96),
                                   layout="nhwc",
                                   dtype="float16").tensor is out
    monkeypatch.setattr(client._s, "native", counting._native)
    nhwc = [client.preprocess(f, size=(160, 96), layout="nhwc",
                              dtype="float16").tensor[0] for f in fs]
    assert all(same_bits(out[k], nhwc[k]) for k in range(4))
    counting = _Counting(client._s.native)
    monkeypatch.setattr(client._s, "native", counting)
    stacked = client.preprocess_batch(np.stack(fs), size=(160, 96)).tensor
    assert counting.calls == {"elements": 1} and same_bits(stacked, want)
    counting = _Counting(client._s.native)
    monkeypatch.setattr(client._s, "native", counting)
    mixed = client.preprocess_batch([img, img[1:]], size=(160, 96))
    assert counting.calls == {"frame": 2} and mixed.tensor.shape[0] == 2


def test_async_crops_and_jpeg(daemon):
    """AsyncClient: crops of a frame that had to be copied (channels
    reversed: not packed), and of an AsyncRing frame read in place, equal
    the blocking client's; a JPEG and exact
    mode go through it too."""
    import asyncio
    img = photo("coffee.png")
    rgb = img[:, :, ::-1]
    boxes = [(10, 20, 100, 80), (200, 100, 150, 150)]
    data = (IMAGES / "rocket.jpg").read_bytes()

    async def run():
        async with frameprep.AsyncClient(daemon.url, timeout=60) as ac:
            r = await ac.crops(rgb, boxes, size=(64, 64), format="rgb8")
            j = await ac.preprocess(np.frombuffer(data, np.uint8),
                                    size=(96, 96), format="jpeg")
            e = await ac.preprocess(img, size=(96, 96), rounding="opencv",
                                    scale=1.0, std=255.0)
            return r, j, e

    async def ring_crops():
        async with frameprep.AsyncClient(daemon.url, timeout=60) as ac:
            ring = await ac.ring(slots=1, frame=img.shape, size=(8, 8))
            async with ring:
                buf = await ring.next_frame()
                buf[:] = img
                got = await ac.crops(buf, boxes, size=(64, 64))
                buf.cancel()
                return got

    r, j, e = asyncio.run(run())
    in_ring = asyncio.run(ring_crops())
    with frameprep.Client(daemon.url, timeout=60) as c:
        want = c.crops(np.ascontiguousarray(img), boxes, size=(64, 64))
        assert same_bits(r.tensor, want.tensor)
        assert same_bits(in_ring.tensor, want.tensor)
        assert r.transforms == want.transforms
        assert same_bits(j.tensor, c.preprocess(data, size=(96, 96),
                                                format="jpeg").tensor)
        assert j.decoded_size is not None
    assert same_bits(e.tensor, opencv_tensor(img, 96, 96, False))


def test_jpeg_ring(client):
    """A ring of format jpeg: slots of N bytes; a file's bytes copied in,
    written in place into next_frame((1, n)), or into a whole slot (bytes
    after the end marker ignored) give the inline request's tensor, and
    the transform uses the decoded size; a file larger than a slot is
    refused before sending."""
    data = (IMAGES / "rocket.jpg").read_bytes()
    raw = np.frombuffer(data, np.uint8)
    want = client.preprocess(data, size=(320, 320), format="jpeg")
    with client.ring(slots=2, frame=(1, 200000), format="jpeg",
                     size=(320, 320)) as ring:
        with ring.preprocess(raw) as r:
            assert same_bits(r.tensor, want.tensor)
            assert r.decoded_size == want.decoded_size
            assert r.transform == want.transform
            assert r.transform.src_width == want.decoded_size[0]
        buf = ring.next_frame((1, len(data)))
        buf[0] = raw
        with ring.preprocess(buf) as r:
            assert same_bits(r.tensor, want.tensor)
        buf = ring.next_frame()
        buf[0, :len(data)] = raw
        buf[0, len(data):] = 0x55
        with ring.preprocess(buf) as r:
            assert same_bits(r.tensor, want.tensor)
        with pytest.raises(frameprep.LimitExceededError, match="slot"):
            ring.preprocess(np.zeros(200001, np.uint8))


def test_limits(tmp_path):
    """Against a daemon with small limits: a JPEG wider than max_width is
    refused naming the limit; crops beyond max_elements or
    max_batch_bytes are refused before sending; a batch beyond them goes
    one request per frame, with the same tensors."""
    gen = serving(tmp_path, "--max-width", "600", "--max-elements", "3",
                  "--max-batch-bytes", str(3 * 3 * 64 * 64 * 4))
    d = next(gen)
    try:
        with frameprep.Client(d.url, timeout=60) as c:
            data = (IMAGES / "rocket.jpg").read_bytes()  # 640 wide
            with pytest.raises(frameprep.LimitExceededError,
                               match="max_width"):
                c.preprocess(data, format="jpeg")
            big = photo("coffee.png")[:, :600]
            with pytest.raises(frameprep.LimitExceededError,
                               match="source bytes"):
                c.crops(big, [(0, 0, 8, 8)], size=(8, 8))
            img = np.ascontiguousarray(big[:100, :120])
            box = (0.0, 0.0, 32.0, 32.0)
            assert c.crops(img, [box] * 3, size=(64, 64)).tensor.shape == \
                (3, 3, 64, 64)
            with pytest.raises(frameprep.LimitExceededError,
                               match="max_elements"):
                c.crops(img, [box] * 4, size=(64, 64))
            with pytest.raises(frameprep.LimitExceededError,
                               match="max_batch_bytes"):
                c.crops(img, [box] * 2, size=(128, 64))
            fs = [img, 255 - img, img, img[::-1].copy()]
            want = np.concatenate([c.preprocess(f, size=(64, 64)).tensor
                                   for f in fs])
            assert same_bits(c.preprocess_batch(fs, size=(64, 64)).tensor,
                             want)
            assert same_bits(
                c.preprocess_batch(fs[:3], size=(64, 64)).tensor, want[:3])
    finally:
        with pytest.raises(StopIteration):
            next(gen)


def test_batch_transforms_map_each_frame_back(client):
    """preprocess_batch returns a BatchResult whose transforms[k] is frame
    k's own (frames of different sizes: one request each; of one size:
    one BATCH request): a box drawn in frame k, found in row k of the
    tensor, maps back through transforms[k].to_source to where it was
    drawn (within a pixel), and equals the single call's transform; an
    empty batch raises ValueError."""
    sizes = [(480, 640), (300, 200), (120, 500)]
    fs, boxes = [], []
    for k, (h, w) in enumerate(sizes):
        f = np.zeros((h, w, 3), np.uint8)
        x0, y0, x1, y1 = w // 5 + 7 * k, h // 4, w // 2 + 3 * k, h // 2
        f[y0:y1, x0:x1] = 255
        fs.append(f)
        boxes.append((x0, y0, x1, y1))

    def found(row):
        """The white box's (x1, y1, x2, y2) in one tensor row."""
        ys, xs = np.nonzero(row[0] > 0.99)
        return np.array([[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]],
                        np.float64)

    for frames in (fs, [fs[0], fs[0][::-1].copy(), 255 - fs[0]]):
        got = client.preprocess_batch(frames, size=(160, 128))
        assert isinstance(got, frameprep.BatchResult)
        assert len(got.transforms) == len(frames)
        for k, f in enumerate(frames):
            single = client.preprocess(f, size=(160, 128)).transform
            xf = got.transforms[k]
            assert (xf.scale_x, xf.scale_y, xf.pad_x, xf.pad_y) == \
                pytest.approx((single.scale_x, single.scale_y,
                               single.pad_x, single.pad_y), rel=1e-6)
            assert (xf.origin_x, xf.origin_y) == (0, 0)
        for k in range(len(fs) if frames is fs else 1):
            back = got.transforms[k].to_source(found(got.tensor[k]))
            assert np.abs(back - np.array([boxes[k]])).max() <= \
                1.0 / got.transforms[k].scale_x + 1, (k, back, boxes[k])
    with pytest.raises(ValueError, match="at least one frame"):
        client.preprocess_batch([], size=(160, 128))
    with pytest.raises(frameprep.InvalidRequestError):
        client.preprocess_batch((), size=(160, 128))
