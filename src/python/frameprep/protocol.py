"""The frameprep wire protocol, version 1: its constants and enums, and
the request and reply headers as dataclasses.

``include/frameprep/protocol.h`` is the reference, and the codec is the C
library's (``fprep_request_encode``, ``fprep_reply_decode``, ...), reached
through :mod:`frameprep._native`: :meth:`Request.encode`,
:meth:`Request.decode`, :meth:`Reply.encode` and :meth:`Reply.decode` are
its Python faces, field for field. The enums mirror protocol.h (the tests
check them against the C library's constants).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from . import _native
from .errors import ProtocolError, VersionMismatchError

__all__ = ["ProtocolError", "VersionMismatchError"]

PROTOCOL_VERSION = 1
REQUEST_MAGIC = 0x51525046  # "FPRQ" as little-endian bytes
REPLY_MAGIC = 0x50525046  # "FPRP" as little-endian bytes
REQUEST_HEADER_SIZE = 128
REPLY_HEADER_SIZE = 256
MESSAGE_SIZE = 144
REGION_NAME_MAX = 63  # bytes of a region name, '/' included
REPLY_F_INPUT_RELEASED = 0x1
# Bit 7 of the request's output_loc byte: the daemon also writes the reply
# header into the output region, in the last REPLY_HEADER_SIZE bytes of
# out_capacity (protocol.h, "The reply in shared memory"); decoded into
# Request.shm_reply.
LOC_F_SHM_REPLY = 0x80


class Kind(enum.IntEnum):
    """What a request asks for (``enum fprep_kind``)."""

    FRAME = 1
    INFO = 2
    ECHO = 3
    REGISTER = 4
    UNREGISTER = 5
    REGISTER_CUDA = 6
    DOORBELL = 7
    ROIS = 8
    BATCH = 9


class PixelFormat(enum.IntEnum):
    """Layout of the 8-bit source frame (``enum fprep_pixel_format``):
    interleaved pixels, the YUV formats NV12, I420 (4:2:0 planar) and
    YUYV (4:2:2 packed), or JPEG (a JPEG file's bytes, decoded by the
    daemon), described in protocol.h."""

    BGR8 = 1
    RGB8 = 2
    BGRA8 = 3
    RGBA8 = 4
    GRAY8 = 5
    NV12 = 6
    I420 = 7
    YUYV = 8
    JPEG = 9

    @property
    def channels(self) -> int:
        """Bytes per pixel of the rows at src_stride: 3, 4 or 1; for NV12
        and I420 those of the Y plane (1), for YUYV 2, for JPEG (whose
        stride is ignored) 1."""
        return {1: 3, 2: 3, 3: 4, 4: 4, 5: 1, 6: 1, 7: 1, 8: 2,
                9: 1}[int(self)]

    @property
    def is_yuv(self) -> bool:
        """True for NV12, I420 and YUYV."""
        return 6 <= int(self) <= 8


class YuvMatrix(enum.IntEnum):
    """Colour matrix of a YUV source (``enum fprep_yuv_matrix``); 0 on the
    wire means BT601."""

    BT601 = 1
    BT709 = 2
    BT2020 = 3


class YuvRange(enum.IntEnum):
    """Quantisation range of a YUV source (``enum fprep_yuv_range``); 0 on
    the wire means LIMITED."""

    LIMITED = 1
    FULL = 2


class Resize(enum.IntEnum):
    """How the source is fitted to the tensor (``enum fprep_resize``)."""

    LETTERBOX = 1
    STRETCH = 2


class Rounding(enum.IntEnum):
    """How the resized pixel is formed (``enum fprep_rounding``, bits 4-7
    of the wire's resize byte): FLOAT keeps the bilinear blend in float
    (within 1 LSB of OpenCV); OPENCV rounds it to uint8 as
    cv2.resize(INTER_LINEAR) does, so the tensor equals OpenCV's pipeline
    bit for bit (protocol.h describes both)."""

    FLOAT = 0
    OPENCV = 1


class ChannelOrder(enum.IntEnum):
    """Channel order of the tensor (``enum fprep_channel_order``)."""

    RGB = 1
    BGR = 2
    GRAY = 3


class DType(enum.IntEnum):
    """Element type of the tensor (``enum fprep_dtype``)."""

    F32 = 1
    F16 = 2
    U8 = 3

    @property
    def numpy(self) -> str:
        """The numpy dtype string ("<f4", "<f2" or "u1")."""
        return {1: "<f4", 2: "<f2", 3: "u1"}[int(self)]


class Layout(enum.IntEnum):
    """Tensor memory layout, N always 1 (``enum fprep_layout``)."""

    NCHW = 1
    NHWC = 2


class Location(enum.IntEnum):
    """Where a frame or tensor lives (``enum fprep_location``)."""

    INLINE = 0
    SHM = 1
    CUDA = 2


CUDA_HANDLE_SIZE = 64  # bytes of a cudaIpcMemHandle_t
CUDA_UUID_SIZE = 16  # bytes of a CUDA device UUID
# The fields of the register kinds' requests (fprep_register_request);
# the other kinds use the rest (fprep_request).
_REGISTER_FIELDS = ("version", "kind", "request_id", "region_size",
                    "region_id", "doorbell_entries", "doorbell_offset",
                    "region_name", "cuda_offset", "cuda_handle",
                    "cuda_uuid")
_REGISTER_KINDS = (4, 5, 6, 7)

_DTYPE_BYTES: dict[int, int] = {DType.F32: 4, DType.F16: 2, DType.U8: 1}


@dataclasses.dataclass
class Request:
    """A request header (``struct fprep_request``), field for field.

    Sizes are in pixels or bytes, offsets in bytes, floats are binary32 on
    the wire. ``region_size`` and ``region_name`` are used by REGISTER,
    ``region_size``, ``cuda_offset``, ``cuda_handle`` (64 bytes) and
    ``cuda_uuid`` (16 bytes) by REGISTER_CUDA, ``region_id`` by
    UNREGISTER, ``region_id``, ``doorbell_entries`` and ``doorbell_offset``
    by DOORBELL; FRAME and ECHO use the rest. The defaults
    are those of ``fprep_request_init``: LETTERBOX to 640x640, RGB, F32,
    NCHW, pad 114, scale 1/255, mean 0, std 1, inline input and output,
    rounding FLOAT (``rounding`` is encoded in bits 4-7 of byte 40, the
    resize byte).
    """

    kind: int = Kind.FRAME
    request_id: int = 0
    version: int = PROTOCOL_VERSION
    src_format: int = PixelFormat.BGR8
    yuv_matrix: int = 0
    yuv_range: int = 0
    src_width: int = 0
    src_height: int = 0
    src_stride: int = 0
    out_width: int = 640
    out_height: int = 640
    resize: int = Resize.LETTERBOX
    channel_order: int = ChannelOrder.RGB
    dtype: int = DType.F32
    layout: int = Layout.NCHW
    pad_value: float = 114.0
    scale: float = 1.0 / 255.0
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    input_loc: int = Location.INLINE
    output_loc: int = Location.INLINE
    in_region: int = 0
    out_region: int = 0
    in_offset: int = 0
    out_offset: int = 0
    out_capacity: int = 0
    input_size: int = 0
    uv_stride: int = 0
    u_offset: int = 0
    v_offset: int = 0
    region_size: int = 0
    region_id: int = 0
    region_name: str = ""
    cuda_offset: int = 0
    cuda_handle: bytes = bytes(CUDA_HANDLE_SIZE)
    cuda_uuid: bytes = bytes(CUDA_UUID_SIZE)
    shm_reply: bool = False
    doorbell_entries: int = 0
    doorbell_offset: int = 0
    rounding: int = Rounding.FLOAT

    def _fields(self) -> dict[str, Any]:
        """The fields of this request's C struct, by name."""
        d = dataclasses.asdict(self)
        if self.kind in _REGISTER_KINDS:
            return {k: d[k] for k in _REGISTER_FIELDS}
        return {k: v for k, v in d.items() if k not in _REGISTER_FIELDS or
                k in ("version", "kind", "request_id")}

    def native(self) -> Any:
        """This request as the C library's struct (a
        :class:`frameprep._native.Request`)."""
        return _native.Request(self._fields())

    def encode(self) -> bytes:
        """Returns the 128-byte wire header (``fprep_request_encode``, or
        ``fprep_register_request_encode`` for the register kinds). Raises
        OverflowError or ValueError for a field that does not fit."""
        return bytes(self.native().encode())

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview) -> Request:
        """Decodes and validates a whole request message (header plus
        payload) with ``fprep_request_decode``, without the daemon's
        limits. A header alone (128 bytes) of an inline FRAME or ECHO is
        read as if its payload followed. Raises :class:`ProtocolError`,
        :class:`VersionMismatchError` or the error of a refused field."""
        data = bytes(buf)
        if len(data) == REQUEST_HEADER_SIZE and data[76] == 0 and \
                int.from_bytes(data[6:8], "little") in (Kind.FRAME,
                                                        Kind.ECHO):
            data += bytes(int.from_bytes(data[112:120], "little"))
        return cls(**_native.decode_request(data))


