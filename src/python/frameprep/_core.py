"""Pieces shared by the blocking and the asyncio client: option parsing,
frame checks, the request templates (:class:`Plan`, one C request per set
of options) and results (the tensor is a numpy view of the memory the
reply owns: the reply message, or the client's stage)."""

from __future__ import annotations

import dataclasses
import os
from typing import (TYPE_CHECKING, Any, Generic, Literal, Protocol, Sequence,
                    Union)

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from typing_extensions import Buffer, TypeAlias, TypeVar
else:
    # For type checkers only: without typing_extensions >= 4.6 (Debian
    # 12's python3-typing-extensions is 4.4; a wheel installed with
    # --no-deps has none) the package runs all the same.
    try:
        from typing_extensions import Buffer, TypeAlias, TypeVar
    except ImportError:
        import typing

        Buffer = TypeAlias = Any

        def TypeVar(name, *constraints, default=None, **kw):
            """typing.TypeVar without the default (PEP 696)."""
            return typing.TypeVar(name, *constraints, **kw)

from . import _native, errors
from .protocol import (ChannelOrder, DType, Kind, Layout, PixelFormat, Reply,
                       Request, Resize, Rounding, YuvMatrix, YuvRange)

_U8 = np.dtype(np.uint8)
_NUMPY_DTYPES = {int(d): d.numpy for d in DType}
_DEFAULT_FORMATS = {1: PixelFormat.GRAY8, 3: PixelFormat.BGR8,
                    4: PixelFormat.BGRA8}

# The options' names, as static types (the dicts below map them).
ResizeName = Literal["letterbox", "stretch"]
"""``resize=``: aspect kept and padded (letterbox), or stretched."""
OrderName = Literal["rgb", "bgr", "gray"]
"""``order=``: the tensor's channels (gray: one channel)."""
DTypeName = Literal["float32", "f32", "float16", "f16", "uint8", "u8"]
"""``dtype=`` by name: the tensor's element type."""
DTypeOption = Union[DTypeName, "type[np.generic]", "np.dtype[Any]"]
"""``dtype=``: a name, a numpy scalar type or a numpy dtype."""
F32Option = Union[Literal["float32", "f32"], "type[np.float32]",
                  "np.dtype[np.float32]"]
"""The ``dtype`` options that make a float32 tensor (the default)."""
F16Option = Union[Literal["float16", "f16"], "type[np.float16]",
                  "np.dtype[np.float16]"]
"""The ``dtype`` options that make a float16 tensor."""
U8Option = Union[Literal["uint8", "u8"], "type[np.uint8]",
                 "np.dtype[np.uint8]"]
"""The ``dtype`` options that make a uint8 tensor."""
LayoutName = Literal["nchw", "nhwc"]
"""``layout=``: channels first (NCHW) or last (NHWC)."""
FormatName = Literal["bgr8", "bgr", "rgb8", "rgb", "bgra8", "bgra", "rgba8",
                     "rgba", "gray8", "gray", "nv12", "i420", "yuyv", "yuy2",
                     "jpeg"]
"""``format=``: the source frame's pixel format (a JPEG's bytes: jpeg)."""
MatrixName = Literal["bt601", "bt709", "bt2020"]
"""``matrix=``: a YUV source's colour matrix."""
YuvRangeName = Literal["limited", "full"]
"""``yuv_range=``: a YUV source's range (limited: 16-235 luma)."""
RoundingName = Literal["float", "opencv"]
"""``rounding=``: the bilinear blend kept in float (within 1 LSB of
OpenCV), or rounded as cv2.resize does, bit for bit (see
:meth:`Client.preprocess`)."""

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
            "yuyv": PixelFormat.YUYV, "yuy2": PixelFormat.YUYV,
            "jpeg": PixelFormat.JPEG}
_MATRICES = {"bt601": YuvMatrix.BT601, "bt709": YuvMatrix.BT709,
             "bt2020": YuvMatrix.BT2020}
_YUV_RANGES = {"limited": YuvRange.LIMITED, "full": YuvRange.FULL}
_ROUNDINGS = {"float": Rounding.FLOAT, "opencv": Rounding.OPENCV}


