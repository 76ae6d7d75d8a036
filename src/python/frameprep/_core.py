"""Pieces shared by the blocking and the asyncio client: option parsing,
frame checks, message building (one copy of the frame into the nng
message) and reply decoding (the tensor is a view of the reply message)."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Sequence

import numpy as np
import pynng

from . import errors
from .protocol import (REPLY_HEADER_SIZE, ChannelOrder,
                       DType, Kind, Layout, PixelFormat, Reply, Request,
                       Resize, dtype_bytes)

_ffi = pynng.ffi
_lib = pynng.lib

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
            "gray8": PixelFormat.GRAY8, "gray": PixelFormat.GRAY8}


def default_address() -> str:
    """The daemon's default listen URL, as ``fprep_default_url`` builds it:
    ``ipc://$XDG_RUNTIME_DIR/frameprep.sock`` when XDG_RUNTIME_DIR is set
    and not empty, else ``ipc:///tmp/frameprep-$UID.sock``."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run:
        return f"ipc://{run}/frameprep.sock"
    return f"ipc:///tmp/frameprep-{os.getuid()}.sock"


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

    @classmethod
    def make(cls, size: Sequence[int] = (640, 640), resize: str = "letterbox",
             order: str = "rgb", dtype: Any = "float32",
             layout: str = "nchw", scale: float = 1 / 255,
             mean: float | Sequence[float] = (0.0, 0.0, 0.0),
             std: float | Sequence[float] = (1.0, 1.0, 1.0),
             pad: float = 114) -> Options:
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
                   triple(mean, "mean"), triple(std, "std"), float(pad))

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
                       scale=self.scale, mean=self.mean, std=self.std)


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
    array: np.ndarray

    def address(self) -> int:
        """Address of the first byte."""
        return self.array.__array_interface__["data"][0]

    def bytes_view(self) -> np.ndarray:
        """A 1-D uint8 view of the span (no copy)."""
        return np.lib.stride_tricks.as_strided(self.array, (self.span,),
                                               (1,), writeable=False)


def check_frame(frame: Any, format: str | None = None) -> Source:
    """Checks a frame: a numpy uint8 array (H, W), (H, W, 1), (H, W, 3) or
    (H, W, 4). ``format`` (bgr8, rgb8, bgra8, rgba8, gray8) defaults to
    gray8, bgr8 or bgra8 by channel count. Rows may be strided (a crop of a
    bigger frame is sent with its row stride, without a copy); pixels must
    be packed, else the frame is copied. Raises
    :class:`~frameprep.InvalidRequestError`."""
    if not isinstance(frame, np.ndarray):
        raise errors.InvalidRequestError(
            f"frame must be a numpy.ndarray, not {type(frame).__name__}")
    if frame.dtype != np.uint8:
        raise errors.InvalidRequestError(
            f"frame dtype {frame.dtype} is not uint8")
    if frame.ndim == 2:
        channels = 1
    elif frame.ndim == 3 and frame.shape[2] in (1, 3, 4):
        channels = frame.shape[2]
    else:
        raise errors.InvalidRequestError(
            f"frame shape {frame.shape} is not (H, W), (H, W, 1), "
            f"(H, W, 3) or (H, W, 4)")
    h, w = frame.shape[:2]
    if h < 1 or w < 1:
        raise errors.InvalidRequestError(f"frame shape {frame.shape} is "
                                         f"empty")
    if format is None:
        fmt = {1: PixelFormat.GRAY8, 3: PixelFormat.BGR8,
               4: PixelFormat.BGRA8}[channels]
    else:
        fmt = _pick(_FORMATS, format, "format")
        if fmt.channels != channels:
            raise errors.InvalidRequestError(
                f"format {format} has {fmt.channels} channels but the "
                f"frame shape {frame.shape} has {channels}")
    packed = frame.strides[1] == channels and (
        frame.ndim == 2 or frame.strides[2] == 1)
    if not packed or frame.strides[0] < w * channels:
        frame = np.ascontiguousarray(frame)
    stride = frame.strides[0]
    return Source(fmt, w, h, stride, stride * (h - 1) + w * channels, frame)


def frame_request(opts: Options, src: Source, request_id: int,
                  kind: int = Kind.FRAME) -> Request:
    """The request for a source with these options (inline input)."""
    req = opts.request(kind)
    req.request_id = request_id
    req.src_format = src.format
    req.src_width = src.width
    req.src_height = src.height
    req.src_stride = src.stride
    req.input_size = src.span
    return req


