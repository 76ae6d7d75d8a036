"""CUDA regions from Python (frameprep.cuda).

Everywhere: the CPU backend refuses REGISTER_CUDA with a clear error; a
CUDA-looking tensor without cuda-python gives an ImportError that names the
extra; the DLPack capsule reader and writer round-trip through ctypes.

With a GPU (skipped otherwise: pytest.skip): a daemon on device 0 writes
tensors straight into element k of a (N, 3, H, W) batch the model will
consume, crops of one frame (ROIS) and a batch of frames (BATCH) into one
(N, 3, H, W) tensor in one request, reads frames from a CUDA uint8 (H, W,
3) tensor, and every result equals the CPU reference; results export
__cuda_array_interface__ v3 and DLPack over the caller's memory; video
streams decoded on the GPU write their frames into a torch CUDA tensor
(out=), equal to the same streams' inline tensors, and too little room is
the daemon's ELIMIT.
"""
import ctypes
import os
import pathlib
import types

import numpy as np
import pytest

import frameprep
from conftest import IMAGES, serving
from frameprep import cuda
from frameprep.protocol import Kind, Request


def test_cpu_backend_refuses_cuda_regions(client):
    req = Request(kind=Kind.REGISTER_CUDA, region_size=4096,
                  cuda_handle=bytes(range(64)), cuda_uuid=bytes(16))
    with pytest.raises(frameprep.UnsupportedError, match="GPU backend"):
        client.request(req)
    with pytest.raises(frameprep.InvalidRequestError, match="region_size"):
        client.request(Request(kind=Kind.REGISTER_CUDA, region_size=0))
    frame = np.full((48, 64, 3), 9, np.uint8)
    assert client.preprocess(frame, size=(32, 32)).tensor.shape == \
        (1, 3, 32, 32)


class _FakeCuda:
    """Claims to be a CUDA array; any driver call on it must fail."""

    __cuda_array_interface__ = {"version": 3, "shape": (3, 32, 32),
                                "typestr": "<f4", "data": (4096, False),
                                "strides": None}


def test_cuda_out_needs_a_gpu(client):
    """A CUDA tensor is looked up by the C library (cuda_ptr.c): without a
    CUDA driver it says so (UnsupportedError); with one, a pointer that is
    not device memory is refused (InvalidRequestError or CudaError)."""
    frame = np.zeros((48, 64, 3), np.uint8)
    import ctypes.util
    if ctypes.util.find_library("cuda") is None:
        with pytest.raises(frameprep.UnsupportedError,
                           match="no CUDA driver"):
            client.preprocess(frame, size=(32, 32), out=_FakeCuda())
    else:
        with pytest.raises(frameprep.FrameprepError):
            client.preprocess(frame, size=(32, 32), out=_FakeCuda())