class CudaArray(Protocol):
    """A CUDA array as frameprep takes it (a frame, or ``out=``): any
    object with ``__cuda_array_interface__`` (PyTorch, CuPy, Numba).
    Tensors that speak DLPack alone are taken too, at run time."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]: ...


Frame: TypeAlias = Union[npt.NDArray[Any], Buffer, CudaArray]
"""What ``preprocess`` takes as a frame: a numpy uint8 array of pixels,
the bytes of a JPEG file (bytes, bytearray, memoryview or any buffer;
``format="jpeg"``), or a CUDA array of pixels (:class:`CudaArray`)."""


def default_address() -> str:
    """The URL a client dials when given none, as ``fprep_default_url``
    builds it: ``$FRAMEPREP_SOCKET`` when set and not empty, else the
    daemon's default listen URL, ``ipc://$XDG_RUNTIME_DIR/frameprep.sock``
    when XDG_RUNTIME_DIR is set and not empty, else
    ``ipc:///tmp/frameprep-$UID.sock``."""
    return str(_native.default_url())


def parse_info(text: str) -> dict[str, Any]:
    """Parses the daemon's INFO text ("key: value" lines) into a dict;
    values made only of digits become ints. A repeated key keeps its first
    value. The limits (the max_* keys the client checks) are read by the C
    library's ``fprep_limits_parse``, as the C client and the daemon read
    them: every limit is there, with the value that function gives one
    the daemon does not tell, or None (nothing checked) when the text
    lacks the limits."""
    info: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        info.setdefault(key, int(value) if value.isdigit() else value)
    info.update(_native.limits_parse(text))
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
    """The tensor's width in pixels."""
    out_height: int
    """The tensor's height in pixels."""
    resize: Resize
    """Letterbox or stretch (:data:`ResizeName`)."""
    order: ChannelOrder
    """The tensor's channel order (:data:`OrderName`)."""
    dtype: DType
    """The tensor's element type (:data:`DTypeName`)."""
    layout: Layout
    """NCHW or NHWC (:data:`LayoutName`)."""
    scale: float
    """Pixel scale: out = (pixel * scale - mean[c]) / std[c]."""
    mean: tuple[float, float, float]
    """Per-channel mean, in the tensor's channel order."""
    std: tuple[float, float, float]
    """Per-channel divisor, in the tensor's channel order."""
    pad: float
    """The letterbox border's value in pixel units, 0..255."""
    matrix: YuvMatrix = YuvMatrix.BT601
    """A YUV source's colour matrix (:data:`MatrixName`)."""
    yuv_range: YuvRange = YuvRange.LIMITED
    """A YUV source's range (:data:`YuvRangeName`)."""
    rounding: Rounding = Rounding.FLOAT
    """Float blend or OpenCV's rounding (:data:`RoundingName`)."""

    @classmethod
    def make(cls, size: Sequence[int] = (640, 640),
             resize: ResizeName = "letterbox", order: OrderName = "rgb",
             dtype: DTypeOption = "float32",
             layout: LayoutName = "nchw", scale: float = 1 / 255,
             mean: float | Sequence[float] = (0.0, 0.0, 0.0),
             std: float | Sequence[float] = (1.0, 1.0, 1.0),
             pad: float = 114, matrix: MatrixName = "bt601",
             yuv_range: YuvRangeName = "limited",
             rounding: RoundingName = "float") -> Options:
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
                   _pick(_YUV_RANGES, yuv_range, "yuv_range"),
                   _pick(_ROUNDINGS, rounding, "rounding"))

    @property
    def channels(self) -> int:
        """Tensor channels: 1 for gray, else 3."""
        return self.shape[1 if self.layout == Layout.NCHW else 3]

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The tensor shape, (1, C, H, W) or (1, H, W, C), as the C
        library's ``fprep_tensor_shape`` decides it."""
        return self._tensor()[0]

    @property
    def tensor_bytes(self) -> int:
        """Bytes of the tensor (``fprep_tensor_shape``)."""
        return self._tensor()[1]

    def _tensor(self) -> tuple[tuple[int, int, int, int], int]:
        t = _native.tensor_shape(self.out_width, self.out_height,
                                 int(self.order), int(self.dtype),
                                 int(self.layout))
        if t is None:
            raise errors.InvalidRequestError(
                f"size {self.out_width}x{self.out_height}: the tensor's "
                f"bytes do not fit in 64 bits")
        return t

    def request(self, kind: int = Kind.FRAME) -> Request:
        """A request with these options and no source yet."""
        return Request(kind=kind, out_width=self.out_width,
                       out_height=self.out_height, resize=self.resize,
                       channel_order=self.order, dtype=self.dtype,
                       layout=self.layout, pad_value=self.pad,
                       scale=self.scale, mean=self.mean, std=self.std,
                       yuv_matrix=self.matrix, yuv_range=self.yuv_range,
                       rounding=self.rounding)


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


