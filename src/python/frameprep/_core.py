"""Pieces shared by the blocking and the asyncio client: option parsing,
frame checks, message building (one copy of the frame into the nng
message) and reply decoding (the tensor is a view of the reply message)."""

from __future__ import annotations

import ctypes
import dataclasses
import math
import os
import platform
import struct
import time
from typing import Any, Literal, Sequence, Union

import numpy as np
import pynng

from . import errors
from .protocol import (REPLY_HEADER_SIZE, REQUEST_HEADER_SIZE, ChannelOrder,
                       DType, FrameHeader, Kind, Layout, PixelFormat, Reply,
                       YuvMatrix, YuvRange,
                       Request, Resize, dtype_bytes)

_ffi = pynng.ffi
_lib = pynng.lib
_NULL = pynng.ffi.NULL
_U8 = np.dtype(np.uint8)
_NUMPY_DTYPES = {int(d): d.numpy for d in DType}
_DEFAULT_FORMATS = {1: PixelFormat.GRAY8, 3: PixelFormat.BGR8,
                    4: PixelFormat.BGRA8}

# The options' names, as static types (the dicts below map them).
ResizeName = Literal["letterbox", "stretch"]
OrderName = Literal["rgb", "bgr", "gray"]
DTypeName = Literal["float32", "f32", "float16", "f16", "uint8", "u8"]
DTypeOption = Union[DTypeName, "type[np.generic]", "np.dtype[Any]"]
LayoutName = Literal["nchw", "nhwc"]
FormatName = Literal["bgr8", "bgr", "rgb8", "rgb", "bgra8", "bgra", "rgba8",
                     "rgba", "gray8", "gray", "nv12", "i420", "yuyv", "yuy2"]
MatrixName = Literal["bt601", "bt709", "bt2020"]
YuvRangeName = Literal["limited", "full"]

_RESIZES = {"letterbox": Resize.LETTERBOX, "stretch": Resize.STRETCH}
_ORDERS = {"rgb": ChannelOrder.RGB, "bgr": ChannelOrder.BGR,
           "gray": ChannelOrder.GRAY}
_DTYPES = {"float32": DType.F32, "f32": DType.F32, "float16": DType.F16,
           "f16": DType.F16, "uint8": DType.U8, "u8": DType.U8}
_LAYOUTS = {"nchw": Layout.NCHW, "nhwc": Layout.NHWC}
_FORMATS = {"bgr8": PixelFormat.BGR8, "bgr": PixelFormat.BGR8,
            "rgb8": PixelFormat.RGB8, "rgb": PixelFormat.RGB8,
            "bgra8": PixelFormat.BGRA8, "bgra": PixelFormat.BGRA8,
            "rgba8": PixelFormat.RGBA8, "rgba": PixelFormat.RGBA8,
            "gray8": PixelFormat.GRAY8, "gray": PixelFormat.GRAY8,
            "nv12": PixelFormat.NV12, "i420": PixelFormat.I420,
            "yuyv": PixelFormat.YUYV, "yuy2": PixelFormat.YUYV}
_MATRICES = {"bt601": YuvMatrix.BT601, "bt709": YuvMatrix.BT709,
             "bt2020": YuvMatrix.BT2020}
_YUV_RANGES = {"limited": YuvRange.LIMITED, "full": YuvRange.FULL}


def default_address() -> str:
    """The URL a client dials when given none, as ``fprep_default_url``
    builds it: ``$FRAMEPREP_SOCKET`` when set and not empty, else the
    daemon's default listen URL, ``ipc://$XDG_RUNTIME_DIR/frameprep.sock``
    when XDG_RUNTIME_DIR is set and not empty, else
    ``ipc:///tmp/frameprep-$UID.sock``."""
    env = os.environ.get("FRAMEPREP_SOCKET")
    if env:
        return env
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return f"ipc://{run}/frameprep.sock"
    return f"ipc:///tmp/frameprep-{os.getuid()}.sock"


def _uid_of(user: str | int) -> int:
    """The uid of a user name or number; InvalidRequestError if none."""
    import pwd
    if isinstance(user, int) or str(user).isdigit():
        return int(user)
    try:
        return pwd.getpwnam(str(user)).pw_uid
    except KeyError:
        raise errors.InvalidRequestError(
            f"trust_owner {user!r} names no user") from None


def trusted_uids(trust_owner: str | int | None) -> set[int]:
    """The owners an ipc:// socket may have: this process's user, root,
    the service's user "frameprep" (if it exists here), and the user
    trust_owner names (None or "": $FRAMEPREP_TRUST_SOCKET_OWNER, if
    set), as ``fprep_client_open_trusting`` has it."""
    import pwd
    uids = {os.geteuid(), 0}
    try:
        uids.add(pwd.getpwnam("frameprep").pw_uid)
    except KeyError:
        pass
    if trust_owner is None or trust_owner == "":
        trust_owner = os.environ.get("FRAMEPREP_TRUST_SOCKET_OWNER") or None
    if trust_owner is not None:
        uids.add(_uid_of(trust_owner))
    return uids


