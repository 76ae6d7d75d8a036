"""The Python wire codec (frameprep.protocol) against the C one.

golden/*.bin were written by wire_golden (fprep_request_encode /
fprep_reply_encode). Each must come out of the C encoder unchanged today,
decode in Python to the fields the C decoder reads, and re-encode byte for
byte; Python-encoded messages must decode in C to the fields Python put in.
"""
import dataclasses
import json
import math
import subprocess

import pytest

from conftest import GOLDEN, WIRE_GOLDEN
from frameprep import protocol
from frameprep.protocol import Kind, Location, Reply, Request

REQUESTS = sorted(p.name for p in GOLDEN.glob("request_*.bin"))
REPLIES = sorted(p.name for p in GOLDEN.glob("reply_*.bin"))
COMMON = {"version", "kind", "request_id"}
FRAME_FIELDS = {f.name for f in Request.__dataclass_fields__.values()
                if not f.name.startswith(("region", "cuda", "doorbell"))}
KIND_FIELDS = {Kind.FRAME: FRAME_FIELDS, Kind.ECHO: FRAME_FIELDS,
               Kind.INFO: set(), Kind.REGISTER: {"region_size", "region_name"},
               Kind.UNREGISTER: {"region_id"},
               Kind.REGISTER_CUDA: {"region_size", "cuda_offset",
                                    "cuda_handle", "cuda_uuid"},
               Kind.DOORBELL: {"region_id", "doorbell_entries",
                               "doorbell_offset"}}
BYTES_FIELDS = ("cuda_handle", "cuda_uuid")  # hex text in the C decoder's JSON