def check_jpeg(data: Any) -> Source:
    """A JPEG file's bytes as a source (width and height 0: the daemon
    reads them from the JPEG header): bytes, bytearray, memoryview or a
    numpy uint8 array (N,) or (1, N) (a JPEG ring's slot; not copied when
    contiguous). Raises :class:`~frameprep.InvalidRequestError` for
    another type or shape, or an empty buffer."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or not (
                data.ndim == 1 or (data.ndim == 2 and data.shape[0] == 1)):
            raise errors.InvalidRequestError(
                f"a jpeg frame is a uint8 array (N,) or (1, N), not "
                f"{data.dtype} {data.shape}")
        arr = np.ascontiguousarray(data).reshape(-1)
    elif isinstance(data, (bytes, bytearray, memoryview)):
        arr = np.frombuffer(data, np.uint8)
    else:
        raise errors.InvalidRequestError(
            f"a jpeg frame is bytes, bytearray, memoryview or a uint8 "
            f"array, not {type(data).__name__}")
    if arr.size == 0:
        raise errors.InvalidRequestError("the jpeg frame is empty")
    return Source(PixelFormat.JPEG, 0, 0, 0, int(arr.size), arr,
                  address_of(arr))


def check_frame(frame: Any, format: FormatName | str | None = None) -> Source:
    """Checks a frame: a numpy uint8 array (H, W), (H, W, 1), (H, W, 3) or
    (H, W, 4). ``format`` (bgr8, rgb8, bgra8, rgba8, gray8) defaults to
    gray8, bgr8 or bgra8 by channel count. Rows may be strided (a crop of a
    bigger frame is sent with its row stride, without a copy); pixels must
    be packed, else the frame is copied. YUV formats (nv12, i420, yuyv)
    take the arrays OpenCV's cvtColor takes (see :func:`_check_yuv`);
    "jpeg" takes a JPEG file's bytes (see :func:`check_jpeg`).
    Raises :class:`~frameprep.InvalidRequestError`."""
    if format is not None and str(format).lower() == "jpeg":
        return check_jpeg(frame)
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
    return _native_address(a)


_native_address = _native.address


def _over(field: str, value: int, key: str, bound: int) -> str:
    return f"{field} {value} exceeds the daemon's {key} {bound}"


def _bound(limits: dict[str, Any], key: str) -> int | None:
    bound = limits.get(key)
    return bound if isinstance(bound, int) else None


class Plan:
    """Options made ready for sending: the C request they make (a
    :class:`frameprep._native.Request`, inline, or a ring's regions when
    ``req`` gives them), the tensor's shape, dtype and bytes, and the
    checks against the daemon's limits."""

    __slots__ = ("opts", "native", "tensor_bytes", "shape", "typestr",
                 "_gray", "_checked")

    def __init__(self, opts: Options, req: Request | None = None):
        self.opts = opts
        self.native = (opts.request() if req is None else req).native()
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
        if self._gray and src.format not in (PixelFormat.GRAY8,
                                             PixelFormat.JPEG):
            raise errors.InvalidRequestError(
                "order gray needs a gray8 source frame")


_plans: dict[tuple[Any, ...], Plan] = {}