def check_socket_owner(address: str, trusted: set[int]) -> int | None:
    """Checks an ipc:// address before it is dialled: the socket must
    exist and be owned by a trusted user (another local user could have
    created the path first, in /tmp say, and would receive the frames and
    be granted the client's shared memory). Returns the owner's uid (None
    for tcp://). Raises TransportError (no socket) or
    PermissionDeniedError (an untrusted owner), with the C CLI's words."""
    if not address.startswith("ipc://"):
        return None
    path = address[len("ipc://"):]
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise errors.TransportError(
            f"connecting to {address}: no socket at {path} "
            f"(is frameprepd running?)") from None
    except OSError as exc:
        raise errors.TransportError(f"{path}: {exc.strerror}") from None
    if st.st_uid not in trusted:
        import pwd
        try:
            who = f"{pwd.getpwuid(st.st_uid).pw_name} (uid {st.st_uid})"
        except KeyError:
            who = f"uid {st.st_uid}"
        raise errors.PermissionDeniedError(
            f"{path} is owned by {who}, not by you, root or frameprep: "
            f"refusing to send frames there (trust_owner= or "
            f"FRAMEPREP_TRUST_SOCKET_OWNER names a user to trust)")
    return st.st_uid


def parse_info(text: str) -> dict[str, Any]:
    """Parses the daemon's INFO text ("key: value" lines) into a dict;
    values made only of digits become ints. A repeated key keeps its first
    value."""
    info: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        info.setdefault(key, int(value) if value.isdigit() else value)
    return info


def _pick(table: dict[str, Any], value: Any, what: str) -> Any:
    if isinstance(value, np.dtype) or isinstance(value, type):
        value = np.dtype(value).name
    key = str(value).lower()
    if key not in table:
        raise errors.InvalidRequestError(
            f"{what} {value!r} is not one of {sorted(set(table))}")
    return table[key]