def c_decode(mode, data, tmp_path):
    """Decodes a whole message with the C decoder; returns its fields."""
    path = tmp_path / "msg.bin"
    path.write_bytes(data)
    r = subprocess.run([str(WIRE_GOLDEN), mode, str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"C decoder refused it: {r.stderr}"
    fields = json.loads(r.stdout)
    for key in BYTES_FIELDS:
        if key in fields:
            fields[key] = bytes.fromhex(fields[key])
    return fields


def whole_request(header, req):
    """header plus the inline payload the C decoder insists on."""
    inline = (req.kind in (Kind.FRAME, Kind.ECHO) and
              req.input_loc == Location.INLINE)
    return header + bytes(req.input_size if inline else 0)


def same_fields(py, c):
    """Compares a decoded dataclass with the C decoder's JSON fields."""
    for key, cval in c.items():
        pval = getattr(py, key)
        if isinstance(pval, float) or (isinstance(cval, list) and
                                       isinstance(cval[0], float)):
            pv = pval if isinstance(pval, (list, tuple)) else [pval]
            cv = cval if isinstance(cval, list) else [cval]
            assert all(math.isclose(a, b, rel_tol=1e-7, abs_tol=0)
                       for a, b in zip(pv, cv)), (key, pval, cval)
        elif isinstance(pval, tuple):
            assert list(pval) == cval, (key, pval, cval)
        else:
            assert pval == cval, (key, pval, cval)


def test_golden_files_are_what_the_c_encoder_writes(tmp_path):
    r = subprocess.run([str(WIRE_GOLDEN), "write", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    fresh = sorted(p.name for p in tmp_path.glob("*.bin"))
    assert fresh == sorted(REQUESTS + REPLIES)
    for name in fresh:
        assert (tmp_path / name).read_bytes() == (GOLDEN / name).read_bytes(), \
            f"{name} drifted from the C encoder: regenerate with " \
            f"wire_golden write tests/python/golden"


@pytest.mark.parametrize("name", REQUESTS)
def test_golden_request_decodes_and_reencodes(name, tmp_path):
    data = (GOLDEN / name).read_bytes()
    req = Request.decode(data)
    assert req.encode() == data
    c = c_decode("request", whole_request(data, req), tmp_path)
    same_fields(req, {k: v for k, v in c.items()
                      if k in COMMON or k in KIND_FIELDS[req.kind]})
    # Built afresh from the C decoder's fields, Python writes the same bytes.
    c["mean"], c["std"] = tuple(c["mean"]), tuple(c["std"])
    assert Request(**c).encode() == data


@pytest.mark.parametrize("name", REPLIES)
def test_golden_reply_decodes_and_reencodes(name, tmp_path):
    data = (GOLDEN / name).read_bytes()
    head = Reply.decode(data, len(data) + _payload(data))
    assert head.encode() == data
    whole = data + bytes(head.payload_size)
    rep = Reply.decode(whole)
    assert rep == head
    c = c_decode("reply", whole, tmp_path)
    same_fields(rep, c)
    c["shape"] = tuple(c["shape"])
    assert Reply(**c).encode() == data


def _payload(data):
    """payload_size as written in a reply header."""
    return int.from_bytes(data[80:88], "little")


PY_REQUESTS = [
    Request(src_format=f, src_width=37, src_height=11,
            src_stride=37 * bpp + 5, input_size=(37 * bpp + 5) * 10 + 37 * bpp,
            out_width=96, out_height=64, resize=rz, channel_order=o,
            dtype=dt, layout=lo, pad_value=3.25, scale=1.0 / 255,
            mean=(0.1, 0.2, 0.3) if dt != protocol.DType.U8 else (0, 0, 0),
            std=(0.5, 0.25, 2.0) if dt != protocol.DType.U8 else (1, 1, 1),
            request_id=1000 + i)
    for i, (f, bpp, rz, o, dt, lo) in enumerate([
        (1, 3, 1, 1, 1, 1), (2, 3, 2, 2, 2, 2), (3, 4, 1, 1, 3, 2),
        (4, 4, 2, 2, 1, 1), (5, 1, 1, 3, 2, 1), (5, 1, 2, 1, 3, 2)])
] + [
    Request(kind=Kind.ECHO, src_format=1, src_width=1920, src_height=1080,
            src_stride=5760, input_size=5760 * 1080, input_loc=Location.SHM,
            output_loc=Location.SHM, in_region=7, out_region=9,
            in_offset=1 << 33, out_offset=4096, out_capacity=1 << 24,
            request_id=(1 << 64) - 1),
    # The reply also in the output region (bit 7 of output_loc).
    Request(src_format=1, src_width=64, src_height=48, src_stride=192,
            input_size=192 * 48, input_loc=Location.SHM,
            output_loc=Location.SHM, in_region=2, out_region=2,
            in_offset=1 << 16, out_offset=0, out_capacity=32 * 32 * 12 + 256,
            out_width=32, out_height=32, shm_reply=True, request_id=3000),
    # YUV sources: matrix, range and padded planes.
    Request(src_format=protocol.PixelFormat.NV12, yuv_matrix=2, yuv_range=2,
            src_width=1920, src_height=1080, src_stride=2048,
            uv_stride=2048, u_offset=2048 * 1088,
            input_size=2048 * 1088 + 2048 * 540, request_id=2000),
    Request(src_format=protocol.PixelFormat.I420, yuv_matrix=3, yuv_range=1,
            src_width=64, src_height=48, src_stride=80, uv_stride=40,
            u_offset=80 * 48 + 16, v_offset=80 * 48 + 16 + 40 * 24 + 8,
            input_size=80 * 48 + 16 + 2 * 40 * 24 + 8, request_id=2001),
    Request(src_format=protocol.PixelFormat.YUYV, yuv_matrix=1,
            src_width=64, src_height=3, src_stride=130, input_size=130 * 3,
            request_id=2002),
    Request(kind=Kind.INFO, request_id=5),
    Request(kind=Kind.REGISTER, request_id=6, region_size=(1 << 40) + 3,
            region_name="/frameprep-py-" + "x" * 48),
    Request(kind=Kind.UNREGISTER, request_id=7, region_id=0xFFFFFFFF),
    Request(kind=Kind.DOORBELL, request_id=10, region_id=0xFFFFFFFE,
            doorbell_entries=64, doorbell_offset=(1 << 40) + 64),
    Request(kind=Kind.REGISTER_CUDA, request_id=8, region_size=1 << 30,
            cuda_offset=(1 << 40) + 256, cuda_handle=bytes(range(64)),
            cuda_uuid=bytes(range(200, 216))),
    Request(src_format=1, src_width=640, src_height=480, src_stride=1920,
            input_size=1920 * 480, input_loc=Location.CUDA,
            output_loc=Location.CUDA, in_region=3, out_region=4,
            in_offset=1 << 20, out_offset=3 << 22, out_capacity=1 << 23,
            request_id=9),
]


@pytest.mark.parametrize("req", PY_REQUESTS,
                         ids=[f"{Kind(r.kind).name}-{r.request_id}"
                              for r in PY_REQUESTS])
def test_python_request_decodes_in_c(req, tmp_path):
    data = req.encode()
    assert len(data) == protocol.REQUEST_HEADER_SIZE
    c = c_decode("request", whole_request(data, req), tmp_path)
    same_fields(req, {k: v for k, v in c.items()
                      if k in COMMON or k in KIND_FIELDS[req.kind]})
    assert (c["kind"], c["request_id"]) == (req.kind, req.request_id)
    assert Request.decode(whole_request(data, req)).encode() == data


PY_REPLIES = [
    Reply(kind=Kind.FRAME, request_id=3, dtype=1, layout=1, ndim=4,
          shape=(1, 3, 8, 6), scale_x=0.1, scale_y=0.2, pad_x=1, pad_y=2,
          t_queue_us=1, t_compute_us=2, t_h2d_us=3, t_kernel_us=4,
          t_d2h_us=5, t_total_us=6, payload_size=576, tensor_size=576,
          message="ok \u00b5s"),
    Reply(kind=Kind.FRAME, request_id=4, dtype=3, layout=2, ndim=4,
          output_loc=Location.SHM, shape=(1, 8, 6, 1), tensor_size=48,
          flags=protocol.REPLY_F_INPUT_RELEASED),
    Reply(kind=Kind.FRAME, request_id=7, dtype=1, layout=1, ndim=4,
          output_loc=Location.CUDA, shape=(1, 3, 8, 6), tensor_size=576,
          flags=protocol.REPLY_F_INPUT_RELEASED),
    Reply(kind=Kind.INFO, request_id=5, payload_size=10,
          message="x" * 300),
    Reply(kind=Kind.FRAME, request_id=6, status=3, message="std[0] 0"),
]


@pytest.mark.parametrize("rep", PY_REPLIES,
                         ids=[f"reply-{r.request_id}" for r in PY_REPLIES])
def test_python_reply_decodes_in_c(rep, tmp_path):
    data = rep.encode()
    assert len(data) == protocol.REPLY_HEADER_SIZE
    whole = data + bytes(rep.payload_size)
    c = c_decode("reply", whole, tmp_path)
    cut = rep.message.encode()[:143].decode("utf-8", "ignore")
    same_fields(Reply(**{**rep.__dict__, "message": cut}), c)
    assert Reply.decode(whole).encode() == data


@pytest.mark.parametrize("mutate, error", [
    (lambda b: b[:100], protocol.ProtocolError),
    (lambda b: b"XXXX" + b[4:], protocol.ProtocolError),
    (lambda b: b[:4] + b"\x02\x00" + b[6:], protocol.VersionMismatchError),
])
def test_request_decode_refuses(mutate, error):
    data = (GOLDEN / "request_frame_default.bin").read_bytes()
    with pytest.raises(error):
        Request.decode(mutate(data))


@pytest.mark.parametrize("mutate, error", [
    (lambda b: b[:255], protocol.ProtocolError),
    (lambda b: b"XXXX" + b[4:], protocol.ProtocolError),
    (lambda b: b[:4] + b"\x09\x00" + b[6:], protocol.VersionMismatchError),
    (lambda b: b + b"extra", protocol.ProtocolError),
    (lambda b: b[:104] + b"m" * 144 + b[248:], protocol.ProtocolError),
    (lambda b: b[:22] + b"\x05" + b[23:], protocol.ProtocolError),
    (lambda b: b[:24] + (2).to_bytes(4, "little") + b[28:],
     protocol.ProtocolError),
])
def test_reply_decode_refuses(mutate, error):
    data = (GOLDEN / "reply_echo_shm.bin").read_bytes()
    Reply.decode(data)
    with pytest.raises(error):
        Reply.decode(mutate(data))


def test_python_constants_are_protocol_h():
    """The enums and constants of frameprep.protocol and frameprep.errors
    are protocol.h's and frameprep.h's (the C library's own values,
    through frameprep._native): a test that fails when they drift."""
    from frameprep import _native, errors
    c = _native.constants
    prefixes = {protocol.Kind: "FPREP_KIND_", protocol.PixelFormat:
                "FPREP_PIX_", protocol.YuvMatrix: "FPREP_MATRIX_",
                protocol.YuvRange: "FPREP_RANGE_", protocol.Resize:
                "FPREP_RESIZE_", protocol.ChannelOrder: "FPREP_ORDER_",
                protocol.DType: "FPREP_DTYPE_", protocol.Layout:
                "FPREP_LAYOUT_", protocol.Location: "FPREP_LOC_"}
    for enum, prefix in prefixes.items():
        want = {k[len(prefix):]: v for k, v in c.items()
                if k.startswith(prefix) and not k.startswith(
                    "FPREP_LOC_F_")}
        assert {m.name: int(m) for m in enum} == want, enum
    for name in ("PROTOCOL_VERSION", "REQUEST_MAGIC", "REPLY_MAGIC",
                 "REQUEST_HEADER_SIZE", "REPLY_HEADER_SIZE", "MESSAGE_SIZE",
                 "REGION_NAME_MAX", "LOC_F_SHM_REPLY",
                 "REPLY_F_INPUT_RELEASED", "CUDA_HANDLE_SIZE",
                 "CUDA_UUID_SIZE"):
        assert getattr(protocol, name) == c["FPREP_" + name], name
    errs = {k[len("FPREP_"):]: v for k, v in c.items()
            if k.startswith("FPREP_E")}
    assert {cls.name: st for st, cls in errors.BY_STATUS.items()} == errs


def test_shape_and_limits_are_the_c_librarys_rules():
    """The tensor's shape and bytes and INFO's limits are decided by the C
    library (fprep_tensor_shape, fprep_limits_parse), as the C client and
    the daemon decide them."""
    from frameprep import _core, errors

    o = _core.Options.make((64, 32), order="gray", layout="nhwc",
                           dtype="uint8")
    assert (o.shape, o.tensor_bytes, o.channels) == ((1, 32, 64, 1),
                                                     64 * 32, 1)
    o = _core.Options.make((64, 32), dtype="float16")
    assert (o.shape, o.tensor_bytes, o.channels) == ((1, 3, 32, 64),
                                                     64 * 32 * 3 * 2, 3)
    with pytest.raises(errors.InvalidRequestError, match="64 bits"):
        _core.Options.make((2**32 - 1, 2**32 - 1)).tensor_bytes
    info = _core.parse_info("max_width: 10\nmax_height: 20\n"
                            "max_frame_bytes: 3\nmax_out_width: 4\n"
                            "max_out_height: 5\nmax_tensor_bytes: 6\n"
                            "backend: cpu\n")
    assert (info["max_width"], info["max_tensor_bytes"],
            info["backend"]) == (10, 6, "cpu")
    # A limit the daemon does not tell has the C library's value.
    assert info["max_elements"] == 0
    # Text without the limits checks none (no half-read limits).
    info = _core.parse_info("max_width: 10\nmax_height: x\n")
    assert info["max_width"] is None and info["max_height"] is None