def plan(size: Sequence[int], resize: ResizeName, order: OrderName,
         dtype: DTypeOption, layout: LayoutName, scale: float,
         mean: float | Sequence[float], std: float | Sequence[float],
         pad: float, matrix: MatrixName = "bt601",
         yuv_range: YuvRangeName = "limited",
         rounding: RoundingName = "float") -> Plan:
    """The :class:`Plan` of :meth:`Options.make`'s arguments (and its
    errors), kept for the next request with equal (hashable) arguments."""
    key = (size, resize, order, dtype, type(dtype), layout, scale, mean, std,
           pad, matrix, yuv_range, rounding)
    try:
        p = _plans.get(key)
    except TypeError:  # a list or an array among the options
        return Plan(Options.make(size, resize, order, dtype, layout, scale,
                                 mean, std, pad, matrix, yuv_range,
                                 rounding))
    if p is None:
        p = Plan(Options.make(size, resize, order, dtype, layout, scale, mean,
                              std, pad, matrix, yuv_range, rounding))
        if len(_plans) >= 64:
            _plans.clear()
        _plans[key] = p
    return p


@dataclasses.dataclass(frozen=True)
class Transform:
    """Where the source landed in the tensor.

    A tensor point (u, v) maps back to the source point
    ((u - pad_x) / scale_x, (v - pad_y) / scale_y).
    """

    scale_x: float
    """Tensor pixels per source pixel, horizontally."""
    scale_y: float
    """Tensor pixels per source pixel, vertically."""
    pad_x: float
    """The left padding, in tensor pixels."""
    pad_y: float
    """The top padding, in tensor pixels."""
    src_width: int
    """The source's width in pixels."""
    src_height: int
    """The source's height in pixels."""

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


@dataclasses.dataclass(frozen=True, slots=True)
class Timings:
    """The daemon's timings of one request, in microseconds: receipt to
    start of work (queue), preprocessing (compute), GPU copies and kernel
    (0 on the CPU backend), receipt to reply (total); a JPEG source's
    decode (decode, within compute; 0 for other sources)."""

    queue_us: int
    """Receipt to start of work."""
    compute_us: int
    """Preprocessing, decode included."""
    h2d_us: int
    """The frame's host-to-device copy (0 on the CPU backend)."""
    kernel_us: int
    """The preprocessing kernel (0 on the CPU backend)."""
    d2h_us: int
    """The tensor's device-to-host copy (0 on the CPU backend)."""
    total_us: int
    """Receipt to reply."""
    decode_us: int = 0
    """A JPEG source's decode, within compute (0 for other sources)."""


_new = object.__new__


TensorT = TypeVar("TensorT", default=npt.NDArray[Any])
"""The type of a result's tensor: a numpy array of the requested dtype
(``npt.NDArray[np.float32]`` for the default ``dtype="float32"``), or the
caller's ``out=``."""