@dataclasses.dataclass(frozen=True)
class Options:
    """Validated preprocessing options (see :meth:`Client.preprocess`)."""

    out_width: int
    out_height: int
    resize: Resize
    order: ChannelOrder
    dtype: DType
    layout: Layout
    scale: float
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    pad: float
    matrix: YuvMatrix = YuvMatrix.BT601
    yuv_range: YuvRange = YuvRange.LIMITED

    @classmethod
    def make(cls, size: Sequence[int] = (640, 640),
             resize: ResizeName = "letterbox", order: OrderName = "rgb",
             dtype: DTypeOption = "float32",
             layout: LayoutName = "nchw", scale: float = 1 / 255,
             mean: float | Sequence[float] = (0.0, 0.0, 0.0),
             std: float | Sequence[float] = (1.0, 1.0, 1.0),
             pad: float = 114, matrix: MatrixName = "bt601",
             yuv_range: YuvRangeName = "limited") -> Options:
        """Checks the option names and the size (two ints >= 1); raises
        :class:`~frameprep.InvalidRequestError`. Numeric ranges (std > 0,
        pad in [0, 255], finite values) are the daemon's to check."""
        try:
            w, h = (int(v) for v in size)
        except (TypeError, ValueError):
            raise errors.InvalidRequestError(
                f"size {size!r} is not (width, height)") from None
        if w < 1 or h < 1 or w > 0xFFFFFFFF or h > 0xFFFFFFFF:
            raise errors.InvalidRequestError(
                f"size {w}x{h} must be at least 1x1")

        def triple(v: Any, what: str) -> tuple[float, float, float]:
            t = (v, v, v) if np.isscalar(v) else tuple(v)
            if len(t) != 3:
                raise errors.InvalidRequestError(
                    f"{what} {v!r} is not one value or three")
            return (float(t[0]), float(t[1]), float(t[2]))

        return cls(w, h, _pick(_RESIZES, resize, "resize"),
                   _pick(_ORDERS, order, "order"),
                   _pick(_DTYPES, dtype, "dtype"),
                   _pick(_LAYOUTS, layout, "layout"), float(scale),
                   triple(mean, "mean"), triple(std, "std"), float(pad),
                   _pick(_MATRICES, matrix, "matrix"),
                   _pick(_YUV_RANGES, yuv_range, "yuv_range"))

    @property
    def channels(self) -> int:
        """Tensor channels: 1 for gray, else 3."""
        return 1 if self.order == ChannelOrder.GRAY else 3

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The tensor shape, (1, C, H, W) or (1, H, W, C)."""
        c, h, w = self.channels, self.out_height, self.out_width
        return (1, c, h, w) if self.layout == Layout.NCHW else (1, h, w, c)

    @property
    def tensor_bytes(self) -> int:
        """Bytes of the tensor."""
        return math.prod(self.shape) * dtype_bytes(self.dtype)

    def request(self, kind: int = Kind.FRAME) -> Request:
        """A request with these options and no source yet."""
        return Request(kind=kind, out_width=self.out_width,
                       out_height=self.out_height, resize=self.resize,
                       channel_order=self.order, dtype=self.dtype,
                       layout=self.layout, pad_value=self.pad,
                       scale=self.scale, mean=self.mean, std=self.std,
                       yuv_matrix=self.matrix, yuv_range=self.yuv_range)


@dataclasses.dataclass
class Source:
    """A checked source frame: format, size, row stride (bytes), the
    number of bytes from its first to its last byte (``span``) and the
    array itself (a copy only when its pixels were not packed)."""

    format: PixelFormat
    width: int
    height: int
    stride: int
    span: int
    array: np.ndarray[Any, Any]
    addr: int = 0
    planes: tuple[int, int, int] = (0, 0, 0)  # uv_stride, u_offset, v_offset

    def address(self) -> int:
        """Address of the first byte."""
        return self.addr or self.array.__array_interface__["data"][0]

    def bytes_view(self) -> np.ndarray[Any, Any]:
        """A 1-D uint8 view of the span (no copy)."""
        return np.lib.stride_tricks.as_strided(self.array, (self.span,),
                                               (1,), writeable=False)


def _check_yuv(frame: np.ndarray[Any, Any], fmt: PixelFormat) -> Source:
    """A YUV frame in OpenCV's layout: NV12 and I420 as one (H * 3 / 2, W)
    array (Y rows, then the UV rows, or the U and then the V plane), YUYV
    as (H, W, 2). Sent unpadded (copied when not contiguous)."""
    shape = frame.shape
    if fmt == PixelFormat.YUYV:
        if len(shape) != 3 or shape[2] != 2:
            raise errors.InvalidRequestError(
                f"a yuyv frame is (H, W, 2), not {shape}")
        h, w = shape[0], shape[1]
    else:
        if len(shape) != 2 or shape[0] % 3 != 0:
            raise errors.InvalidRequestError(
                f"a {fmt.name.lower()} frame is (H * 3 / 2, W) with H "
                f"even, not {shape}")
        h, w = shape[0] // 3 * 2, shape[1]
    if w < 2 or h < 1 or w % 2 or (fmt != PixelFormat.YUYV and h % 2):
        raise errors.InvalidRequestError(
            f"{fmt.name.lower()} frame {w}x{h}: width"
            f"{'' if fmt == PixelFormat.YUYV else ' and height'} must be "
            f"even")
    frame = np.ascontiguousarray(frame)
    span = frame.size
    if fmt == PixelFormat.YUYV:
        return Source(fmt, w, h, 2 * w, span, frame, address_of(frame))
    uv = w if fmt == PixelFormat.NV12 else w // 2
    v_off = w * h + uv * (h // 2) if fmt == PixelFormat.I420 else 0
    return Source(fmt, w, h, w, span, frame, address_of(frame),
                  (uv, w * h, v_off))


def check_frame(frame: Any, format: FormatName | str | None = None) -> Source:
    """Checks a frame: a numpy uint8 array (H, W), (H, W, 1), (H, W, 3) or
    (H, W, 4). ``format`` (bgr8, rgb8, bgra8, rgba8, gray8) defaults to
    gray8, bgr8 or bgra8 by channel count. Rows may be strided (a crop of a
    bigger frame is sent with its row stride, without a copy); pixels must
    be packed, else the frame is copied. YUV formats (nv12, i420, yuyv)
    take the arrays OpenCV's cvtColor takes (see :func:`_check_yuv`).
    Raises :class:`~frameprep.InvalidRequestError`."""
    if not isinstance(frame, np.ndarray):
        raise errors.InvalidRequestError(
            f"frame must be a numpy.ndarray, not {type(frame).__name__}")
    dt = frame.dtype
    if dt is not _U8 and dt != np.uint8:
        raise errors.InvalidRequestError(
            f"frame dtype {frame.dtype} is not uint8")
    if format is not None:
        fmt = _pick(_FORMATS, format, "format")
        if fmt.is_yuv:
            return _check_yuv(frame, fmt)
    shape = frame.shape
    ndim = len(shape)
    if ndim == 2:
        channels = 1
    elif ndim == 3 and shape[2] in (1, 3, 4):
        channels = shape[2]
    else:
        raise errors.InvalidRequestError(
            f"frame shape {frame.shape} is not (H, W), (H, W, 1), "
            f"(H, W, 3) or (H, W, 4)")
    h, w = shape[0], shape[1]
    if h < 1 or w < 1:
        raise errors.InvalidRequestError(f"frame shape {frame.shape} is "
                                         f"empty")
    if format is None:
        fmt = _DEFAULT_FORMATS[channels]
    else:
        fmt = _pick(_FORMATS, format, "format")
        if fmt.channels != channels:
            raise errors.InvalidRequestError(
                f"format {format} has {fmt.channels} channels but the "
                f"frame shape {frame.shape} has {channels}")
    strides = frame.strides
    packed = strides[1] == channels and (ndim == 2 or strides[2] == 1)
    if not packed or strides[0] < w * channels:
        frame = np.ascontiguousarray(frame)
        strides = frame.strides
    stride = strides[0]
    return Source(fmt, w, h, stride, stride * (h - 1) + w * channels, frame,
                  address_of(frame))


def address_of(a: np.ndarray[Any, Any]) -> int:
    """The address of an array's first byte."""
    try:  # a C-contiguous array: the quicker way
        return int(_ffi.cast("uintptr_t", _ffi.from_buffer(a)))
    except ValueError:
        return int(a.__array_interface__["data"][0])


def _over(field: str, value: int, key: str, bound: int) -> str:
    return f"{field} {value} exceeds the daemon's {key} {bound}"


def _bound(limits: dict[str, Any], key: str) -> int | None:
    bound = limits.get(key)
    return bound if isinstance(bound, int) else None