def check_limits(req: Request, opts: Options, limits: dict[str, Any]) -> None:
    """Raises :class:`~frameprep.LimitExceededError` for a request beyond
    the daemon's limits (INFO's max_* keys): a frame larger than
    max_frame_bytes would make nng drop the connection."""
    for field, value, key in (
            ("src_width", req.src_width, "max_width"),
            ("src_height", req.src_height, "max_height"),
            ("input_size", req.input_size, "max_frame_bytes"),
            ("out_width", req.out_width, "max_out_width"),
            ("out_height", req.out_height, "max_out_height"),
            ("tensor bytes", opts.tensor_bytes, "max_tensor_bytes")):
        bound = limits.get(key)
        if isinstance(bound, int) and value > bound:
            raise errors.LimitExceededError(
                f"{field} {value} exceeds the daemon's {key} {bound}")
    if (opts.order == ChannelOrder.GRAY and
            req.src_format != PixelFormat.GRAY8):
        raise errors.InvalidRequestError(
            "order gray needs a gray8 source frame")


def message(header: bytes, payload: Any = None, size: int = 0) -> Any:
    """An nng message holding header and ``size`` bytes of payload (an
    object with the buffer interface), copied once."""
    p = _ffi.new("nng_msg **")
    if _lib.nng_msg_alloc(p, len(header) + size) != 0:
        raise errors.ServerOutOfMemoryError("cannot allocate an nng message")
    body = _lib.nng_msg_body(p[0])
    _ffi.memmove(body, header, len(header))
    if size:
        _ffi.memmove(_ffi.cast("char *", body) + len(header), payload, size)
    return pynng.Message(p[0])


class _MessageArray:
    """Owner of a reply message whose bytes a numpy array views."""

    def __init__(self, msg: pynng.Message, offset: int, shape: tuple,
                 typestr: str):
        self.msg = msg
        addr = int(_ffi.cast("uintptr_t", _lib.nng_msg_body(msg._nng_msg)))
        self.__array_interface__ = {"data": (addr + offset, False),
                                    "shape": shape, "typestr": typestr,
                                    "version": 3}


def reply_of(msg: pynng.Message) -> Reply:
    """Decodes the header of a reply message."""
    n = _lib.nng_msg_len(msg._nng_msg)
    if n < REPLY_HEADER_SIZE:
        raise errors.ProtocolError(f"reply of {n} bytes is shorter than the "
                                   f"{REPLY_HEADER_SIZE}-byte header")
    head = _ffi.buffer(_lib.nng_msg_body(msg._nng_msg), REPLY_HEADER_SIZE)
    return Reply.decode(head, n)


def payload_array(msg: pynng.Message, rep: Reply) -> np.ndarray:
    """The reply's tensor as a writable numpy view of the message."""
    shape = tuple(rep.shape[:rep.ndim])
    return np.asarray(_MessageArray(msg, REPLY_HEADER_SIZE, shape,
                                    DType(rep.dtype).numpy))


def payload_bytes(msg: pynng.Message, rep: Reply) -> bytes:
    """The reply's payload as bytes (a copy)."""
    body = _ffi.cast("char *", _lib.nng_msg_body(msg._nng_msg))
    return bytes(_ffi.buffer(body + REPLY_HEADER_SIZE, rep.payload_size))


def check_reply(rep: Reply, req: Request) -> None:
    """Raises the exception of a reply's status, or
    :class:`~frameprep.MismatchError` for a reply to another request."""
    if rep.request_id != req.request_id or rep.kind != req.kind:
        if rep.status != 0 and rep.request_id == 0:
            raise errors.error_for_status(rep.status, rep.message)
        raise errors.MismatchError(
            f"reply to request {rep.request_id} kind {rep.kind} for "
            f"request {req.request_id} kind {req.kind}")
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

    def to_source(self, xyxy: Any) -> np.ndarray:
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


@dataclasses.dataclass(frozen=True)
class Result:
    """One preprocessed frame.

    ``tensor`` is a numpy array of shape (1, C, H, W) (NCHW) or
    (1, H, W, C) (NHWC), dtype float32, float16 or uint8, C = 3 (channels
    in the requested order) or 1 (gray). For inline requests it views the
    reply message and lives as long as the array; for a shared-memory ring
    it views the ring's output slot and is valid until the ring hands that
    slot out again (copy it to keep it longer). ``transform`` maps tensor
    boxes back to the source, ``timings`` are the daemon's, ``reply`` the
    whole reply header.
    """

    tensor: np.ndarray
    transform: Transform
    timings: Timings
    request_id: int
    reply: Reply


def make_result(tensor: np.ndarray, rep: Reply, src: Source) -> Result:
    """Builds the result of a successful FRAME or ECHO reply."""
    xf = Transform(rep.scale_x, rep.scale_y, rep.pad_x, rep.pad_y,
                   src.width, src.height)
    tm = Timings(rep.t_queue_us, rep.t_compute_us, rep.t_h2d_us,
                 rep.t_kernel_us, rep.t_d2h_us, rep.t_total_us)
    return Result(tensor, xf, tm, rep.request_id, rep)


def info_request(request_id: int) -> bytes:
    """The whole INFO request message."""
    return Request(kind=Kind.INFO, request_id=request_id).encode()