@dataclasses.dataclass
class Reply:
    """A reply header (``struct fprep_reply_header``), field for field.

    ``shape`` is (1, C, H, W) for NCHW and (1, H, W, C) for NHWC, ``ndim``
    of its entries used. ``scale_*`` map source pixels to tensor pixels and
    ``pad_*`` are the left/top padding in tensor pixels. Times ``t_*_us``
    are microseconds measured by the daemon. ``message`` is the daemon's
    sentence (on error it names the field, the value and the limit).
    ``decoded_width``/``decoded_height`` and ``t_decode_us``: a JPEG
    source's decoded size and decode time (0 for other sources).
    """

    kind: int = 0
    request_id: int = 0
    version: int = PROTOCOL_VERSION
    status: int = 0
    dtype: int = 0
    layout: int = 0
    ndim: int = 0
    output_loc: int = Location.INLINE
    shape: tuple[int, int, int, int] = (0, 0, 0, 0)
    scale_x: float = 0.0
    scale_y: float = 0.0
    pad_x: float = 0.0
    pad_y: float = 0.0
    t_queue_us: int = 0
    t_compute_us: int = 0
    t_h2d_us: int = 0
    t_kernel_us: int = 0
    t_d2h_us: int = 0
    t_total_us: int = 0
    payload_size: int = 0
    tensor_size: int = 0
    region_id: int = 0
    flags: int = 0
    message: str = ""
    decoded_width: int = 0
    decoded_height: int = 0
    t_decode_us: int = 0

    def encode(self) -> bytes:
        """Returns the 256-byte wire header (``fprep_reply_encode``)."""
        return bytes(_native.encode_reply(dataclasses.asdict(self)))

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview,
               length: int | None = None) -> Reply:
        """Decodes a whole reply message with ``fprep_reply_decode``
        (length: of the whole message when buf is its header alone, the
        payload read as zeros). Raises :class:`ProtocolError` or
        :class:`VersionMismatchError`."""
        data = bytes(buf)
        if length is not None and length > len(data):
            data += bytes(length - len(data))
        return cls(**_native.decode_reply(data))


def dtype_bytes(dtype: int) -> int:
    """Bytes per tensor element of a :class:`DType` value (0 if unknown)."""
    return _DTYPE_BYTES.get(dtype, 0)