class Result(Generic[TensorT]):
    """One preprocessed frame.

    ``tensor`` is a numpy array of shape (1, C, H, W) (NCHW) or
    (1, H, W, C) (NHWC), dtype float32, float16 or uint8, C = 3 (channels
    in the requested order) or 1 (gray). For inline requests it views the
    memory the reply owns (the reply message, or on ipc:// the client's
    stage, which the C library holds for it) and lives as long as the
    array; a ring's result is a :class:`~frameprep.RingResult`, whose
    tensor views the ring's slot, held until the result is released (copy
    the tensor to keep it longer). With ``out=`` it is ``out`` (numpy) or
    a view of it (CUDA). ``transform`` maps tensor boxes back to the
    source, ``timings`` are the daemon's, ``reply`` the whole reply header
    (:class:`~frameprep.protocol.Reply`), ``request_id`` the request's id.
    The attributes are read-only; ``transform``, ``timings`` and
    ``reply`` are made from the reply header when first read.
    """

    __slots__ = ("tensor", "request_id", "_res", "_src_width",
                 "_src_height", "_reply", "_transform", "_timings")

    tensor: TensorT
    """The tensor: (1, C, H, W) or (1, H, W, C), read-only."""
    request_id: int
    """The request's id."""
    _res: Any
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
            rep = Reply(**self._res.fields)
            object.__setattr__(self, "_reply", rep)
        return rep

    @property
    def transform(self) -> Transform:
        """Where the source landed in the tensor."""
        xf = self._transform
        if xf is None:
            f = self._res.places
            w, h = self._src_width, self._src_height
            if w == 0:  # a JPEG source: its decoded size
                w, h = self.reply.decoded_width, self.reply.decoded_height
            xf = Transform(f[0], f[1], f[2], f[3], w, h)
            object.__setattr__(self, "_transform", xf)
        return xf

    @property
    def timings(self) -> Timings:
        """The daemon's timings of the request."""
        tm = self._timings
        if tm is None:
            res = self._res
            tm = (_native.timings(res) if type(res) is _NativeResult else
                  Timings(*res.timings))
            object.__setattr__(self, "_timings", tm)
        return tm

    @property
    def decoded_size(self) -> tuple[int, int] | None:
        """A JPEG source's decoded (width, height) in pixels, from the
        reply (decoded_width/height); None for other sources."""
        rep = self.reply
        if rep.decoded_width == 0:
            return None
        return (rep.decoded_width, rep.decoded_height)

    def __repr__(self) -> str:
        t = self.tensor
        return (f"Result(tensor=<{getattr(t, 'dtype', '?')} "
                f"{getattr(t, 'shape', '?')}>, "
                f"request_id={self.request_id}, "
                f"transform={self.transform!r}, timings={self.timings!r})")


_set = object.__setattr__


def new_result(tensor: Any, res: Any, width: int, height: int,
               cls: type[Result[Any]] | None = None) -> Result[Any]:
    """A result of a successful FRAME or ECHO reply res (a
    :class:`frameprep._native.Result`) for a source of width x height
    (0 x 0 for a JPEG source: its decoded size, read from the reply)."""
    if width == 0:
        f = res.fields
        width, height = f["decoded_width"], f["decoded_height"]
    out: Result[Any] = _new(cls or Result)
    _set(out, "tensor", tensor)
    _set(out, "request_id", res.request_id)
    _set(out, "_res", res)
    _set(out, "_src_width", width)
    _set(out, "_src_height", height)
    _set(out, "_reply", None)
    _set(out, "_transform", None)
    _set(out, "_timings", None)
    return out


def checked(res: Any) -> Any:
    """res (a :class:`frameprep._native.Result`) when its status is 0;
    else raises the status's exception with the daemon's sentence."""
    status = res.status
    if status:
        raise errors.error_for_status(status, res.message)
    return res


def tensor_of(res: Any) -> np.ndarray[Any, Any]:
    """The reply's tensor: a writable numpy view of the memory res owns
    (res stays alive while the array does)."""
    if type(res) is _NativeResult:
        return _native.tensor(res)
    return np.asarray(res)


_NativeResult = _native.Result


_native.set_error_factory(errors.error_for_status)