class _DLOnly:
    """Exposes only DLPack, from a CudaTensor's capsule."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, **kw):
        return self._t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_dlpack_round_trip_through_ctypes():
    arr = cuda.DeviceArray(0x7f0000001000, (2, 3, 4, 5), (240, 80, 20, 4),
                           "<f4", 1, 480)
    t = cuda.CudaTensor(arr)
    cai = t.__cuda_array_interface__
    assert cai["version"] == 3 and cai["stream"] is None
    assert cai["data"] == (0x7f0000001000, False)
    assert t.__dlpack_device__() == (2, 1)
    back = cuda.describe(_DLOnly(t))
    assert back.ptr == arr.ptr and back.shape == arr.shape
    assert back.strides == arr.strides and back.typestr == "<f4"
    assert back.device == 1 and back.contiguous()
    # A consumer takes the capsule and calls the deleter itself.
    cap = t.__dlpack__()
    addr = ctypes.pythonapi.PyCapsule_GetPointer(ctypes.py_object(cap),
                                                 b"dltensor")
    assert addr in cuda._exported
    mt = cuda._DLManagedTensor.from_address(addr)
    mt.deleter(ctypes.pointer(mt))
    assert addr not in cuda._exported
    del cap
    left = len(cuda._exported)
    cap = t.__dlpack__()
    del cap  # unconsumed: its destructor frees it
    assert len(cuda._exported) == left


class _FakeDriver:
    """What the C library's driver lookups would say of a process's
    allocations ({buffer ID: (base, size)}), counting each kind of call:
    cuda_pointer (one cheap driver call) and cuda_allocation (the full
    lookup: address range, IPC handle, UUID)."""

    def __init__(self):
        self.allocs = {}
        self.calls = {"pointer": 0, "allocation": 0}

    def _find(self, ptr):
        for bid, (base, size) in self.allocs.items():
            if base <= ptr < base + size:
                return bid, base, size
        raise frameprep.InvalidRequestError(
            f"pointer {ptr:#x} is not CUDA device memory")

    def cuda_pointer(self, ptr):
        self.calls["pointer"] += 1
        return self._find(ptr)[0], 0

    def cuda_allocation(self, ptr):
        self.calls["allocation"] += 1
        bid, base, size = self._find(ptr)
        return base, size, bid.to_bytes(64, "little"), bytes(16), 0


def test_regions_look_up_an_allocation_once_per_buffer_id(monkeypatch):
    """Regions keeps each allocation's region by its buffer ID: the full
    lookup and REGISTER_CUDA happen once, then one cheap driver call a
    request, with the buffer's offset in the allocation; memory freed and
    allocated again at the same address (a new buffer ID) is registered
    anew and never maps to the old region; release unregisters every
    region and forgets them; a pointer the driver does not know is
    refused."""
    from frameprep import _native
    drv = _FakeDriver()
    monkeypatch.setattr(_native, "cuda_pointer", drv.cuda_pointer)
    monkeypatch.setattr(_native, "cuda_allocation", drv.cuda_allocation)
    sent = []

    def call(req):
        sent.append(req)
        return types.SimpleNamespace(region_id=10 + len(sent))  # a Reply

    regions = cuda.Regions(call)
    base = 0x7f0000000000
    drv.allocs[1] = (base, 1 << 20)

    def arr(ptr):
        return cuda.DeviceArray(ptr, (4,), (4,), "<f4", 0, 16)

    assert regions.region_of(arr(base + 4096)) == (11, 4096)
    for k in range(5):
        assert regions.region_of(arr(base + 256 * k)) == (11, 256 * k)
    assert drv.calls == {"pointer": 6, "allocation": 1}
    assert [r.kind for r in sent] == [Kind.REGISTER_CUDA]
    assert sent[0].region_size == 1 << 20
    assert sent[0].cuda_handle == (1).to_bytes(64, "little")
    # Freed and allocated again at the same base and size: a new ID.
    del drv.allocs[1]
    drv.allocs[2] = (base, 1 << 20)
    assert regions.region_of(arr(base + 64)) == (12, 64)
    assert sent[1].cuda_handle == (2).to_bytes(64, "little")
    assert regions.region_of(arr(base + 64)) == (12, 64)
    assert drv.calls["allocation"] == 2 and regions.count() == 2
    # describe reads the ordinal and the buffer ID with the cheap call,
    # not the full one, and region_of takes that ID: one call a request.
    n = drv.calls["pointer"]
    dev = cuda.describe(_FakeCudaAt(base + 128))
    assert (dev.device, dev.buffer_id) == (0, 2)
    assert regions.region_of(dev) == (12, 128)
    assert drv.calls == {"pointer": n + 1, "allocation": 2}
    regions.release()
    assert [(r.kind, r.region_id) for r in sent[2:]] == \
        [(Kind.UNREGISTER, 11), (Kind.UNREGISTER, 12)]
    assert regions.count() == 0
    assert regions.region_of(arr(base)) == (15, 0)
    with pytest.raises(frameprep.InvalidRequestError, match="not CUDA"):
        regions.region_of(arr(0x1000))


class _FakeCudaAt:
    """A CUDA-looking (3, 32, 32) f32 array at ptr."""

    def __init__(self, ptr):
        self.__cuda_array_interface__ = {
            "version": 3, "shape": (3, 32, 32), "typestr": "<f4",
            "data": (ptr, False), "strides": None}


# --- on a GPU -------------------------------------------------------------

def _torch_cuda():
    try:
        import torch
    except ImportError:
        pytest.skip("no torch to make CUDA tensors with")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    try:
        cuda.driver()
    except ImportError as exc:
        pytest.skip(str(exc))
    return torch


@pytest.fixture(scope="module")
def gpu_daemon(tmp_path_factory):
    torch = _torch_cuda()
    del torch
    yield from serving(tmp_path_factory.mktemp("gpu"), "--device", "0")


def _photo():
    import cv2
    for name in ("astronaut.png", "coffee.png", "chelsea.png"):
        path = pathlib.Path(IMAGES) / name
        if path.exists():
            return cv2.imread(str(path))
    pytest.skip(f"no photograph in {IMAGES}")


def test_batch_in_place_equals_cpu_reference(gpu_daemon, daemon):
    torch = _torch_cuda()
    img = _photo()
    with frameprep.Client(daemon.url) as ref_client:
        ref = ref_client.preprocess(img).tensor.copy()
    batch = torch.full((4, 3, 640, 640), float("nan"), device="cuda")
    with frameprep.Client(gpu_daemon.url) as client:
        rid, off = client.register_cuda(batch)
        for k in range(4):
            res = client.preprocess(img, out=batch[k])
            assert res.reply.output_loc == 2 and res.reply.payload_size == 0
            # The result is the caller's memory, exported both ways.
            assert res.tensor.__cuda_array_interface__["data"][0] == \
                batch[k].data_ptr()
            assert torch.from_dlpack(res.tensor).data_ptr() == \
                batch[k].data_ptr()
        # One region for the whole batch.
        assert client.register_cuda(batch[3]) == (rid, off + 3 * 3 * 640 *
                                                   640 * 4)
        got = batch.cpu().numpy()  # no synchronisation needed
        for k in range(4):
            np.testing.assert_allclose(got[k], ref[0], rtol=0,
                                       atol=1.0001 / 255)
        client.release_cuda()
    with frameprep.Client(gpu_daemon.url) as c:
        assert c.info()["cuda_regions_alive"] == 0


def test_host_frame_into_cuda_is_staged(gpu_daemon):
    """A numpy frame with a CUDA out takes the simple call's route: the
    frame is staged in a shared-memory region of the client (INFO counts
    it beside the CUDA region) and its request goes through the client's
    doorbell (a GPU daemon polls, --spin-us auto: every request after the
    first, which sets the doorbell up), with the tensor of the host call."""
    torch = _torch_cuda()
    img = _photo()
    out = torch.full((1, 3, 640, 640), float("nan"), device="cuda")
    with frameprep.Client(gpu_daemon.url) as client:
        want = client.preprocess(img).tensor.copy()
        client.preprocess(img, out=out)
        before = client.info()["doorbell_requests"]
        for _ in range(8):
            res = client.preprocess(img, out=out)
            assert res.reply.output_loc == 2
            assert res.reply.payload_size == 0
        np.testing.assert_array_equal(out.cpu().numpy(), want)
        info = client.info()
        assert info["regions"] >= 1  # the stage
        # Polled between calls, or rung where the kernel can.
        taken = info["doorbell_requests"] - before
        assert taken == 8 if info["doorbell_wake"] == "futex_waitv" \
            else taken >= 1
        client.release_cuda()


def test_preprocess_batch_into_cuda(gpu_daemon, daemon):
    """preprocess_batch with a CUDA out: each row written by the daemon
    in place, equal to the CPU reference; the out is returned."""
    torch = _torch_cuda()
    img = _photo()
    frames = [img, img[:400, :500], img[100:, 50:]]
    with frameprep.Client(daemon.url) as ref_client:
        ref = ref_client.preprocess_batch(frames).tensor
    batch = torch.full((3, 3, 640, 640), float("nan"), device="cuda")
    with frameprep.Client(gpu_daemon.url) as client:
        got = client.preprocess_batch(frames, out=batch)
        assert got.tensor is batch and len(got.transforms) == 3
        np.testing.assert_allclose(batch.cpu().numpy(), ref, rtol=0,
                                   atol=1.0001 / 255)
        client.release_cuda()


def test_crops_into_cuda(gpu_daemon, daemon):
    """crops with a CUDA out: ONE ROIS request, the daemon writes the N
    crops straight into the caller's (N, 3, H, W) tensor (no D2H), equal
    to the CPU reference within 1 LSB, from a numpy frame (sent) and from
    a ring frame (read where it lies, not sent); the result's tensor is
    the caller's memory; an out of another shape is refused before
    sending."""
    torch = _torch_cuda()
    img = _photo()
    h, w = img.shape[:2]
    boxes = [(0, 0, w // 2, h // 2), (w // 4, h // 5, w // 3, h // 4),
             (w - 60, h - 90, 120, 80), (10, 20, 33, 250)]
    with frameprep.Client(daemon.url) as ref_client:
        ref = {r: ref_client.crops(img, boxes, size=(160, 96), resize=r)
               for r in ("letterbox", "stretch")}
    out = torch.full((4, 3, 96, 160), float("nan"), device="cuda")
    with frameprep.Client(gpu_daemon.url) as client:
        for resize, want in ref.items():
            out.fill_(float("nan"))
            r = client.crops(img, boxes, size=(160, 96), resize=resize,
                             out=out)
            assert r.reply.output_loc == 2 and r.reply.t_d2h_us <= 5
            assert r.tensor.__cuda_array_interface__["data"][0] == \
                out.data_ptr()
            assert r.transforms == want.transforms
            np.testing.assert_allclose(out.cpu().numpy(), want.tensor,
                                       rtol=0, atol=1.0001 / 255)
        with client.ring(slots=1, frame=img.shape, size=(8, 8)) as ring:
            buf = ring.next_frame()
            buf[:] = img
            out.fill_(float("nan"))
            client.crops(buf, boxes, size=(160, 96), resize="stretch",
                         out=out)
            np.testing.assert_allclose(out.cpu().numpy(),
                                       ref["stretch"].tensor, rtol=0,
                                       atol=1.0001 / 255)
            buf.cancel()
        wide = torch.empty((4, 3, 96, 320), device="cuda")
        for bad in (out[:3], out[0], out.half(),
                    out.permute(0, 2, 3, 1), wide[..., ::2]):
            with pytest.raises(frameprep.InvalidRequestError, match="out"):
                client.crops(img, boxes, size=(160, 96), out=bad)
        client.release_cuda()


def test_cuda_out_looked_up_once_per_allocation(gpu_daemon, monkeypatch):
    """Crops into one CUDA out look its allocation up in full (address
    range, IPC handle, UUID) and register it once, then one
    cuPointerGetAttributes a request; the buffer ID is one per
    allocation (two rows of one tensor share it) and memory freed and
    allocated again has a new one, into which crops are right again; a
    host pointer is refused."""
    torch = _torch_cuda()
    from frameprep import _native
    img = _photo()
    boxes = np.array([(0, 0, 64, 48), (30, 40, 100, 90)], np.float32)
    full = []
    real = _native.cuda_allocation

    def counted(ptr):
        full.append(ptr)
        return real(ptr)
    monkeypatch.setattr(_native, "cuda_allocation", counted)
    with frameprep.Client(gpu_daemon.url) as client:
        out = torch.full((2, 3, 32, 32), float("nan"), device="cuda")
        for _ in range(5):
            client.crops(img, boxes, size=(32, 32), resize="stretch",
                         out=out)
        assert len(full) == 1 and client._cuda.count() == 1
        want = out.cpu().numpy()
        assert not np.isnan(want).any()
        bid = cuda.pointer(out.data_ptr())[0]
        assert cuda.pointer(out[1].data_ptr())[0] == bid
        client.release_cuda()
        del out
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        again = torch.full((2, 3, 32, 32), float("nan"), device="cuda")
        assert cuda.pointer(again.data_ptr())[0] != bid
        client.crops(img, boxes, size=(32, 32), resize="stretch", out=again)
        assert len(full) == 2
        assert np.array_equal(again.cpu().numpy(), want)
        client.release_cuda()
    host = np.zeros(16, np.uint8)
    with pytest.raises(frameprep.InvalidRequestError, match="not CUDA"):
        cuda.pointer(host.__array_interface__["data"][0])


def test_batch_into_cuda_is_one_request(gpu_daemon, daemon, monkeypatch):
    """preprocess_batch of frames of one shape with a CUDA out: one BATCH
    request, every row equal to the CPU reference within 1 LSB; from ring
    frames too (read in place)."""
    torch = _torch_cuda()
    img = _photo()[:480, :500]
    frames = [np.ascontiguousarray(img), np.ascontiguousarray(img[::-1]),
              255 - img]
    with frameprep.Client(daemon.url) as ref_client:
        ref = ref_client.preprocess_batch(frames, size=(224, 224)).tensor
    batch = torch.full((3, 3, 224, 224), float("nan"), device="cuda")
    with frameprep.Client(gpu_daemon.url) as client:
        client.register_cuda(batch)
        client.limits()
        native, calls = client._s.native, []

        class Counting:
            def __getattr__(self, name):
                calls.append(name)
                return getattr(native, name)

        monkeypatch.setattr(client._s, "native", Counting())
        assert client.preprocess_batch(frames, out=batch,
                                       size=(224, 224)).tensor is batch
        monkeypatch.setattr(client._s, "native", native)
        assert calls == ["elements"]
        np.testing.assert_allclose(batch.cpu().numpy(), ref, rtol=0,
                                   atol=1.0001 / 255)
        # The same frames in a ring's slots: read where they lie.
        with client.ring(slots=3, frame=img.shape, size=(8, 8)) as ring:
            bufs = [ring.next_frame() for _ in frames]
            for b, f in zip(bufs, frames):
                b[:] = f
            batch.fill_(float("nan"))
            client.preprocess_batch(bufs, out=batch, size=(224, 224))
            np.testing.assert_allclose(batch.cpu().numpy(), ref, rtol=0,
                                       atol=1.0001 / 255)
            for b in bufs:
                b.cancel()
        client.release_cuda()


def test_jpeg_into_cuda(gpu_daemon, daemon):
    """A JPEG's bytes with a CUDA out: the daemon decodes the file and
    writes the tensor into the caller's CUDA memory; equal to the CPU
    daemon's tensor of the same bytes (libjpeg-turbo) within 2 levels
    where the JPEG engine decodes, the decoded size in the result."""
    import cv2
    torch = _torch_cuda()
    img = _photo()
    ok, jpg = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    data = jpg.tobytes()
    with frameprep.Client(daemon.url) as ref_client:
        want = ref_client.preprocess(data, format="jpeg", size=(320, 320))
    out = torch.full((1, 3, 320, 320), float("nan"), device="cuda")
    with frameprep.Client(gpu_daemon.url) as client:
        r = client.preprocess(data, format="jpeg", size=(320, 320), out=out)
        assert r.reply.output_loc == 2
        assert r.decoded_size == (img.shape[1], img.shape[0])
        assert r.decoded_size == want.decoded_size
        got = out.cpu().numpy()
        assert not np.isnan(got).any()
        np.testing.assert_allclose(got, want.tensor, rtol=0,
                                   atol=2.0001 / 255)
        client.release_cuda()


def test_cuda_frame_in(gpu_daemon, daemon):
    torch = _torch_cuda()
    img = _photo()
    with frameprep.Client(daemon.url) as ref_client:
        ref = ref_client.preprocess(img, dtype="uint8",
                                    layout="nhwc").tensor.copy()
    frame = torch.from_numpy(img).cuda()
    torch.cuda.synchronize()
    out = torch.empty((1, 640, 640, 3), dtype=torch.uint8, device="cuda")
    with frameprep.Client(gpu_daemon.url) as client:
        inline = client.preprocess(frame, dtype="uint8", layout="nhwc")
        assert np.abs(inline.tensor.astype(int) - ref).max() <= 1
        both = client.preprocess(frame, dtype="uint8", layout="nhwc",
                                 out=out)
        assert both.reply.t_h2d_us <= 5 and both.reply.t_d2h_us <= 5
        assert np.abs(out.cpu().numpy().astype(int) - ref).max() <= 1
        client.release_cuda()


def test_gpu_refusals(gpu_daemon):
    torch = _torch_cuda()
    with frameprep.Client(gpu_daemon.url) as client:
        with pytest.raises(frameprep.InvalidRequestError, match="shape"):
            client.preprocess(np.zeros((48, 64, 3), np.uint8),
                              out=torch.empty((3, 10, 10), device="cuda"))
        req = Request(kind=Kind.REGISTER_CUDA, region_size=4096,
                      cuda_handle=os.urandom(64),
                      cuda_uuid=cuda.allocation(
                          torch.empty(1, device="cuda").data_ptr()).uuid)
        with pytest.raises(frameprep.FrameprepError):
            client.request(req)
        r = client.preprocess(np.full((48, 64, 3), 200, np.uint8),
                              size=(32, 32), dtype="uint8")
        assert (r.tensor[:, :, 4:28, :] == 200).all()


def test_cuda_yuv_frames_take_opencv_layouts():
    def dev(shape):
        n = int(np.prod(shape))
        return _DLOnly(cuda.CudaTensor(cuda.DeviceArray(
            0x7f0000100000, shape, cuda._c_strides(shape, 1), "|u1", 0, n)))
    src = cuda.source(dev((720, 640)), "nv12")
    assert (src.width, src.height, src.stride, src.span) == (640, 480, 640,
                                                             720 * 640)
    assert src.planes == (640, 640 * 480, 0)
    src = cuda.source(dev((720, 640)), "i420")
    assert src.planes == (320, 640 * 480, 640 * 480 + 320 * 240)
    src = cuda.source(dev((480, 640, 2)), "yuyv")
    assert (src.width, src.height, src.stride) == (640, 480, 1280)
    with pytest.raises(frameprep.InvalidRequestError, match="H \\* 3 / 2"):
        cuda.source(dev((721, 640)), "nv12")


def test_exported_elements_and_pickle():
    import pickle
    exp = cuda.Exported(bytes(range(64)), bytes(16), 1 << 30, 512,
                        (8, 3, 640, 640), "<f4")
    assert exp.nbytes == 8 * 3 * 640 * 640 * 4
    e3 = exp[3]
    assert e3.shape == (3, 640, 640) and e3.offset == 512 + 3 * 3 * 640 * \
        640 * 4
    assert exp[-1].offset == exp[7].offset
    with pytest.raises(IndexError):
        exp[8]
    assert pickle.loads(pickle.dumps(e3)) == e3


@pytest.mark.parametrize("dtype, typestr", [("uint8", "|u1"), ("uint8", "u1"),
                                            ("float32", "<f4"),
                                            ("float16", "<f2")])
def test_exported_out_dtype_with_or_without_byte_order(dtype, typestr):
    """A uint8 tensor's typestr is "|u1" in the array interface and "u1" in
    the plan: the check compares dtypes, not byte-order marks."""
    from frameprep import _core
    plan = _core.plan((64, 64), "letterbox", "rgb", dtype, "nchw", 1 / 255,
                      (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), 114)
    exp = cuda.Exported(bytes(64), bytes(16), 1 << 30, 0,
                        tuple(plan.shape), typestr)
    cuda.check_exported(exp, plan)
    other = "<f4" if dtype != "float32" else "<f2"
    with pytest.raises(frameprep.InvalidRequestError, match="out dtype"):
        cuda.check_exported(cuda.Exported(bytes(64), bytes(16), 1 << 30, 0,
                                          tuple(plan.shape), other), plan)


# --- video streams into CUDA memory (on a GPU) ----------------------------

VIDEO_SIZE = (160, 128)


def _split_units(data, codec):
    """Raw Annex-B bytes split before each access unit delimiter's start
    code (H.264 NAL type 9, HEVC type 35), as test_video_gpu splits
    them."""
    starts, i = [], data.find(b"\x00\x00\x01")
    while i >= 0:
        nal = data[i + 3] if i + 3 < len(data) else 0
        aud = (nal & 0x1f) == 9 if codec == "h264" else \
            ((nal >> 1) & 0x3f) == 35
        if aud:
            at = i - 1 if i > 0 and data[i - 1] == 0 else i
            if not starts and at:
                starts.append(0)
            starts.append(at)
        i = data.find(b"\x00\x00\x01", i + 3)
    starts.append(len(data))
    return [data[a:b] for a, b in zip(starts, starts[1:])]


@pytest.fixture(scope="module")
def video_packets(tmp_path_factory):
    """{codec: [packet]} of two test streams (astronaut 320x240 H.264,
    coffee 352x240 HEVC: 24 frames, 2 B-frames, an IDR/IRAP picture every
    8): the GPU bundle's (FPREP_VIDEO, video_streams.sh's raw Annex-B
    files), else made here by ffmpeg from the photographs as
    test_video.py makes them; skipped without either."""
    import shutil
    import subprocess
    staged = os.environ.get("FPREP_VIDEO")
    names = {"h264": "h264.h264", "hevc": "hevc.hevc"}
    if staged and all((pathlib.Path(staged) / n).exists()
                      for n in names.values()):
        return {c: _split_units((pathlib.Path(staged) / n).read_bytes(), c)
                for c, n in names.items()}
    if shutil.which("ffmpeg") is None:
        pytest.skip("no staged streams (FPREP_VIDEO) and no ffmpeg")
    from video_streams import pan_zoom_args
    tmp = tmp_path_factory.mktemp("video")
    got = {}
    for codec, photo, size, enc in (
            ("h264", "astronaut.png", (320, 240), "libx264"),
            ("hevc", "coffee.png", (352, 240), "libx265")):
        out = str(tmp / names[codec])
        args = pan_zoom_args(str(pathlib.Path(IMAGES) / photo), size, enc,
                             24, out)
        subprocess.run(["ffmpeg", "-v", "error", "-y", *args[:-1], "-bsf:v",
                        f"{codec}_metadata=aud=insert", "-f", codec, out],
                       check=True, timeout=300)
        got[codec] = _split_units(pathlib.Path(out).read_bytes(), codec)
    return got


def _decode(st, packets, out=None, every=1):
    """Every packet and a flush through st: [(tensor copy, pts,
    transform)]; out= on every every-th call (the others inline), each
    frame's tensor checked to be the view out[k] and copied to the host
    before the next call writes out again."""
    got = []
    for k, packet in enumerate(packets + [None]):
        o = out if out is not None and k % every == 0 else None
        frames = st.send(packet, k, out=o) if packet is not None \
            else st.flush(out=o)
        for j, (tensor, pts, xf) in enumerate(frames):
            if o is not None:
                assert tensor.data_ptr() == o[j].data_ptr()
                tensor = tensor.cpu().numpy()
            got.append((np.array(tensor), pts, xf))
    return got


def _assert_same_frames(got, want, atol):
    assert len(got) == len(want) == 24
    for (t, pts, xf), (w, wpts, wxf) in zip(got, want):
        assert pts == wpts and xf == wxf
        assert not np.isnan(t.astype(np.float32)).any()
        np.testing.assert_allclose(t.astype(np.float32),
                                   w.astype(np.float32), rtol=0, atol=atol)


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_video_into_cuda(gpu_daemon, video_packets, codec):
    """A stream decoded on the GPU with out= a torch CUDA tensor of 4
    frames' room: the daemon's kernel writes frame k into out[k], the
    frame's tensor is that view, and every frame equals (within 1 LSB)
    the same stream's inline tensors; calls without out= in between get
    theirs inline again; uint8 NHWC alike; one region per allocation,
    released at the end."""
    torch = _torch_cuda()
    packets = video_packets[codec]
    h, w = VIDEO_SIZE[1], VIDEO_SIZE[0]
    with frameprep.Client(gpu_daemon.url) as client:
        with client.video(codec, size=VIDEO_SIZE) as st:
            want = _decode(st, packets)
        out = torch.full((4, 3, h, w), float("nan"), device="cuda")
        for every in (1, 3):
            with client.video(codec, size=VIDEO_SIZE) as st:
                _assert_same_frames(_decode(st, packets, out, every), want,
                                    1.0001 / 255)
        with client.video(codec, size=VIDEO_SIZE, dtype="uint8",
                          layout="nhwc") as st:
            want8 = _decode(st, packets)
        out8 = torch.zeros((4, h, w, 3), dtype=torch.uint8, device="cuda")
        with client.video(codec, size=VIDEO_SIZE, dtype="uint8",
                          layout="nhwc") as st:
            _assert_same_frames(_decode(st, packets, out8), want8, 1)
        assert client._cuda.count() in (1, 2)  # one caching-allocator block?
        client.release_cuda()
        assert client.info()["cuda_regions_alive"] == 0


def test_video_into_cuda_async(gpu_daemon, video_packets):
    """AsyncVideoStream with out=: the region registered on the loop's
    executor, the frames those of the blocking stream."""
    import asyncio
    torch = _torch_cuda()
    packets = video_packets["hevc"]
    with frameprep.Client(gpu_daemon.url) as client:
        with client.video("hevc", size=VIDEO_SIZE) as st:
            want = _decode(st, packets)
    out = torch.full((4, 3, VIDEO_SIZE[1], VIDEO_SIZE[0]), float("nan"),
                     device="cuda")

    async def main():
        got = []
        async with frameprep.AsyncClient(gpu_daemon.url, timeout=60) as ac:
            async with await ac.video("hevc", size=VIDEO_SIZE) as st:
                for k, packet in enumerate(packets + [None]):
                    frames = await (st.send(packet, k, out=out)
                                    if packet is not None
                                    else st.flush(out=out))
                    got += [(t.cpu().numpy(), pts, xf)
                            for t, pts, xf in frames]
            await ac.release_cuda()
        return got

    _assert_same_frames(asyncio.run(main()), want, 1.0001 / 255)


def test_video_out_too_small(gpu_daemon, video_packets):
    """A call whose frames need more room than out has (the flush, where
    the decoder lets out the most frames at once) is refused by the
    daemon (LimitExceededError naming out_capacity), those frames
    dropped; the stream goes on: the packets sent again give their frames
    into the same out."""
    torch = _torch_cuda()
    packets = video_packets["h264"]
    h, w = VIDEO_SIZE[1], VIDEO_SIZE[0]
    with frameprep.Client(gpu_daemon.url) as client:
        with client.video("h264", size=VIDEO_SIZE) as st:
            counts = [len(st.send(p, k)) for k, p in enumerate(packets)]
            counts.append(len(st.flush()))
        most = max(counts)
        if most < 2:
            pytest.skip(f"no call let out 2 frames at once: {counts}")
        at = counts.index(most)  # the flush (24) on the CPU backend
        small = torch.full((most - 1, 3, h, w), float("nan"), device="cuda")
        room = torch.full((most, 3, h, w), float("nan"), device="cuda")
        with client.video("h264", size=VIDEO_SIZE) as st:
            for k, packet in enumerate(packets + [None]):
                out = small if k == at else room
                call = (lambda o: st.send(packet, k, out=o)) \
                    if packet is not None else (lambda o: st.flush(out=o))
                if k != at:
                    call(out)
                    continue
                with pytest.raises(frameprep.LimitExceededError,
                                   match="out_capacity"):
                    call(out)
            got = []
            for k, packet in enumerate(packets):
                got += st.send(packet, 100 + k, out=room)
            got += st.flush(out=room)
        pts = sorted(f.pts for f in got)
        assert pts[-24:] == list(range(100, 124))
        client.release_cuda()


def test_video_out_on_the_cpu_backend(daemon, video_packets):
    """A torch CUDA out= on a stream the CPU backend decodes: the daemon
    refuses its region (UnsupportedError), nothing is written, and the
    stream goes on inline."""
    torch = _torch_cuda()
    out = torch.full((4, 3, VIDEO_SIZE[1], VIDEO_SIZE[0]), float("nan"),
                     device="cuda")
    packets = video_packets["h264"]
    with frameprep.Client(daemon.url) as client:
        try:
            st = client.video("h264", size=VIDEO_SIZE)
        except frameprep.UnsupportedError as exc:
            pytest.skip(f"no video decoder on the CPU backend here: {exc}")
        with st:
            with pytest.raises(frameprep.UnsupportedError):
                st.send(packets[0], 0, out=out)
            assert _decode(st, packets)
        assert torch.isnan(out).all()