class Plan:
    """Options made ready for sending: the FRAME header they make (inline,
    or a ring's shared-memory locations when ``req`` gives them), the
    tensor's shape, dtype and bytes, and the checks against the daemon's
    limits."""

    __slots__ = ("opts", "header", "tensor_bytes", "shape", "typestr",
                 "_gray", "_checked")

    def __init__(self, opts: Options, req: Request | None = None):
        self.opts = opts
        self.header = FrameHeader(opts.request() if req is None else req)
        self.tensor_bytes = opts.tensor_bytes
        self.shape = opts.shape
        self.typestr = _NUMPY_DTYPES[opts.dtype]
        self._gray = opts.order == ChannelOrder.GRAY
        self._checked: tuple[Any, tuple[int | None, ...], str | None] = (
            None, (), None)

    def check(self, src: Source, limits: dict[str, Any]) -> None:
        """Raises :class:`~frameprep.LimitExceededError` for a request of
        src beyond the daemon's limits (INFO's max_* keys; a frame larger
        than max_frame_bytes would make nng drop the connection), and
        :class:`~frameprep.InvalidRequestError` for order gray without a
        gray8 frame. The bounds are read again when limits is another
        dict."""
        seen, bounds, late = self._checked
        if seen is not limits:
            bounds = (_bound(limits, "max_width"), _bound(limits, "max_height"),
                      _bound(limits, "max_frame_bytes"))
            late = None
            opts = self.opts
            for field, value, key in (
                    ("out_width", opts.out_width, "max_out_width"),
                    ("out_height", opts.out_height, "max_out_height"),
                    ("tensor bytes", self.tensor_bytes, "max_tensor_bytes")):
                bound = _bound(limits, key)
                if bound is not None and value > bound:
                    late = _over(field, value, key, bound)
                    break
            self._checked = (limits, bounds, late)
        max_w, max_h, max_bytes = bounds
        if max_w is not None and src.width > max_w:
            raise errors.LimitExceededError(
                _over("src_width", src.width, "max_width", max_w))
        if max_h is not None and src.height > max_h:
            raise errors.LimitExceededError(
                _over("src_height", src.height, "max_height", max_h))
        if max_bytes is not None and src.span > max_bytes:
            raise errors.LimitExceededError(
                _over("input_size", src.span, "max_frame_bytes", max_bytes))
        if late is not None:
            raise errors.LimitExceededError(late)
        if self._gray and src.format != PixelFormat.GRAY8:
            raise errors.InvalidRequestError(
                "order gray needs a gray8 source frame")

    def inline_header(self, src: Source, request_id: int) -> bytes:
        """The header of an inline request for src."""
        return self.header.stamp(request_id, src.format, src.width,
                                 src.height, src.stride, 0, 0, 0, src.span,
                                 src.planes)


_plans: dict[tuple[Any, ...], Plan] = {}


def plan(size: Sequence[int], resize: ResizeName, order: OrderName,
         dtype: DTypeOption, layout: LayoutName, scale: float,
         mean: float | Sequence[float], std: float | Sequence[float],
         pad: float, matrix: MatrixName = "bt601",
         yuv_range: YuvRangeName = "limited") -> Plan:
    """The :class:`Plan` of :meth:`Options.make`'s arguments (and its
    errors), kept for the next request with equal (hashable) arguments."""
    key = (size, resize, order, dtype, type(dtype), layout, scale, mean, std,
           pad, matrix, yuv_range)
    try:
        p = _plans.get(key)
    except TypeError:  # a list or an array among the options
        return Plan(Options.make(size, resize, order, dtype, layout, scale,
                                 mean, std, pad, matrix, yuv_range))
    if p is None:
        p = Plan(Options.make(size, resize, order, dtype, layout, scale, mean,
                              std, pad, matrix, yuv_range))
        if len(_plans) >= 64:
            _plans.clear()
        _plans[key] = p
    return p


def message(header: bytes, payload: Any = None, size: int = 0) -> Any:
    """An nng message holding header and ``size`` bytes of payload (an
    object with the buffer interface, or a cdata pointer), copied once."""
    p = _ffi.new("nng_msg **")
    if _lib.nng_msg_alloc(p, len(header) + size) != 0:
        raise errors.ServerOutOfMemoryError("cannot allocate an nng message")
    body = _lib.nng_msg_body(p[0])
    _ffi.memmove(body, header, len(header))
    if size:
        _ffi.memmove(_ffi.cast("char *", body) + len(header), payload, size)
    return pynng.Message(p[0])


def pipe_peer_uid(pipe: Any) -> int | None:
    """The uid of an ipc:// pipe's peer (SO_PEERCRED), or None."""
    v = _ffi.new("uint64_t *")
    if _lib.nng_pipe_get_uint64(pipe.pipe, b"ipc:peer-uid", v) != 0:
        return None
    return int(v[0])


def _nng_error(rc: int) -> pynng.NNGException:
    try:
        pynng.exceptions.check_err(rc)
    except pynng.NNGException as exc:
        return exc
    return pynng.NNGException(f"nng error {rc}", rc)


# nng_ctx_sendmsg and nng_ctx_recvmsg (nng >= 1.6) make a round trip two
# calls into nng; without them each direction takes an aio.
# The reply in shared memory (protocol.h): the waiting thread sleeps in
# futex(2) on the low 32 bits of the reply header's request_id, which the
# daemon wakes. The system call number is the architecture's; elsewhere
# (or without nng_aio_busy) replies come through nng alone.
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_WAIT = 0
# How long one wait lasts before nng's receive is looked at again: a reply
# the daemon could not write into the region (a request refused before it
# was looked up) comes through nng alone.
_FUTEX_SLICE_NS = 1_000_000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


if _SYS_FUTEX is not None and hasattr(_lib, "nng_aio_busy"):
    _syscall = ctypes.CDLL(None, use_errno=True).syscall
    _syscall.restype = ctypes.c_long
    _syscall.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int,
                         ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_int]
    _SLICE = _Timespec(0, _FUTEX_SLICE_NS)
    _SLICE_P = ctypes.cast(ctypes.pointer(_SLICE), ctypes.c_void_p)
    SHM_REPLY = True
else:
    SHM_REPLY = False

SYNC_CTX = hasattr(_lib, "nng_ctx_sendmsg") and hasattr(_lib,
                                                        "nng_ctx_recvmsg")