@dataclasses.dataclass(frozen=True)
class ElementTransform:
    """Where one element of a batch or of a set of crops landed in its
    row of the tensor (the reply's transform record).

    Tensor point (u, v) of the element is source point
    (origin_x + (u - pad_x) / scale_x, origin_y + (v - pad_y) / scale_y).
    ``resized_w``/``resized_h`` are the resized box's (or frame's) size
    and ``pad_x``/``pad_y`` the left and top padding, in tensor pixels
    (whole pixels, except a ``warp_affine`` frame's of a batch, which may
    be fractional);
    ``scale_*`` tensor pixels per source pixel; ``origin_*`` the box's
    top-left corner in source pixels (0 for a batch frame). An affine
    element's record is all zero (its mapping is its matrix):
    ``affine`` is True then.
    """

    resized_w: int
    """The resized box's (or frame's) width in tensor pixels."""
    resized_h: int
    """The resized box's (or frame's) height in tensor pixels."""
    pad_x: float
    """The left padding in tensor pixels."""
    pad_y: float
    """The top padding in tensor pixels."""
    scale_x: float
    """Tensor pixels per source pixel, horizontally (0: affine)."""
    scale_y: float
    """Tensor pixels per source pixel, vertically (0: affine)."""
    origin_x: float
    """The box's left edge in source pixels (0 for a batch frame)."""
    origin_y: float
    """The box's top edge in source pixels (0 for a batch frame)."""

    @property
    def affine(self) -> bool:
        """True for an affine element (no scale: the record is zero)."""
        return self.scale_x == 0.0 or self.scale_y == 0.0

    def to_source(self, xyxy: Any) -> np.ndarray[Any, Any]:
        """Maps boxes (..., 4) as (x1, y1, x2, y2) in tensor pixels back to
        source pixels (not clipped: a crop may reach outside the frame).
        Returns a new float64 array (float32 input stays float32). Raises
        ``ValueError`` for an affine element or a last axis other than
        4."""
        if self.affine:
            raise ValueError("an affine element maps by its matrix")
        boxes = np.asarray(xyxy)
        if boxes.ndim < 1 or boxes.shape[-1] != 4:
            raise ValueError(f"boxes of shape {boxes.shape} are not (N, 4)")
        out = np.array(boxes, np.result_type(boxes.dtype, np.float32))
        out[..., 0::2] = (out[..., 0::2] - self.pad_x) / self.scale_x + \
            self.origin_x
        out[..., 1::2] = (out[..., 1::2] - self.pad_y) / self.scale_y + \
            self.origin_y
        return out


class BatchResult(Generic[TensorT]):
    """Several tensors stacked: crops of one frame
    (:meth:`Client.crops`), or a batch of frames
    (:meth:`Client.preprocess_batch`).

    ``tensor`` is (N, C, H, W) (NCHW) or (N, H, W, C) (NHWC), element k in
    row k: a numpy array viewing the reply's memory (or a new one), or
    the caller's ``out`` (numpy, or a CUDA tensor: ``TensorT`` is its
    type). ``transforms`` are the N elements' :class:`ElementTransform`
    (``transforms[k].to_source(boxes)`` maps detections in row k back to
    frame k's pixels, whatever its size). ``reply`` is the reply header
    (its transform fields zero) and ``request_id`` the request's id; for
    a batch sent as one request per frame, frame 0's. The attributes are
    read-only; ``transforms`` and ``reply`` are made from the reply when
    first read (64 transforms cost ~70 us, more than the rest of a
    crops call's Python).
    """

    __slots__ = ("tensor", "request_id", "_res", "_transforms", "_reply")

    tensor: TensorT
    """The (N, C, H, W) or (N, H, W, C) tensor, element k in row k."""
    request_id: int
    """The request's id (frame 0's for one request per frame)."""
    _res: Any
    _transforms: tuple[ElementTransform, ...] | None
    _reply: Reply | None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"BatchResult.{name} is read-only")

    @property
    def transforms(self) -> tuple[ElementTransform, ...]:
        """The N elements' transforms, element k's at k."""
        xfs = self._transforms
        if xfs is None:
            xfs = tuple(ElementTransform(*t)
                        for t in self._res.element_xfs())
            _set(self, "_transforms", xfs)
        return xfs

    @property
    def reply(self) -> Reply:
        """The reply header."""
        rep = self._reply
        if rep is None:
            rep = Reply(**self._res.fields)
            _set(self, "_reply", rep)
        return rep

    def __repr__(self) -> str:
        t = self.tensor
        return (f"BatchResult(tensor=<{getattr(t, 'dtype', '?')} "
                f"{getattr(t, 'shape', '?')}>, "
                f"request_id={self.request_id}, "
                f"{len(self.transforms)} transforms)")


def new_batch_result(res: Any, tensor: Any = None) -> BatchResult[Any]:
    """The :class:`BatchResult` of a successful ROIS or BATCH reply res (a
    :class:`frameprep._native.Result`); its tensor is ``tensor`` when given
    (the caller's copy), else a view of the reply."""
    out: BatchResult[Any] = _new(BatchResult)
    _set(out, "tensor", tensor_of(res) if tensor is None else tensor)
    _set(out, "request_id", res.request_id)
    _set(out, "_res", res)
    _set(out, "_transforms", None)
    _set(out, "_reply", None)
    return out


