"""Wire codec of the frameprep protocol, version 1.

Written from ``include/frameprep/protocol.h``, which is the reference: every
integer is little-endian, every float IEEE-754 binary32 little-endian,
reserved bytes are written as zero. A request starts with a 128-byte header
(:class:`Request`), a reply with a 256-byte header (:class:`Reply`); a
payload (frame, tensor or INFO text) may follow either.

The codec encodes and decodes headers only; it checks what it needs to read
a message safely (length, magic, version, and for replies the consistency
rules of ``fprep_reply_decode``) and leaves the validation of request fields
to the daemon, whose answer names the field, the value and the limit.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from typing import Any

from .errors import ProtocolError, VersionMismatchError

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


_REQ_FRAME = struct.Struct("<IHHQHBBIIIIIBBBBff3f3fBBHIIQQQQII")
_REQ_REGISTER = struct.Struct("<IHHQQII64s")
_REQ_UNREGISTER = struct.Struct("<IHHQI")
_REQ_REGISTER_CUDA = struct.Struct("<IHHQQQ64s16s16x")
_REQ_DOORBELL = struct.Struct("<IHHQIIQ")
assert _REQ_REGISTER_CUDA.size == 128
CUDA_HANDLE_SIZE = 64  # bytes of a cudaIpcMemHandle_t
CUDA_UUID_SIZE = 16  # bytes of a CUDA device UUID
_REQ_COMMON = struct.Struct("<IHHQ")
_REPLY = struct.Struct("<IHHQIBBBB4I4f6IQQII144sHHI")
assert _REQ_FRAME.size == REQUEST_HEADER_SIZE
assert _REPLY.size == REPLY_HEADER_SIZE
# The FRAME fields that change from request to request: request_id and
# src_format (at byte 8), the source size and stride (at 20), uv_stride (at
# 78), in_offset to input_size, u_offset and v_offset.
_REQ_ID_FMT = struct.Struct("<QH")
_REQ_SIZE = struct.Struct("<III")
_REQ_UV_STRIDE = struct.Struct("<H")
_UV_STRIDE_AT = 78
_REQ_PLACES = struct.Struct("<QQQQII")
_PLACES_AT = struct.calcsize("<IHHQHBBIIIIIBBBBff3f3fBBHII")
assert _PLACES_AT + _REQ_PLACES.size == REQUEST_HEADER_SIZE
_REQ_ID = struct.Struct("<Q")

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
    NCHW, pad 114, scale 1/255, mean 0, std 1, inline input and output.
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

    def encode(self) -> bytes:
        """Returns the 128-byte wire header, as ``fprep_request_encode``
        writes it (no validation). Raises ``struct.error`` for a field that
        does not fit its wire type."""
        if self.kind == Kind.REGISTER:
            name = self.region_name.encode("ascii")[:REGION_NAME_MAX]
            head = _REQ_REGISTER.pack(REQUEST_MAGIC, self.version, self.kind,
                                      self.request_id, self.region_size,
                                      len(name), 0, name)
            return head.ljust(REQUEST_HEADER_SIZE, b"\0")
        if self.kind == Kind.REGISTER_CUDA:
            if (len(self.cuda_handle) != CUDA_HANDLE_SIZE or
                    len(self.cuda_uuid) != CUDA_UUID_SIZE):
                raise struct.error("cuda_handle must be 64 bytes and "
                                   "cuda_uuid 16")
            return _REQ_REGISTER_CUDA.pack(
                REQUEST_MAGIC, self.version, self.kind, self.request_id,
                self.region_size, self.cuda_offset, bytes(self.cuda_handle),
                bytes(self.cuda_uuid))
        if self.kind == Kind.UNREGISTER:
            head = _REQ_UNREGISTER.pack(REQUEST_MAGIC, self.version,
                                        self.kind, self.request_id,
                                        self.region_id)
            return head.ljust(REQUEST_HEADER_SIZE, b"\0")
        if self.kind == Kind.DOORBELL:
            head = _REQ_DOORBELL.pack(REQUEST_MAGIC, self.version,
                                      self.kind, self.request_id,
                                      self.region_id, self.doorbell_entries,
                                      self.doorbell_offset)
            return head.ljust(REQUEST_HEADER_SIZE, b"\0")
        return _REQ_FRAME.pack(
            REQUEST_MAGIC, self.version, self.kind, self.request_id,
            self.src_format, self.yuv_matrix, self.yuv_range,
            self.src_width, self.src_height,
            self.src_stride, self.out_width, self.out_height, self.resize,
            self.channel_order, self.dtype, self.layout, self.pad_value,
            self.scale, *self.mean, *self.std, self.input_loc,
            self.output_loc | (LOC_F_SHM_REPLY if self.shm_reply else 0),
            self.uv_stride, self.in_region,
            self.out_region, self.in_offset, self.out_offset,
            self.out_capacity, self.input_size, self.u_offset,
            self.v_offset)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview) -> Request:
        """Parses the header at the start of buf (a payload may follow).
        Reads the fields of the request's kind: the region fields for
        REGISTER, REGISTER_CUDA, UNREGISTER and DOORBELL, else the FRAME
        fields (which INFO ignores
        but carries, so that it re-encodes byte for byte). Raises :class:`ProtocolError`
        (short buffer, wrong magic, unterminated region name) or
        :class:`VersionMismatchError`."""
        if len(buf) < REQUEST_HEADER_SIZE:
            raise ProtocolError(f"request of {len(buf)} bytes is shorter "
                                f"than the {REQUEST_HEADER_SIZE}-byte header")
        magic, version, kind, request_id = _REQ_COMMON.unpack_from(buf, 0)
        if magic != REQUEST_MAGIC:
            raise ProtocolError(f"bad request magic {magic:#010x}")
        if version != PROTOCOL_VERSION:
            raise VersionMismatchError(f"request version {version}, "
                                       f"expected {PROTOCOL_VERSION}")
        req = cls(kind=kind, request_id=request_id, version=version)
        if kind == Kind.REGISTER:
            (_, _, _, _, req.region_size, name_len, _,
             name) = _REQ_REGISTER.unpack_from(buf, 0)
            if name_len > REGION_NAME_MAX or b"\0" in name[:name_len]:
                raise ProtocolError(f"region name_len {name_len} is not "
                                    f"the name's length")
            req.region_name = name[:name_len].decode("ascii", "replace")
            return req
        if kind == Kind.UNREGISTER:
            req.region_id = _REQ_UNREGISTER.unpack_from(buf, 0)[4]
            return req
        if kind == Kind.DOORBELL:
            (req.region_id, req.doorbell_entries,
             req.doorbell_offset) = _REQ_DOORBELL.unpack_from(buf, 0)[4:]
            return req
        if kind == Kind.REGISTER_CUDA:
            (_, _, _, _, req.region_size, req.cuda_offset, req.cuda_handle,
             req.cuda_uuid) = _REQ_REGISTER_CUDA.unpack_from(buf, 0)
            return req
        f = _REQ_FRAME.unpack_from(buf, 0)
        (req.src_format, req.yuv_matrix, req.yuv_range, req.src_width,
         req.src_height, req.src_stride, req.out_width, req.out_height,
         req.resize, req.channel_order, req.dtype, req.layout,
         req.pad_value, req.scale) = f[4:18]
        req.mean = tuple(f[18:21])
        req.std = tuple(f[21:24])
        (req.input_loc, req.output_loc, req.uv_stride, req.in_region,
         req.out_region, req.in_offset, req.out_offset, req.out_capacity,
         req.input_size, req.u_offset, req.v_offset) = f[24:35]
        req.shm_reply = bool(req.output_loc & LOC_F_SHM_REPLY)
        req.output_loc &= ~LOC_F_SHM_REPLY
        return req


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
        """Returns the 256-byte wire header, as ``fprep_reply_encode``
        writes it: the message is cut to 143 bytes of UTF-8 and padded with
        zeros."""
        msg = self.message.encode("utf-8")[:MESSAGE_SIZE - 1]
        return _REPLY.pack(
            REPLY_MAGIC, self.version, self.kind, self.request_id,
            self.status, self.dtype, self.layout, self.ndim, self.output_loc,
            *self.shape, self.scale_x, self.scale_y, self.pad_x, self.pad_y,
            self.t_queue_us, self.t_compute_us, self.t_h2d_us,
            self.t_kernel_us, self.t_d2h_us, self.t_total_us,
            self.payload_size, self.tensor_size, self.region_id, self.flags,
            msg, self.decoded_width, self.decoded_height, self.t_decode_us)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview,
               length: int | None = None) -> Reply:
        """Parses a reply message of ``length`` bytes (default: len(buf)),
        with the checks of ``fprep_reply_decode``: magic, version,
        payload_size == length - 256, message NUL-terminated, ndim <= 4,
        and for a successful FRAME or ECHO reply ndim 4, known dtype and
        layout, shape product * element size == tensor_size, and
        payload_size == tensor_size for inline output. Raises
        :class:`ProtocolError` or :class:`VersionMismatchError`."""
        n = len(buf) if length is None else length
        if n < REPLY_HEADER_SIZE:
            raise ProtocolError(f"reply of {n} bytes is shorter than the "
                                f"{REPLY_HEADER_SIZE}-byte header")
        f = _REPLY.unpack_from(buf, 0)
        if f[0] != REPLY_MAGIC:
            raise ProtocolError(f"bad reply magic {f[0]:#010x}")
        if f[1] != PROTOCOL_VERSION:
            raise VersionMismatchError(f"reply version {f[1]}, "
                                       f"expected {PROTOCOL_VERSION}")
        if f[23] != n - REPLY_HEADER_SIZE:
            raise ProtocolError(f"reply payload_size {f[23]} but "
                                f"{n - REPLY_HEADER_SIZE} bytes follow")
        raw = f[27]
        end = raw.find(b"\0")
        if end < 0:
            raise ProtocolError("reply message is not NUL-terminated")
        # Positional, in the order of the fields above.
        make: Any = cls
        rep: Reply = make(f[2], f[3], f[1], *f[4:9], f[9:13], *f[13:27],
                          raw[:end].decode("utf-8", "replace") if end else "",
                          *f[28:31])
        if f[7] > 4:
            raise ProtocolError(f"reply ndim {f[7]} > 4")
        if f[4] == 0 and (f[2] == 1 or f[2] == 3):
            # The checks of _check_tensor, on the unpacked fields.
            size = _DTYPE_BYTES.get(f[5], 0) * f[9] * f[10] * f[11] * f[12]
            if (size == 0 or size != f[24] or f[7] != 4 or
                    not 1 <= f[6] <= 2 or (f[8] == 0 and f[23] != f[24])):
                rep._check_tensor()
        return rep

    def _check_tensor(self) -> None:
        size = _DTYPE_BYTES.get(self.dtype, 0)
        if (size == 0 or self.ndim != 4 or
                not 1 <= self.layout <= 2):  # NCHW, NHWC
            raise ProtocolError(f"reply tensor has ndim {self.ndim}, dtype "
                                f"{self.dtype}, layout {self.layout}")
        c, h, w, d = self.shape
        size *= c * h * w * d
        if size != self.tensor_size:
            raise ProtocolError(f"reply shape {self.shape} does not make "
                                f"tensor_size {self.tensor_size}")
        if (self.output_loc == 0 and  # inline
                self.payload_size != self.tensor_size):
            raise ProtocolError(f"reply payload_size {self.payload_size} "
                                f"!= tensor_size {self.tensor_size}")


def dtype_bytes(dtype: int) -> int:
    """Bytes per tensor element of a :class:`DType` value (0 if unknown)."""
    return _DTYPE_BYTES.get(dtype, 0)


class FrameHeader:
    """The wire header of FRAME (or ECHO) requests that share their
    options and locations: encoded once from a :class:`Request`, then
    stamped with each request's id, source and offsets."""

    __slots__ = ("_head",)

    def __init__(self, req: Request):
        self._head = req.encode()

    def stamp(self, request_id: int, src_format: int, src_width: int,
              src_height: int, src_stride: int, in_offset: int,
              out_offset: int, out_capacity: int, input_size: int,
              planes: tuple[int, int, int] = (0, 0, 0)) -> bytes:
        """The 128-byte header with these fields, byte for byte what
        :meth:`Request.encode` writes for them; planes is (uv_stride,
        u_offset, v_offset) of a YUV source. Raises ``struct.error`` for a
        field that does not fit its wire type."""
        return bytes(self.buffer(request_id, src_format, src_width,
                                 src_height, src_stride, in_offset,
                                 out_offset, out_capacity, input_size,
                                 planes))

    def buffer(self, request_id: int, src_format: int, src_width: int,
               src_height: int, src_stride: int, in_offset: int,
               out_offset: int, out_capacity: int, input_size: int,
               planes: tuple[int, int, int] = (0, 0, 0)) -> bytearray:
        """:meth:`stamp`'s header as a new bytearray, for requests that
        differ only in their id (see :func:`set_request_id`)."""
        head = bytearray(self._head)
        _REQ_ID_FMT.pack_into(head, 8, request_id, src_format)
        _REQ_SIZE.pack_into(head, 20, src_width, src_height, src_stride)
        _REQ_UV_STRIDE.pack_into(head, _UV_STRIDE_AT, planes[0])
        _REQ_PLACES.pack_into(head, _PLACES_AT, in_offset, out_offset,
                              out_capacity, input_size, planes[1], planes[2])
        return head


def set_request_id(head: bytearray, request_id: int) -> None:
    """Writes request_id into a request header in place."""
    _REQ_ID.pack_into(head, 8, request_id)