# Doorbells (protocol.h, "Doorbells"): a request posted in shared memory
# that the daemon's loop takes while it polls, or after the client rang
# the area's wake word while the daemon sleeps. An entry's state word
# changes only through atomic operations: the client's through futex(2)'s
# FUTEX_WAKE_OP, which applies one to a word in the kernel (with a full
# barrier) and here wakes nobody: it sets POSTED, and takes the entry back
# by clearing bit 0, which turns POSTED into FREE and leaves TAKEN (the
# daemon's compare-and-swap) as it is. Ringing is the same call on the
# wake word: it sets RUNG and wakes the daemon's waker.
DOORBELL = SHM_REPLY
DOORBELL_HEADER_SIZE = 64
DOORBELL_ENTRY_SIZE = 512
DOORBELL_ENTRIES_MAX = 64
DOORBELL_REQUEST_AT = 64
DOORBELL_REPLY_AT = 256
DOORBELL_WAKE_AT = 4
_DB_FREE, _DB_POSTED = 0, 1
_DB_ARMED, _DB_RUNG = 1, 2
_FUTEX_WAKE_OP = 5


def _futex_op(op: int, oparg: int) -> int:
    """FUTEX_OP(op, oparg, FUTEX_OP_CMP_EQ, 0) of linux/futex.h."""
    return (op & 0xF) << 28 | (oparg & 0xFFF) << 12


_OP_SET_POSTED = _futex_op(0, _DB_POSTED)  # FUTEX_OP_SET
_OP_CLEAR_POSTED = _futex_op(3, _DB_POSTED)  # FUTEX_OP_ANDN
_OP_NOTHING = _futex_op(2, 0)  # FUTEX_OP_OR 0: a barrier
_OP_RING = _futex_op(2, _DB_RUNG)  # FUTEX_OP_OR RUNG


def _db_atomic(addr: int, op: int, wake: int = 0) -> bool:
    """Applies op to the 32-bit word at addr and wakes up to wake of its
    waiters (shared futex); False when the kernel refused."""
    return bool(_syscall(_SYS_FUTEX, addr, _FUTEX_WAKE_OP, wake, None, addr,
                         op) >= 0)


def _db_watched(polling: Any, wake: Any) -> bool:
    """Whether the daemon watches a doorbell area: it polls it, or its
    waker sleeps on the wake word."""
    return bool(polling[0] != 0 or (wake[0] & _DB_ARMED) != 0)


class DaemonGone(errors.TransportError):
    """The connection closed while a request waited for its reply in
    shared memory: the daemon died (or restarted), and the reply will not
    come there."""


def doorbell_call(area: int, entry: int, head: Any, request_id: int,
                  timeout_s: float, conn: Any = None,
                  lost: int | None = None) -> bool:
    """Posts the request header head (128 bytes: bytes or a cdata
    pointer) in the doorbell entry at address entry of the area at
    address area, when the daemon watches it (polls it, or sleeps on its
    wake word, which is then rung), and waits for its reply header at
    entry + DOORBELL_REPLY_AT, sleeping in futex(2) (woken by the
    daemon's write). Returns True when the reply header is there; False
    when the daemon did not watch, or stopped before it took the request
    (the entry is the client's again: send the request through nng).
    Raises :class:`~frameprep.RequestTimeoutError` when the daemon took
    the request and did not answer within timeout_s, and
    :class:`DaemonGone` when ``conn.lost`` differs from lost (default
    its value now) while it waits (the connection closed: the daemon
    died), noticed within one futex slice (1 ms)."""
    if conn is not None and lost is None:
        lost = conn.lost
    polling = _ffi.cast("uint32_t *", area)
    wake = _ffi.cast("uint32_t *", area + DOORBELL_WAKE_AT)
    state = _ffi.cast("uint32_t *", entry)
    word_at = entry + DOORBELL_REPLY_AT + 8
    word = _ffi.cast("uint64_t *", word_at)
    if not _db_watched(polling, wake):
        return False
    _ffi.memmove(_ffi.cast("char *", entry + DOORBELL_REQUEST_AT), head,
                 REQUEST_HEADER_SIZE)
    word[0] = 0
    if not _db_atomic(entry, _OP_SET_POSTED):
        return False
    if polling[0] == 0 and wake[0] & _DB_ARMED:
        _db_atomic(area + DOORBELL_WAKE_AT, _OP_RING, 1)
    deadline = time.monotonic() + timeout_s
    while True:
        v = word[0]
        if v == request_id:
            _db_atomic(entry, _OP_NOTHING)  # before the header is read
            return True
        late = time.monotonic() > deadline
        if state[0] == _DB_POSTED and (not _db_watched(polling, wake)
                                       or late):
            _db_atomic(entry, _OP_CLEAR_POSTED)
            if state[0] == _DB_FREE:
                return False
        if late:
            raise errors.RequestTimeoutError(
                f"no reply in the doorbell within {timeout_s:g} s")
        if conn is not None and conn.lost != lost:
            raise DaemonGone("the connection to the daemon closed while "
                             "a request waited in its doorbell")
        _syscall(_SYS_FUTEX, word_at, _FUTEX_WAIT, v & 0xFFFFFFFF,
                 _SLICE_P, None, 0)