def element_transform(xf: Transform) -> ElementTransform:
    """The :class:`ElementTransform` of a whole frame's
    :class:`Transform` (a batch frame sent in a request of its own)."""
    return ElementTransform(round(xf.src_width * xf.scale_x),
                            round(xf.src_height * xf.scale_y), xf.pad_x,
                            xf.pad_y, xf.scale_x, xf.scale_y, 0.0, 0.0)


def batch_of(tensor: Any, results: Sequence[Result]) -> BatchResult[Any]:
    """The :class:`BatchResult` of a batch sent as one request per frame:
    tensor, and frame k's transform from results[k] (frame 0's reply and
    request id)."""
    out: BatchResult[Any] = _new(BatchResult)
    _set(out, "tensor", tensor)
    _set(out, "request_id", results[0].request_id)
    _set(out, "_res", results[0]._res)
    _set(out, "_transforms",
         tuple(element_transform(r.transform) for r in results))
    _set(out, "_reply", None)
    return out


BoxSpec = Union[Sequence[float], dict[str, Sequence[float]]]
ELEM_BOX, ELEM_AFFINE, ELEM_FRAME = 1, 2, 3


def elements_of(boxes: Any) -> list[tuple[int, int, float, float, float,
                                          float, float, float, int]]:
    """The element records (``fprep_element``) of crops: boxes is an
    (N, 4) array-like of x, y, w, h (source pixels, floats), or a sequence
    whose items are each such a box or ``{"affine": [m00, m01, m02, m10,
    m11, m12]}`` (a 2x3 matrix mapping tensor pixels to source pixels).
    Raises :class:`~frameprep.InvalidRequestError` for an item of another
    shape (naming its index) or no items. Values (w, h > 0, finite, within
    the protocol's bound) are checked by the C library and the daemon,
    whose error names the element's index."""
    if isinstance(boxes, np.ndarray) and boxes.dtype != object:
        arr = np.asarray(boxes, np.float64)
        if arr.ndim != 2 or arr.shape[1] != 4:
            raise errors.InvalidRequestError(
                f"boxes of shape {arr.shape} are not (N, 4)")
        items: Sequence[Any] = arr.tolist()
    else:
        items = list(boxes)
    if not items:
        raise errors.InvalidRequestError("no boxes")
    out = []
    for k, item in enumerate(items):
        if isinstance(item, dict):
            m = item.get("affine")
            if set(item) != {"affine"} or m is None or len(m) != 6:
                raise errors.InvalidRequestError(
                    f"element {k}: {item!r} is not {{'affine': 6 floats}}")
            v = [float(x) for x in m]
            out.append((ELEM_AFFINE, 0, v[0], v[1], v[2], v[3], v[4], v[5],
                        0))
            continue
        try:
            x, y, w, h = (float(t) for t in item)
        except (TypeError, ValueError):
            raise errors.InvalidRequestError(
                f"element {k}: {item!r} is not a box (x, y, w, h) or "
                f"{{'affine': 6 floats}}") from None
        out.append((ELEM_BOX, 0, x, y, w, h, 0.0, 0.0, 0))
    return out


def check_elements(plan: Plan, n: int, limits: dict[str, Any],
                   span: int = 0) -> None:
    """Raises :class:`~frameprep.LimitExceededError` for n elements beyond
    the daemon's max_elements (0: it takes none), or whose tensor or
    source bytes (span: the frames the elements read) exceed
    max_batch_bytes (INFO)."""
    most = _bound(limits, "max_elements")
    if most is not None and n > most:
        raise errors.LimitExceededError(
            _over("elements", n, "max_elements", most))
    most = _bound(limits, "max_batch_bytes")
    if most is not None and n * plan.tensor_bytes > most:
        raise errors.LimitExceededError(
            _over("batch tensor bytes", n * plan.tensor_bytes,
                  "max_batch_bytes", most))
    if most is not None and span > most:
        raise errors.LimitExceededError(
            _over("source bytes", span, "max_batch_bytes", most))