class Ctx:
    """One nng context of a REQ socket, for one request at a time, with the
    socket's timeouts. Each call into nng releases the GIL, so a round trip
    makes as few as it can."""

    __slots__ = ("ctx", "_raw", "_msgp", "_aio", "_saio", "_raio",
                 "_rbusy")

    def __init__(self, sock: pynng.Socket):
        self.ctx = sock.new_context()
        self._raw = self.ctx.context
        self._msgp = _ffi.new("nng_msg **")
        self._aio = None
        self._saio = None
        self._raio = None
        self._rbusy = False
        if not SYNC_CTX:
            p = _ffi.new("nng_aio **")
            rc = _lib.nng_aio_alloc(p, _NULL, _NULL)
            if rc != 0:
                self.ctx.close()
                raise _nng_error(rc)
            self._aio = _ffi.gc(p[0], _lib.nng_aio_free)

    def exchange(self, head: bytes, body: Any, size: int) -> Any:
        """Sends head and then ``size`` bytes at body (a cdata pointer) as
        one message and returns the reply (an ``nng_msg *`` the caller
        frees). Raises ``pynng.NNGException`` (timeout, closed, ...) or
        :class:`~frameprep.ServerOutOfMemoryError`."""
        mp = self._msgp
        if _lib.nng_msg_alloc(mp, 0) != 0:
            raise errors.ServerOutOfMemoryError(
                "cannot allocate an nng message")
        m = mp[0]
        rc = _lib.nng_msg_append(m, head, len(head))
        if rc == 0 and size:
            rc = _lib.nng_msg_append(m, body, size)
        if rc != 0:
            _lib.nng_msg_free(m)
            raise errors.ServerOutOfMemoryError(
                "cannot allocate an nng message")
        aio = self._aio
        if aio is None:
            rc = _lib.nng_ctx_sendmsg(self._raw, m, 0)
            if rc != 0:
                _lib.nng_msg_free(m)
                raise _nng_error(rc)
            rc = _lib.nng_ctx_recvmsg(self._raw, mp, 0)
            if rc != 0:
                raise _nng_error(rc)
            return mp[0]
        _lib.nng_aio_set_msg(aio, m)
        _lib.nng_ctx_send(self._raw, aio)
        _lib.nng_aio_wait(aio)
        rc = _lib.nng_aio_result(aio)
        if rc != 0:
            _lib.nng_aio_set_msg(aio, _NULL)
            _lib.nng_msg_free(m)
            raise _nng_error(rc)
        _lib.nng_ctx_recv(self._raw, aio)
        _lib.nng_aio_wait(aio)
        rc = _lib.nng_aio_result(aio)
        if rc != 0:
            raise _nng_error(rc)
        return _lib.nng_aio_get_msg(aio)

    def _retire(self) -> None:
        """Waits for the receive that the last reply through shared memory
        cancelled (done long since, as a rule) and drops nng's message,
        should one have come, so that the receive's aio can be reused."""
        aio = self._raio
        self._rbusy = False
        _lib.nng_aio_wait(aio)
        if _lib.nng_aio_result(aio) == 0:
            _lib.nng_msg_free(_lib.nng_aio_get_msg(aio))
        _lib.nng_aio_set_msg(aio, _NULL)

    def exchange_shm(self, head: Any, reply_at: int, request_id: int,
                     timeout_ms: int, conn: Any = None,
                     lost: int | None = None) -> Any:
        """Sends head (a request asking for its reply in shared memory,
        ``FPREP_LOC_F_SHM_REPLY``) and waits for the reply header that the
        daemon writes at address reply_at, sleeping in futex(2), not in
        nng's receive; nng's reply, when it comes first (a request refused
        before its region was looked up), is taken instead. Returns
        ``None`` when the header at reply_at is the reply, else the nng
        reply (an ``nng_msg *`` the caller frees). The receive that a
        reply in shared memory makes useless is cancelled without waiting
        and retired after the next send, while the daemon works. Raises as
        :meth:`exchange`, and :class:`DaemonGone` when the connection
        closes (``conn.lost`` differs from lost, default its value now:
        the daemon died) while it waits."""
        if conn is not None and lost is None:
            lost = conn.lost
        word = _ffi.cast("uint64_t *", reply_at + 8)
        word[0] = 0
        mp = self._msgp
        if _lib.nng_msg_alloc(mp, 0) != 0 or \
                _lib.nng_msg_append(mp[0], head, REQUEST_HEADER_SIZE) != 0:
            raise errors.ServerOutOfMemoryError(
                "cannot allocate an nng message")
        if self._raio is None:
            p = _ffi.new("nng_aio *[2]")
            rc = _lib.nng_aio_alloc(p, _NULL, _NULL)
            if rc == 0:
                rc = _lib.nng_aio_alloc(p + 1, _NULL, _NULL)
                if rc != 0:
                    _lib.nng_aio_free(p[0])
            if rc != 0:
                _lib.nng_msg_free(mp[0])
                raise _nng_error(rc)
            self._raio = _ffi.gc(p[0], _lib.nng_aio_free)
            self._saio = _ffi.gc(p[1], _lib.nng_aio_free)
        aio = self._saio
        _lib.nng_aio_set_msg(aio, mp[0])
        _lib.nng_aio_set_timeout(aio, timeout_ms)
        _lib.nng_ctx_send(self._raw, aio)
        _lib.nng_aio_wait(aio)
        rc = _lib.nng_aio_result(aio)
        if rc != 0:
            m = _lib.nng_aio_get_msg(aio)
            _lib.nng_aio_set_msg(aio, _NULL)
            _lib.nng_msg_free(m)
            raise _nng_error(rc)
        aio = self._raio
        if self._rbusy:
            self._retire()
        _lib.nng_aio_set_timeout(aio, timeout_ms)
        _lib.nng_ctx_recv(self._raw, aio)
        addr = reply_at + 8
        while True:
            v = word[0]
            if v == request_id:
                # nng_aio_cancel takes a lock: a barrier before the
                # header's other bytes are read.
                _lib.nng_aio_cancel(aio)
                self._rbusy = True
                return None
            if not _lib.nng_aio_busy(aio):
                break
            if conn is not None and conn.lost != lost:
                _lib.nng_aio_cancel(aio)
                self._rbusy = True
                raise DaemonGone("the connection to the daemon closed "
                                 "while a request waited")
            _syscall(_SYS_FUTEX, addr, _FUTEX_WAIT, v & 0xFFFFFFFF,
                     _SLICE_P, None, 0)
        rc = _lib.nng_aio_result(aio)
        if rc != 0:
            raise _nng_error(rc)
        m = _lib.nng_aio_get_msg(aio)
        _lib.nng_aio_set_msg(aio, _NULL)
        return m

    def close(self) -> None:
        """Closes the context (ignoring errors) and frees its aios."""
        try:
            self.ctx.close()
        except pynng.NNGException:
            pass
        if self._rbusy:
            self._retire()
        if self._saio is not None:
            _ffi.release(self._saio)
            self._saio = None
        if self._aio is not None:
            _ffi.release(self._aio)
            self._aio = None
        if self._raio is not None:
            _ffi.release(self._raio)
            self._raio = None


class OwnedMessage:
    """A received nng message (``nng_msg *``), freed with the last
    reference to this object (a tensor viewing it holds one)."""

    __slots__ = ("_nng_msg",)

    def __init__(self, msg: Any):
        self._nng_msg = msg

    def __del__(self) -> None:
        _lib.nng_msg_free(self._nng_msg)


class _MessageArray:
    """Owner of a reply message whose bytes a numpy array views."""

    __slots__ = ("msg", "__array_interface__")

    def __init__(self, msg: Any, offset: int, shape: tuple[int, ...],
                 typestr: str):
        self.msg = msg
        addr = int(_ffi.cast("uintptr_t", _lib.nng_msg_body(msg._nng_msg)))
        self.__array_interface__ = {"data": (addr + offset, False),
                                    "shape": shape, "typestr": typestr,
                                    "version": 3}


def decode_reply(msg: Any) -> Reply:
    """Decodes the header of a reply message (an ``nng_msg *``)."""
    head, n = reply_head(msg)
    return Reply.decode(head, n)


def reply_head(msg: Any) -> tuple[bytes, int]:
    """A copy of the header of a reply message (an ``nng_msg *``) and the
    message's length; raises :class:`~frameprep.ProtocolError` for a
    message shorter than a header."""
    n = _lib.nng_msg_len(msg)
    if n < REPLY_HEADER_SIZE:
        raise errors.ProtocolError(f"reply of {n} bytes is shorter than the "
                                   f"{REPLY_HEADER_SIZE}-byte header")
    return _ffi.buffer(_lib.nng_msg_body(msg), REPLY_HEADER_SIZE)[:], n


def reply_of(msg: Any) -> Reply:
    """Decodes the header of a reply message (a ``pynng.Message`` or an
    :class:`OwnedMessage`)."""
    return decode_reply(msg._nng_msg)


def payload_array(msg: Any, rep: Reply) -> np.ndarray[Any, Any]:
    """The reply's tensor as a writable numpy view of the message."""
    shape = rep.shape if rep.ndim == 4 else tuple(rep.shape[:rep.ndim])
    return np.asarray(_MessageArray(msg, REPLY_HEADER_SIZE, shape,
                                    _NUMPY_DTYPES[rep.dtype]))


def payload_bytes(msg: Any, rep: Reply) -> bytes:
    """The reply's payload as bytes (a copy)."""
    body = _ffi.cast("char *", _lib.nng_msg_body(msg._nng_msg))
    return bytes(_ffi.buffer(body + REPLY_HEADER_SIZE, rep.payload_size))


def check_reply(rep: Reply, request_id: int, kind: int) -> None:
    """Raises the exception of a reply's status, or
    :class:`~frameprep.MismatchError` for a reply to another request."""
    if rep.request_id != request_id or rep.kind != kind:
        if rep.status != 0 and rep.request_id == 0:
            raise errors.error_for_status(rep.status, rep.message)
        raise errors.MismatchError(
            f"reply to request {rep.request_id} kind {rep.kind} for "
            f"request {request_id} kind {kind}")
    if rep.status != 0:
        raise errors.error_for_status(rep.status, rep.message)


def transport_error(exc: Exception, address: str,
                    timeout: float) -> errors.FrameprepError:
    """Translates a pynng exception into the frameprep class."""
    if isinstance(exc, pynng.Timeout):
        return errors.RequestTimeoutError(
            f"no reply from {address} within {timeout:g} s")
    if isinstance(exc, pynng.Closed):
        return errors.ClosedError("the client was closed")
    return errors.TransportError(f"{address}: {exc}")


@dataclasses.dataclass(frozen=True)
class Transform:
    """Where the source landed in the tensor.

    A tensor point (u, v) maps back to the source point
    ((u - pad_x) / scale_x, (v - pad_y) / scale_y). ``scale_*`` are tensor
    pixels per source pixel, ``pad_*`` the left and top padding in tensor
    pixels, ``src_width``/``src_height`` the source size in pixels.
    """

    scale_x: float
    scale_y: float
    pad_x: float
    pad_y: float
    src_width: int
    src_height: int

    def to_source(self, xyxy: Any) -> np.ndarray[Any, Any]:
        """Maps boxes (N, 4) as (x1, y1, x2, y2) in tensor pixels (a
        detector's output) back to source pixels, clipped to the image
        ([0, src_width] x [0, src_height]). Vectorised; returns a new float
        array of the same shape (float32 input stays float32, anything else
        becomes float64). Raises ``ValueError`` if the last axis is not 4."""
        boxes = np.asarray(xyxy)
        if boxes.ndim < 1 or boxes.shape[-1] != 4:
            raise ValueError(f"boxes of shape {boxes.shape} are not (N, 4)")
        dtype = np.result_type(boxes.dtype, np.float32)
        out = np.empty(boxes.shape, dtype)
        np.subtract(boxes[..., 0::2], self.pad_x, out=out[..., 0::2])
        np.subtract(boxes[..., 1::2], self.pad_y, out=out[..., 1::2])
        out[..., 0::2] /= self.scale_x
        out[..., 1::2] /= self.scale_y
        np.clip(out[..., 0::2], 0, self.src_width, out=out[..., 0::2])
        np.clip(out[..., 1::2], 0, self.src_height, out=out[..., 1::2])
        return out


@dataclasses.dataclass(frozen=True)
class Timings:
    """The daemon's timings of one request, in microseconds: receipt to
    start of work (queue), preprocessing (compute), GPU copies and kernel
    (0 on the CPU backend), receipt to reply (total)."""

    queue_us: int
    compute_us: int
    h2d_us: int
    kernel_us: int
    d2h_us: int
    total_us: int


_new = object.__new__
# Reply fields at byte 40: scale_x, scale_y, pad_x, pad_y, then the six
# timings (protocol.h).
_REPLY_PLACES = struct.Struct("<4f6I")


class Result:
    """One preprocessed frame.

    ``tensor`` is a numpy array of shape (1, C, H, W) (NCHW) or
    (1, H, W, C) (NHWC), dtype float32, float16 or uint8, C = 3 (channels
    in the requested order) or 1 (gray). For inline requests it views the
    reply message and lives as long as the array; a ring's result is a
    :class:`~frameprep.RingResult`, whose tensor views the ring's slot,
    held until the result is released (copy the tensor to keep it longer).
    With ``out=`` it is ``out`` (numpy) or a view of it (CUDA).
    ``transform`` maps tensor
    boxes back to the source, ``timings`` are the daemon's, ``reply`` the
    whole reply header (:class:`~frameprep.protocol.Reply`), ``request_id``
    the request's id. The attributes are read-only; ``transform``,
    ``timings`` and ``reply`` are made from the reply header when first
    read.
    """

    __slots__ = ("tensor", "request_id", "_head", "_length", "_src_width",
                 "_src_height", "_reply", "_transform", "_timings")

    tensor: np.ndarray[Any, Any]
    request_id: int
    _head: bytes
    _length: int
    _src_width: int
    _src_height: int
    _reply: Reply | None
    _transform: Transform | None
    _timings: Timings | None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Result.{name} is read-only")

    @property
    def reply(self) -> Reply:
        """The reply header."""
        rep = self._reply
        if rep is None:
            rep = Reply.decode(self._head, self._length)
            object.__setattr__(self, "_reply", rep)
        return rep

    def _places(self) -> tuple[Any, ...]:
        rep = self._reply
        if rep is None:
            return _REPLY_PLACES.unpack_from(self._head, 40)
        return (rep.scale_x, rep.scale_y, rep.pad_x, rep.pad_y,
                rep.t_queue_us, rep.t_compute_us, rep.t_h2d_us,
                rep.t_kernel_us, rep.t_d2h_us, rep.t_total_us)

    @property
    def transform(self) -> Transform:
        """Where the source landed in the tensor."""
        xf = self._transform
        if xf is None:
            f = self._places()
            xf = Transform(f[0], f[1], f[2], f[3], self._src_width,
                           self._src_height)
            object.__setattr__(self, "_transform", xf)
        return xf

    @property
    def timings(self) -> Timings:
        """The daemon's timings of the request."""
        tm = self._timings
        if tm is None:
            tm = Timings(*self._places()[4:])
            object.__setattr__(self, "_timings", tm)
        return tm

    def __repr__(self) -> str:
        return (f"Result(tensor=<{self.tensor.dtype} {self.tensor.shape}>, "
                f"request_id={self.request_id}, "
                f"transform={self.transform!r}, timings={self.timings!r})")


_set = object.__setattr__


def new_result(tensor: np.ndarray[Any, Any], request_id: int, src: Source,
               rep: Reply | None = None, head: bytes = b"",
               length: int = 0, cls: type[Result] | None = None) -> Result:
    """A result of a successful FRAME or ECHO reply: decoded (rep) or
    not yet (head, the reply's first REPLY_HEADER_SIZE bytes, of a message
    of ``length`` bytes, already checked by the caller)."""
    res = _new(cls or Result)
    _set(res, "tensor", tensor)
    _set(res, "request_id", request_id)
    _set(res, "_head", head)
    _set(res, "_length", length)
    _set(res, "_src_width", src.width)
    _set(res, "_src_height", src.height)
    _set(res, "_reply", rep)
    _set(res, "_transform", None)
    _set(res, "_timings", None)
    return res


def make_result(tensor: np.ndarray[Any, Any], rep: Reply, src: Source) -> Result:
    """The result of a successful, decoded FRAME or ECHO reply."""
    return new_result(tensor, rep.request_id, src, rep)


def info_request(request_id: int) -> bytes:
    """The whole INFO request message."""
    return Request(kind=Kind.INFO, request_id=request_id).encode()

