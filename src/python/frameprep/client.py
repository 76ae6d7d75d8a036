"""Blocking and asyncio clients of frameprepd.

The design is simple: the C library's client (libframeprep, through
:mod:`frameprep._native`) does the work, one connection per client, any
number of threads (or asyncio tasks) on it. A frame goes to the daemon as
it lies in the caller's array (on ipc:// it is staged through the client's
shared memory, on tcp:// copied once into the message) and the tensor is a
numpy view of the memory the reply owns, not a copy. What stays here: the
options, the frame checks, the in-flight limit, exceptions and asyncio.
"""

from __future__ import annotations

import asyncio
import os
import contextlib
import functools
import threading
from typing import TYPE_CHECKING, Any, Sequence, TypeVar, overload

import numpy as np
import numpy.typing as npt

from . import _core, _native, errors, video
from ._core import (DTypeOption, FormatName, LayoutName, MatrixName,
                    OrderName, ResizeName, RoundingName, YuvRangeName)
from .protocol import Kind, Location, PixelFormat, Reply, Request

if TYPE_CHECKING:
    from .ring import AsyncRing, Ring

_S = TypeVar("_S", bound=np.generic)

DEFAULT_TIMEOUT = 30.0
"""A :class:`Client`'s reply timeout when none is given, in seconds."""
_INFO = Request(kind=Kind.INFO).native()


def _is_cuda(obj: Any) -> bool:
    """Whether obj is a CUDA array (frameprep.cuda; nothing imported)."""
    from .cuda import is_cuda
    return is_cuda(obj)


# Forks since the module was imported, counted in each child: a socket
# opened under another count is the parent's.
_forks = 0


def _forked() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_forked)


class _Socket:
    """The C client (a :class:`frameprep._native.Client`), its address
    and timeout, the daemon's INFO and the cap on requests in flight.

    The daemon's limits are asked for here, at connect, so that the cap
    applies from the first request: a burst on a fresh client (asyncio's
    gather, many threads) never has more requests in flight than the
    daemon takes on one connection (it closes a connection past that)."""

    def __init__(self, address: str | None, timeout: float,
                 trust_owner: str | int | None = None):
        if not timeout > 0:
            raise ValueError(f"timeout {timeout!r} must be > 0 seconds")
        self.address = address or _core.default_address()
        if "," in self.address:
            raise errors.InvalidRequestError(
                f"{self.address!r}: the Python client dials one daemon, "
                f"not a list")
        if not self.address.startswith(("ipc://", "tcp://")):
            raise errors.InvalidRequestError(
                f"{self.address!r} is not an ipc:// or tcp:// URL")
        self.timeout = float(timeout)
        ms = max(1, int(self.timeout * 1000))
        trust = None if trust_owner is None else str(trust_owner)
        # Dials, after checking the socket's owner and then the peer's
        # (fprep_client_open_trusting).
        try:
            self.native = _native.Client(self.address, ms, trust)
        except errors.TransportError as exc:
            if "no socket at" in exc.message and "running" not in \
                    exc.message:
                raise errors.TransportError(
                    f"{exc.message} (is frameprepd running?)") from None
            raise
        self._limits: dict[str, Any] | None = None
        # The daemon answers EBUSY past max_inflight_per_conn requests in
        # flight on one connection: requests past it wait here instead,
        # for one of the gate's tokens (a ring's requests take theirs in C).
        self.gate: _native.Gate | None = None
        self.agate: asyncio.Semaphore | None = None
        self._closed = False
        self._forks = _forks
        try:
            res = _core.checked(self.native.info())
        except BaseException:
            self.native.close()
            raise
        self.set_limits(
            _core.parse_info(res.payload().decode("utf-8", "replace")))

    def check_fork(self) -> None:
        """Raises :class:`~frameprep.ForkedError` in a child made by fork
        (this socket is the parent's), before any of its locks or tokens
        is touched."""
        if self._forks != _forks:
            raise errors.ForkedError(
                f"{self.address}: this client was opened before the "
                f"process forked (it is the parent's): a child process "
                f"must open a client of its own, e.g. frameprep.Client() "
                f"in the worker")

    def set_limits(self, info: dict[str, Any]) -> None:
        """Keeps the daemon's INFO and, the first time, bounds the requests
        in flight on this connection to its max_inflight_per_conn."""
        self._limits = info
        cap = info.get("max_inflight_per_conn")
        if self.gate is None and isinstance(cap, int) and cap > 0:
            self.agate = asyncio.Semaphore(cap)
            self.gate = _native.Gate(cap)

    def gate_take(self) -> bool:
        """Takes one token of the cap on requests in flight, waiting up to
        the timeout; False when there is no cap (yet). Give it back with
        :meth:`gate_give`."""
        self.check_fork()
        gate = self.gate
        if gate is None:
            return False
        if not gate.take(self.timeout):
            raise errors.RequestTimeoutError(
                f"{self.address}: no room for another request in "
                f"flight within {self.timeout:g} s")
        return True

    def gate_give(self) -> None:
        """Gives back a token that :meth:`gate_take` took."""
        gate = self.gate
        assert gate is not None
        gate.give()

    def call(self, fn: Any, *args: Any) -> Any:
        """fn(*args) (a blocking call of the C client) within the cap on
        requests in flight."""
        took = self.gate_take()
        try:
            return fn(*args)
        finally:
            if took:
                self.gate_give()

    def close(self) -> None:
        self._closed = True
        self.native.close()  # in a forked child: forgets the parent's

    @property
    def closed(self) -> bool:
        return self._closed


def _request(s: _Socket, req: Request, payload: Any = b"") -> tuple[Any, Any]:
    """:meth:`Client.request` on s: blocks, within the cap on requests in
    flight."""
    res = _core.checked(s.call(s.native.request, req.native(),
                               _payload(payload)))
    rep = Reply(**res.fields)
    req.request_id = rep.request_id
    return res, rep


def _payload(payload: Any) -> Any:
    """payload as _native.Client.request takes it: bytes or a numpy array
    as they are, None for an empty one, any other buffer (bytearray,
    memoryview) as a uint8 array over it."""
    if isinstance(payload, np.ndarray):
        return payload if payload.size else None
    if isinstance(payload, bytes):
        return payload or None
    return np.frombuffer(payload, np.uint8) if len(payload) else None


def _numpy_out(out: np.ndarray[Any, Any], shape: Sequence[int],
               typestr: str) -> np.ndarray[Any, Any]:
    """out as an array of shape (a leading 1 may be left out or added),
    after checking its dtype and that it is writable; raises
    :class:`~frameprep.InvalidRequestError`."""
    shape = tuple(shape)
    if out.dtype != np.dtype(typestr):
        raise errors.InvalidRequestError(
            f"out dtype {out.dtype} is not the tensor's {np.dtype(typestr)}")
    if not out.flags.writeable:
        raise errors.InvalidRequestError("out is read-only")
    if out.shape == shape:
        return out
    if out.shape == (1,) + shape:
        row: np.ndarray[Any, Any] = out[0]
        return row
    raise errors.InvalidRequestError(
        f"out shape {out.shape} is not the tensor's {shape}")


# A ROIS or BATCH request of one plan's options, made once (building a
# _native.Request costs tens of microseconds): (plan, kind) -> it.
_element_requests: dict[tuple[Any, int], Any] = {}
_INLINE = (0, 0, 0)
_INLINE_OUT = (0, 0, 0, 0)


def _elements_request(plan: _core.Plan, kind: int) -> Any:
    """The _native.Request of plan's options of kind ROIS or BATCH (its
    source and locations are Client.elements's arguments)."""
    key = (plan, kind)
    req = _element_requests.get(key)
    if req is None:
        if len(_element_requests) >= 64:
            _element_requests.clear()
        req = _element_requests[key] = plan.opts.request(kind).native()
    return req


def _elements_args(req: Any, src: _core.Source, frame: Any, els: list[Any],
                   where: tuple[int, int, int] = _INLINE,
                   out: tuple[int, int, int, int] = _INLINE_OUT
                   ) -> tuple[Any, ...]:
    """The arguments of _native.Client.elements: req (a ROIS or BATCH
    request of the options, :func:`_elements_request`) for src (its bytes
    in frame, an array, when inline) and the elements; where the source lies
    (input_loc, in_region, in_offset) and where the tensor goes
    (output_loc, out_region, out_offset, out_capacity), inline by
    default."""
    u, uo, vo = src.planes
    return (req, els, frame, src.span, src.format, src.width, src.height,
            src.stride, u, uo, vo) + where + out


def _ring_source(s: _Socket, frame: Any, format: str | None
                 ) -> tuple[int, int, _core.Source] | None:
    """(region id, offset, source) of a frame that lies reserved in a
    ring of this connection (a :class:`~frameprep.RingFrame` from
    ``ring.next_frame()``, or a view of one), to be read where it lies;
    None for any other array, or a view whose pixels are not packed (it
    is sent as a copy). Raises :class:`~frameprep.InvalidRequestError`
    for a ring frame already sent or cancelled, or of another
    connection's ring, :class:`~frameprep.RegionError` for one reserved
    before the ring registered anew (a daemon restart)."""
    from .ring import RingFrame, _hold_of
    if not isinstance(frame, RingFrame):
        return None
    hold = _hold_of(frame)
    if hold is None:
        return None
    ring = hold.ring
    if ring is None:
        raise errors.InvalidRequestError(
            "the ring frame was sent or cancelled: reserve another with "
            "ring.next_frame()")
    if ring._client._s is not s:
        raise errors.InvalidRequestError(
            "the ring frame is in another connection's ring: a region "
            "belongs to the connection that registered it")
    c = ring._c
    if hold.epoch != c.epoch:
        raise errors.RegionError(
            "the ring registered anew since this frame was reserved (the "
            "daemon restarted): reserve another with ring.next_frame()")
    src = _core.check_frame(frame, format)
    at = src.address() - c.base
    if at < 0 or at + src.span > c.size:
        return None  # copied by check_frame: not in the region
    return c.region_id, at, src


def _box_elements(boxes: Any) -> tuple[Any, int]:
    """(the elements of boxes for _native.Client.elements, their count):
    an (N, 4) float array as the bytes of its values in float32 (read in
    C as N BOX records: no tuple a box), anything else as the records of
    :func:`frameprep._core.elements_of`."""
    if isinstance(boxes, np.ndarray) and boxes.ndim == 2 and \
            boxes.shape[0] > 0 and boxes.shape[1] == 4 and \
            boxes.dtype.kind == "f":
        if boxes.dtype != np.float32:
            with np.errstate(over="ignore"):  # inf: refused by index
                boxes = boxes.astype(np.float32)
        return boxes.tobytes(), len(boxes)
    els = _core.elements_of(boxes)
    return els, len(els)


def _crops_args(plan: _core.Plan, frame: Any, boxes: Any,
                format: FormatName | None, out: Any,
                limits: dict[str, Any], s: _Socket | None = None,
                regions: Any = None
                ) -> tuple[tuple[Any, ...], _core.Source, Any]:
    """Checks the arguments of :meth:`Client.crops` (before sending) and
    returns those of _native.Client.elements, the source, which holds
    the frame's bytes (a copy when they were not packed): keep it until
    the call returns, and the DeviceArray of a CUDA ``out`` (else None).
    With s, a frame reserved in a ring of that connection is named where
    it lies (:func:`_ring_source`); with regions (a Client's CUDA
    regions), ``out`` may be a CUDA tensor or an Exported."""
    els, n = _box_elements(boxes)
    ring = _ring_source(s, frame, format) if s is not None else None
    src = ring[2] if ring is not None else _core.check_frame(frame, format)
    plan.check(src, limits)
    _core.check_elements(plan, n, limits, src.span)
    shape = (n,) + tuple(plan.shape[1:])
    dev, where, to = None, _INLINE, _INLINE_OUT
    if isinstance(out, np.ndarray):
        _numpy_out(out, shape, plan.typestr)
        if out.shape != shape:
            raise errors.InvalidRequestError(
                f"out shape {out.shape} is not the crops' {shape}")
    elif out is not None:
        if regions is None:
            raise errors.InvalidRequestError(
                f"out must be a numpy array, not {type(out).__name__} "
                f"(CUDA tensors: the blocking Client)")
        from . import cuda
        to, dev = cuda.out_place(regions, out, shape, plan.typestr)
    if ring is not None:
        where = (Location.SHM, ring[0], ring[1])
    return _elements_args(_elements_request(plan, Kind.ROIS), src,
                          src.array, els, where, to), src, dev


def _crops_result(res: Any, out: Any, dev: Any = None
                  ) -> _core.BatchResult[Any]:
    """The result of a ROIS or BATCH reply (checked here): a view of the
    reply; copied into a numpy out; a CUDA out (its DeviceArray dev)
    as a CudaTensor over it, or an Exported as it is."""
    _core.checked(res)
    if out is None:
        return _core.new_batch_result(res)
    if isinstance(out, np.ndarray):
        np.copyto(out, np.asarray(res))
        return _core.new_batch_result(res, out)
    if dev is None:
        return _core.new_batch_result(res, out)  # another process's
    from . import cuda
    return _core.new_batch_result(res, cuda.CudaTensor(dev, out))


_regions_lock = threading.Lock()  # makes a connection's Regions once


class _Connection:
    """What :class:`Client` and :class:`AsyncClient` share: the socket, its
    address and timeout, and closing it."""

    def __init__(self, address: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT,
                 trust_owner: str | int | None = None):
        self._s = _Socket(address, timeout, trust_owner)

    @property
    def address(self) -> str:
        """The daemon's URL."""
        return self._s.address

    @property
    def timeout(self) -> float:
        """The reply timeout, seconds."""
        return self._s.timeout

    def close(self) -> None:
        """Closes the connection, once the requests in progress on other
        threads ended (each within the timeout); later calls raise
        :class:`~frameprep.ClosedError`. Closing twice is a no-op.
        Results already returned stay valid."""
        self._s.close()

    def _cuda_regions(self) -> Any:
        """The connection's CUDA regions (:class:`frameprep.cuda.Regions`,
        made on first use, once also when threads race), registered by
        blocking requests: from any thread but the event loop's."""
        regions = getattr(self, "_cuda", None)
        if regions is None:
            from . import cuda
            with _regions_lock:
                regions = getattr(self, "_cuda", None)
                if regions is None:
                    s = self._s
                    regions = self._cuda = cuda.Regions(
                        lambda req: _request(s, req)[1])
        return regions


class Client(_Connection):
    """A blocking connection to frameprepd, safe to share between threads.

    ``address`` is an nng URL (``ipc:///path`` or ``tcp://host:port``);
    None means ``$FRAMEPREP_SOCKET`` if set, else the daemon's default,
    ``ipc://$XDG_RUNTIME_DIR/frameprep.sock`` or else
    ``ipc:///tmp/frameprep-$UID.sock``. ``timeout`` (seconds, > 0)
    bounds every request's wait for its reply. The connection is made here:
    :class:`~frameprep.TransportError` (a ``ConnectionError``) when nobody
    listens. Use as a context manager or call :meth:`close`.

    An ipc:// socket must be owned by this user, root or the service's
    user ``frameprep`` (another local user could have created the path
    first, in /tmp say, and would receive the frames and be granted the
    rings' memory), and the process listening on it must run as one of
    them: else :class:`~frameprep.PermissionDeniedError`, before anything
    is sent. ``trust_owner`` (a user name or uid; default
    ``$FRAMEPREP_TRUST_SOCKET_OWNER``) names one more user to trust, as
    the C library's ``fprep_client_open_trusting`` does. Rings grant
    their shared memory to that checked owner only.

    The daemon's limits are asked for when the client connects, so from
    the first request at most its ``max_inflight_per_conn`` requests are
    in flight on the connection at a time; more threads wait their turn
    here, within ``timeout``, rather than get ``EBUSY`` (or the connection
    closed).

    fork: a child process made by ``fork`` (a PyTorch ``DataLoader``
    worker, ``multiprocessing``'s "fork" context) must open a client of
    its own; it may, whether or not the parent used frameprep. A client
    opened before the fork is the parent's: in the child every call on it
    (and on its rings, results and pending requests) raises
    :class:`~frameprep.ForkedError`, and :meth:`close` there only forgets
    it; the parent's client keeps working in the parent.

    Every method raises :class:`~frameprep.RequestTimeoutError` (a
    ``TimeoutError``) when no reply comes within ``timeout``,
    :class:`~frameprep.ClosedError` after :meth:`close`, and the exception
    class of the daemon's status (see :mod:`frameprep.errors`) with the
    daemon's message when it refuses a request.
    """

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, req: Request, payload: Any = b"") -> tuple[Any, Any]:
        """Sends a request (its request_id is assigned by the C client)
        and an optional payload (bytes or a uint8 array); returns (the
        reply, a :class:`frameprep._native.Result` owning its payload, and
        the decoded :class:`Reply`) after checking the status. For
        protocol-level tools and tests."""
        return _request(self._s, req, payload)

    def info(self) -> dict[str, Any]:
        """Asks the daemon what it runs. Returns its INFO lines as a dict
        (version, backend, device, listen, and the limits max_width,
        max_height, max_frame_bytes, max_out_width, max_out_height,
        max_tensor_bytes, max_inflight, ... as ints)."""
        res = _core.checked(self._s.native.info())
        info = _core.parse_info(res.payload().decode("utf-8", "replace"))
        self._s.set_limits(info)
        return info

    def limits(self) -> dict[str, Any]:
        """The daemon's INFO, fetched once and cached: the limits the
        client checks before sending."""
        if self._s._limits is None:
            self.info()
        assert self._s._limits is not None
        return self._s._limits

    def video(self, codec: str, size: Sequence[int] = (640, 640),
              resize: ResizeName = "letterbox", order: OrderName = "rgb",
              dtype: DTypeOption = "float32", layout: LayoutName = "nchw",
              scale: float = 1 / 255,
              mean: float | Sequence[float] = (0.0, 0.0, 0.0),
              std: float | Sequence[float] = (1.0, 1.0, 1.0),
              pad: float = 114, matrix: MatrixName = "bt601",
              yuv_range: YuvRangeName = "limited",
              rounding: RoundingName = "float",
              params: bytes | None = None) -> video.VideoStream:
        """Opens a video stream on this connection: codec "h264" or
        "hevc"; the preprocessing keywords are :meth:`preprocess`'s (a
        decoded frame is preprocessed as an I420 frame of its size; matrix
        and yuv_range are the video's); params: Annex-B parameter sets
        (H.264 SPS and PPS; HEVC VPS, SPS and PPS) when the packets do not
        carry them. Returns a :class:`~frameprep.video.VideoStream`
        (``send(packet, pts)`` -> frames in display order, ``flush()``,
        ``close()``; a context manager). Raises
        :class:`~frameprep.LimitExceededError` past the daemon's streams
        per connection or per user, :class:`~frameprep.UnsupportedError`
        from a daemon without a video decoder,
        :class:`~frameprep.BitstreamError` for parameter sets the decoder
        refuses, :class:`~frameprep.InvalidRequestError` for an unknown
        codec or option."""
        return video.open_stream(self, codec, size, resize, order, dtype,
                                 layout, scale, mean, std, pad, matrix,
                                 yuv_range, rounding, params)

    @overload
    def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                       resize: ResizeName = ..., order: OrderName = ...,
                       dtype: _core.F32Option = ..., layout: LayoutName = ...,
                       scale: float = ..., mean: float | Sequence[float] = ...,
                       std: float | Sequence[float] = ..., pad: float = ...,
                       format: FormatName | None = ..., matrix: MatrixName = ...,
                       yuv_range: YuvRangeName = ..., out: None = ...,
                       rounding: RoundingName = ...
                       ) -> _core.Result[npt.NDArray[np.float32]]: ...

    @overload
    def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                       resize: ResizeName = ..., order: OrderName = ...,
                       dtype: _core.F16Option = ..., layout: LayoutName = ...,
                       scale: float = ..., mean: float | Sequence[float] = ...,
                       std: float | Sequence[float] = ..., pad: float = ...,
                       format: FormatName | None = ..., matrix: MatrixName = ...,
                       yuv_range: YuvRangeName = ..., out: None = ...,
                       rounding: RoundingName = ...
                       ) -> _core.Result[npt.NDArray[np.float16]]: ...

    @overload
    def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                       resize: ResizeName = ..., order: OrderName = ...,
                       dtype: _core.U8Option = ..., layout: LayoutName = ...,
                       scale: float = ..., mean: float | Sequence[float] = ...,
                       std: float | Sequence[float] = ..., pad: float = ...,
                       format: FormatName | None = ..., matrix: MatrixName = ...,
                       yuv_range: YuvRangeName = ..., out: None = ...,
                       rounding: RoundingName = ...
                       ) -> _core.Result[npt.NDArray[np.uint8]]: ...

    @overload
    def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                       resize: ResizeName = ..., order: OrderName = ...,
                       dtype: DTypeOption = ..., layout: LayoutName = ...,
                       scale: float = ..., mean: float | Sequence[float] = ...,
                       std: float | Sequence[float] = ..., pad: float = ...,
                       format: FormatName | None = ..., matrix: MatrixName = ...,
                       yuv_range: YuvRangeName = ..., out: None = ...,
                       rounding: RoundingName = ...
                       ) -> _core.Result[npt.NDArray[Any]]: ...

    @overload
    def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                       resize: ResizeName = ..., order: OrderName = ...,
                       dtype: DTypeOption = ..., layout: LayoutName = ...,
                       scale: float = ..., mean: float | Sequence[float] = ...,
                       std: float | Sequence[float] = ..., pad: float = ...,
                       format: FormatName | None = ..., matrix: MatrixName = ...,
                       yuv_range: YuvRangeName = ..., out: npt.NDArray[_S] = ...,
                       rounding: RoundingName = ...
                       ) -> _core.Result[npt.NDArray[_S]]: ...

    @overload
    def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                       resize: ResizeName = ..., order: OrderName = ...,
                       dtype: DTypeOption = ..., layout: LayoutName = ...,
                       scale: float = ..., mean: float | Sequence[float] = ...,
                       std: float | Sequence[float] = ..., pad: float = ...,
                       format: FormatName | None = ..., matrix: MatrixName = ...,
                       yuv_range: YuvRangeName = ..., out: Any = ...,
                       rounding: RoundingName = ...
                       ) -> _core.Result[Any]: ...

    def preprocess(self, frame: _core.Frame,
                   size: Sequence[int] = (640, 640),
                   resize: ResizeName = "letterbox", order: OrderName = "rgb",
                   dtype: DTypeOption = "float32",
                   layout: LayoutName = "nchw",
                   scale: float = 1 / 255,
                   mean: float | Sequence[float] = (0.0, 0.0, 0.0),
                   std: float | Sequence[float] = (1.0, 1.0, 1.0),
                   pad: float = 114, format: FormatName | None = None,
                   matrix: MatrixName = "bt601",
                   yuv_range: YuvRangeName = "limited",
                   out: Any = None,
                   rounding: RoundingName = "float") -> _core.Result[Any]:
        """Preprocesses one frame into a model-ready tensor.

        frame   numpy uint8 array (H, W) gray, (H, W, 3) BGR or (H, W, 4)
                BGRA by default (as ``cv2.imread`` gives), or in ``format``
                ("bgr8", "rgb8", "bgra8", "rgba8", "gray8"). Rows may be
                strided (a crop ``big[y0:y1, x0:x1]`` is sent with its row
                stride, without copying the big frame); other non-packed
                layouts are copied first.
        size    tensor (width, height) in pixels.
        resize  "letterbox" (keep aspect, centred, padded with ``pad``;
                Ultralytics convention) or "stretch".
        order   tensor channels "rgb", "bgr" or "gray" (gray needs a gray
                frame).
        dtype   "float32", "float16" or "uint8" (uint8 holds the rounded
                resized pixels: scale, mean and std keep their defaults).
        layout  "nchw" -> tensor (1, C, H, W); "nhwc" -> (1, H, W, C).
        scale, mean, std  out = (pixel * scale - mean[c]) / std[c], c in
                the tensor's channel order; YOLO: 1/255, 0, 1.
        pad     border value in pixel units, 0..255.
        format  "nv12", "i420" or "yuyv" take YUV frames as OpenCV's
                cvtColor does: NV12 and I420 one (H * 3 / 2, W) array,
                YUYV (H, W, 2); width (and for NV12/I420 height) even.
                "jpeg" takes a JPEG file's bytes (bytes, bytearray,
                memoryview or a 1-D uint8 array, not copied), decoded by
                the daemon (libjpeg-turbo, as cv2.imdecode: within 1 LSB
                of cv2.imdecode + OpenCV's letterbox); the result's
                ``decoded_size`` is the decoded (width, height) in pixels,
                ``timings.decode_us`` the decode time and ``transform``
                maps to the decoded frame. A corrupt, truncated or CMYK
                file is refused with :class:`~frameprep.InvalidRequestError`
                (libjpeg-turbo's words), one whose decoded size exceeds
                the daemon's limits with
                :class:`~frameprep.LimitExceededError`.
        matrix, yuv_range  a YUV frame's colour matrix ("bt601", "bt709",
                "bt2020") and range ("limited", "full"); the defaults are
                what OpenCV's COLOR_YUV2BGR_NV12 assumes. The conversion
                is described in protocol.h.
        out     a numpy array of the tensor's shape (with or without the
                leading 1) and dtype: the tensor is copied into it, and the
                result's tensor is ``out``. Or a CUDA tensor
                (``__cuda_array_interface__`` or DLPack:
                PyTorch, CuPy) of the tensor's shape, with or without the
                leading 1 (``batch[k]`` of an (N, 3, H, W) batch), its
                dtype and C-contiguous: the daemon writes the tensor
                straight into it (no copy through the host; ipc:// and a
                GPU daemon only). The frame may also be a CUDA uint8
                (H, W, C) tensor, read where it lies; it must be complete
                (its stream synchronised). ``out`` may also be a
                :class:`~frameprep.cuda.Exported` (``export(batch)[k]``)
                from another process: the consumer's memory. See
                :mod:`frameprep.cuda`.
        rounding  "float" (default: the bilinear blend kept in float,
                within 1 LSB of OpenCV) or "opencv" (exact mode: the
                resized pixel rounded to uint8 as cv2.resize(INTER_LINEAR)
                does, the padding rounded half to even, so the tensor
                equals cv2.resize + cv2.copyMakeBorder + numpy's float32
                ``(img * scale - mean) / std`` bit for bit; a pipeline
                that divides by 255 matches with scale=1, std=255).

        Returns a :class:`~frameprep.Result`; its tensor views the reply
        message (no copy), or for ``out`` is a
        :class:`~frameprep.cuda.CudaTensor` over ``out`` (ready when this
        returns: the daemon replies after the GPU work completed, so no
        stream synchronisation is needed; an ``Exported`` out is returned
        as it is). Raises :class:`~frameprep.InvalidRequestError` (wrong
        dtype, shape, format or option, checked before sending, or
        refused by the daemon with its message),
        :class:`~frameprep.LimitExceededError` (beyond the daemon's limits,
        checked before sending against INFO, fetched once), and the
        transport errors of the class.
        """
        plan = _core.plan(size, resize, order, dtype, layout, scale, mean,
                          std, pad, matrix, yuv_range, rounding)
        if isinstance(out, np.ndarray):
            dst = _numpy_out(out, plan.shape[1:], plan.typestr)
            res = self.preprocess(frame, size, resize, order, dtype, layout,
                                  scale, mean, std, pad, format, matrix,
                                  yuv_range, rounding=rounding)
            np.copyto(dst, res.tensor[0])
            object.__setattr__(res, "tensor", out)
            return res
        if out is not None or (not isinstance(frame, np.ndarray) and
                               _is_cuda(frame)):
            if _is_cuda(frame):
                return self._preprocess_cuda(plan, frame, format, out)
            return self._preprocess_to_cuda(plan, frame, format, out)
        src = _core.check_frame(frame, format)
        s = self._s
        plan.check(src, s._limits or self.limits())
        u, uo, vo = src.planes
        res = s.call(s.native.frame, plan.native, src.array, src.span,
                     src.format, src.width, src.height, src.stride, u, uo,
                     vo)
        if res.status:
            _core.checked(res)
        return _core.new_result(_core.tensor_of(res), res, src.width,
                                src.height)

    def _preprocess_to_cuda(self, plan: Any, frame: Any, format: str | None,
                            out: Any) -> _core.Result:
        """preprocess of a host frame (an array, a JPEG's bytes) into a
        CUDA ``out``: the simple call's route (the frame staged through
        shared memory and its request through the doorbell on ipc://),
        with the daemon writing the tensor into ``out``'s registered
        region."""
        from . import cuda
        s = self._s
        shape = tuple(plan.shape)
        if isinstance(out, cuda.Exported):
            cuda.check_exported(out, plan)
            to = (Location.CUDA, self._cuda_regions().region_of_export(out),
                  out.offset, plan.tensor_bytes)
            dev = None
        else:
            dev = cuda.check_out(out, plan)
            rid, offset = self._cuda_regions().region_of(dev)
            to = (Location.CUDA, rid, offset, plan.tensor_bytes)
        src = _core.check_frame(frame, format)
        plan.check(src, s._limits or self.limits())
        u, uo, vo = src.planes
        res = s.call(s.native.frame, plan.native, src.array, src.span,
                     src.format, src.width, src.height, src.stride, u, uo,
                     vo, *to)
        _core.checked(res)
        tensor: Any = out
        if dev is not None:
            tensor = cuda.CudaTensor(
                cuda.DeviceArray(dev.ptr, shape,
                                 cuda._c_strides(shape, dev.itemsize),
                                 dev.typestr, dev.device, plan.tensor_bytes),
                out)
        return _core.new_result(tensor, res, src.width, src.height)

    @overload
    def preprocess_batch(
            self, frames: Sequence[_core.Frame], out: None = None,
            size: Sequence[int] = ..., resize: ResizeName = ...,
            order: OrderName = ..., dtype: DTypeOption = ...,
            layout: LayoutName = ..., scale: float = ...,
            mean: float | Sequence[float] = ...,
            std: float | Sequence[float] = ..., pad: float = ...,
            format: FormatName | None = ..., matrix: MatrixName = ...,
            yuv_range: YuvRangeName = ..., rounding: RoundingName = ...
    ) -> _core.BatchResult[np.ndarray[Any, np.dtype[Any]]]: ...

    @overload
    def preprocess_batch(
            self, frames: Sequence[_core.Frame], out: _core.TensorT,
            size: Sequence[int] = ..., resize: ResizeName = ...,
            order: OrderName = ..., dtype: DTypeOption = ...,
            layout: LayoutName = ..., scale: float = ...,
            mean: float | Sequence[float] = ...,
            std: float | Sequence[float] = ..., pad: float = ...,
            format: FormatName | None = ..., matrix: MatrixName = ...,
            yuv_range: YuvRangeName = ..., rounding: RoundingName = ...
    ) -> _core.BatchResult[_core.TensorT]: ...

    def preprocess_batch(self, frames: Sequence[_core.Frame], out: Any = None,
                         size: Sequence[int] = (640, 640),
                         resize: ResizeName = "letterbox",
                         order: OrderName = "rgb",
                         dtype: DTypeOption = "float32",
                         layout: LayoutName = "nchw",
                         scale: float = 1 / 255,
                         mean: float | Sequence[float] = (0.0, 0.0, 0.0),
                         std: float | Sequence[float] = (1.0, 1.0, 1.0),
                         pad: float = 114, format: FormatName | None = None,
                         matrix: MatrixName = "bt601",
                         yuv_range: YuvRangeName = "limited",
                         rounding: RoundingName = "float"
                         ) -> _core.BatchResult[Any]:
        """Preprocesses N >= 1 frames (each as :meth:`preprocess` takes
        it, sizes may differ) into one batch.

        Returns a :class:`~frameprep.BatchResult`: ``tensor`` (N, C, H, W)
        for NCHW, (N, H, W, C) for NHWC, frame k in row k, and
        ``transforms``, frame k's :class:`~frameprep.ElementTransform` at
        k, so that ``result.transforms[k].to_source(boxes)`` maps boxes
        found in row k back to frame k's pixels, whatever its size.
        ``out`` None: ``tensor`` is a numpy array (new, or a view of the
        reply); a numpy array of that shape and dtype: it is filled and is
        ``tensor``; a CUDA tensor of that shape (PyTorch, CuPy): the daemon
        writes each row straight into it (``out[k]``, see
        :meth:`preprocess`), and it is ``tensor``. The requests are sent
        from up to 8 threads at once, within the client's in-flight limit.
        Raises ``ValueError`` (:class:`~frameprep.InvalidRequestError`)
        for no frames, and for an ``out`` of another shape or dtype
        (before sending anything), and as :meth:`preprocess` (the first
        failure; rows of other frames may be written by then).

        Frames of one shape and one packed format (bgr8, rgb8, bgra8,
        rgba8, gray8) with ``rounding="float"`` go in ONE BATCH request
        (protocol.h), the frames copied into its message (and first
        stacked into one array, unless ``frames`` is one packed (N, H,
        W[, C]) array), or, when every frame is a
        :class:`~frameprep.RingFrame` reserved in one ring of this client
        (``ring.next_frame()``, as :meth:`crops` takes it), read where
        they lie and not sent (they stay reserved), when the daemon's
        max_elements, max_batch_bytes (tensors and frames) and
        max_frame_bytes (INFO) allow it; then
        ``out`` None returns a view of the reply, and a CUDA ``out`` (or
        an :class:`~frameprep.cuda.Exported`, whole (N, ...)) is written
        by one launch. Otherwise (mixed shapes, YUV or JPEG frames, exact
        mode, beyond those limits) one request per frame."""
        plan = _core.plan(size, resize, order, dtype, layout, scale, mean,
                          std, pad, matrix, yuv_range, rounding)
        n = len(frames)
        if n == 0:
            raise errors.InvalidRequestError(
                "preprocess_batch needs at least one frame: an empty batch "
                "has no tensor to return")
        shape = (n,) + tuple(plan.shape[1:])
        if out is not None and \
                tuple(getattr(out, "shape", ())) != shape:
            raise errors.InvalidRequestError(
                f"out shape {tuple(getattr(out, 'shape', ()))} is not the "
                f"batch's {shape}")
        if isinstance(out, np.ndarray):
            _numpy_out(out, shape, plan.typestr)
        stacked = self._batch_frames(frames, format, plan) \
            if rounding == "float" else None
        if stacked is not None:
            to = _INLINE_OUT
            if out is not None and not isinstance(out, np.ndarray):
                from . import cuda
                to, _ = cuda.out_place(self._cuda_regions(), out, shape,
                                       plan.typestr)
            s = self._s
            src, packed, els, where = stacked
            res = _core.checked(s.call(s.native.elements, *_elements_args(
                _elements_request(plan, Kind.BATCH), src, packed, els, where,
                to)))
            if out is None:
                return _core.new_batch_result(res)
            if isinstance(out, np.ndarray):
                np.copyto(out, np.asarray(res))
            return _core.new_batch_result(res, out)
        if out is None:
            out = np.empty(shape, plan.typestr)
        results: list[_core.Result] = []

        def one(k: int) -> _core.Result:
            return self.preprocess(frames[k], size, resize, order, dtype,
                                   layout, scale, mean, std, pad, format,
                                   matrix, yuv_range, out=out[k],
                                   rounding=rounding)

        if n == 1:
            results.append(one(0))
        else:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(min(n, 8)) as pool:
                results.extend(f.result() for f in
                               [pool.submit(one, k) for k in range(n)])
        return _core.batch_of(out, results)

    def _batch_frames(self, frames: Sequence[Any], format: str | None,
                      plan: _core.Plan
                      ) -> tuple[_core.Source, Any, list[Any],
                                 tuple[int, int, int]] | None:
        """(the first frame's source, the frames packed one after another
        in one array (None for frames in a region), the BATCH elements,
        where the frames lie (input_loc, in_region, in_offset)) when frames
        can go in one BATCH request (see :meth:`preprocess_batch`), else
        None."""
        n = len(frames)
        if n < 2 or not all(isinstance(f, np.ndarray) for f in frames):
            return None
        first = frames[0]
        if any(f.shape != first.shape or f.dtype != first.dtype
               for f in frames):
            return None
        src = _core.check_frame(first, format)
        if src.format.is_yuv or src.format == PixelFormat.JPEG:
            return None
        limits = self._s._limits or self.limits()
        plan.check(src, limits)
        if not isinstance(limits.get("max_elements"), int):
            return None  # a daemon without BATCH requests
        try:
            _core.check_elements(plan, n, limits)
        except errors.LimitExceededError:
            return None
        placed = self._ring_frames(frames, format)
        if placed is not None:
            rid, ats, src = placed
            base = min(ats)
            most = limits.get("max_batch_bytes")
            if isinstance(most, int) and max(ats) - base + src.span > most:
                return None
            els = [(_core.ELEM_FRAME, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                    at - base) for at in ats]
            return src, None, els, (Location.SHM, rid, base)
        # One (N, H, W[, C]) array is sent as it lies when packed.
        packed = np.ascontiguousarray(frames) if isinstance(
            frames, np.ndarray) else np.stack(frames)
        one = packed[0].nbytes
        # The frames' span is bounded by max_batch_bytes too, and inline,
        # with the element table, by max_frame_bytes.
        for key, extra in (("max_batch_bytes", 0),
                           ("max_frame_bytes", 32 * n + 8)):
            most = limits.get(key)
            if isinstance(most, int) and packed.nbytes + extra > most:
                return None
        src = _core.check_frame(packed[0], format)
        els = [(_core.ELEM_FRAME, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, k * one)
               for k in range(n)]
        return src, packed, els, _INLINE

    def _ring_frames(self, frames: Sequence[Any], format: str | None
                     ) -> tuple[int, list[int], _core.Source] | None:
        """(region id, each frame's offset in it, the first's source) when
        every frame is reserved in one ring of this connection with one
        geometry (read where they lie), else None."""
        placed = [_ring_source(self._s, f, format) for f in frames]
        if any(p is None for p in placed):
            return None
        first = placed[0]
        assert first is not None
        form = (first[0], first[2].format, first[2].stride)
        for p in placed:
            assert p is not None
            if (p[0], p[2].format, p[2].stride) != form:
                return None
        return first[0], [p[1] for p in placed if p is not None], first[2]

    def crops(self, frame: _core.Frame, boxes: Any,
              size: Sequence[int] = (224, 224),
              resize: ResizeName = "letterbox", order: OrderName = "rgb",
              dtype: DTypeOption = "float32", layout: LayoutName = "nchw",
              scale: float = 1 / 255,
              mean: float | Sequence[float] = (0.0, 0.0, 0.0),
              std: float | Sequence[float] = (1.0, 1.0, 1.0),
              pad: float = 114, format: FormatName | None = None,
              out: Any = None) -> _core.BatchResult[Any]:
        """Preprocesses N regions of one frame into one tensor, in ONE
        ROIS request (protocol.h, "ROIS and BATCH requests").

        frame   as :meth:`preprocess` takes it, packed formats only
                (bgr8, rgb8, bgra8, rgba8, gray8): a numpy array is
                copied into the request. A frame already in shared memory
                is not sent again: a :class:`~frameprep.RingFrame` from
                ``ring.next_frame()`` of a ring on this client (or a view
                of one with packed pixels, such as ``buf[y0:y1]``) is
                read where it lies, by (region, offset). It stays
                reserved (crops do not hand its slot on): crop it as
                often as needed, then ``buf.cancel()`` (or send it with
                ``ring.preprocess(buf)``); don't write it while a
                request reads it. A ring kept for crops alone may give
                its slots' own tensor a token size:
                ``client.ring(slots=2, frame=(1080, 1920, 3), size=(8, 8),
                dtype="uint8")``.
        boxes   an (N, 4) array-like of x, y, w, h in source pixels
                (floats; the sub-image [x, x + w) x [y, y + h)), or a
                sequence whose items are each such a box or
                ``{"affine": [m00, m01, m02, m10, m11, m12]}``, a 2x3
                matrix mapping tensor pixel (u, v) to source pixel
                (m00 u + m01 v + m02, m10 u + m11 v + m12), sampled as
                cv2.warpAffine(..., WARP_INVERSE_MAP, BORDER_CONSTANT,
                pad). 1..max_elements (INFO) items.
        size    each crop's tensor (width, height) in pixels.
        resize  "letterbox" or "stretch", for the boxes: an integer box
                equals cv2.resize(frame[y:y+h, x:x+w]) (+ copyMakeBorder
                for letterbox) within 1 LSB; box pixels outside the frame
                read as ``pad`` (padded, not clipped).
        order, dtype, layout, scale, mean, std, pad  as
                :meth:`preprocess` (rounding is "float": exact mode is
                refused for crops).
        out     a numpy array (N, C, H, W) (or NHWC) of the tensor's
                dtype: the tensor is copied into it. Or a CUDA tensor
                (PyTorch, CuPy: ``__cuda_array_interface__`` or DLPack)
                of exactly that shape and dtype, C-contiguous, or a
                :class:`~frameprep.cuda.Exported` of one in another
                process: the daemon writes the N crops straight into it
                (one launch, no copy through the host; ipc:// and a GPU
                daemon only), registered once per allocation as for
                :meth:`preprocess`.

        Returns a :class:`~frameprep.BatchResult`: tensor (N, C, H, W) or
        (N, H, W, C), row k the crop of boxes[k], and its N
        :class:`~frameprep.ElementTransform` (all zero for an affine).
        For a CUDA ``out`` the tensor is a
        :class:`~frameprep.cuda.CudaTensor` over it, complete when this
        returns (no stream synchronisation needed).
        Raises :class:`~frameprep.InvalidRequestError` (a malformed item,
        or a bad box refused by the C library or the daemon with the
        element's index in the message: "element 3: w -1 is not > 0"; an
        ``out`` of another shape or dtype),
        :class:`~frameprep.LimitExceededError` (N beyond max_elements, N
        tensors or the frame's bytes beyond max_batch_bytes, a frame
        beyond the daemon's limits), and the transport errors of the
        class."""
        plan = _core.plan(size, resize, order, dtype, layout, scale, mean,
                          std, pad)
        s = self._s
        regions = None
        if out is not None and not isinstance(out, np.ndarray):
            regions = self._cuda_regions()
        args, src, dev = _crops_args(plan, frame, boxes, format, out,
                                     s._limits or self.limits(), s, regions)
        res = s.call(s.native.elements, *args)
        del src  # the frame's bytes, kept until the call returned
        return _crops_result(res, out, dev)

    def register_cuda(self, tensor: Any) -> tuple[int, int]:
        """Registers the allocation holding a CUDA tensor (once per
        allocation; cached) and returns (region id, the tensor's byte
        offset in it). :meth:`preprocess` does this by itself; call it to
        pay the registration (a first open costs the daemon ~0.2 s) before
        timing anything. Raises ImportError without cuda-python."""
        from . import cuda
        rid, offset = self._cuda_regions().region_of(cuda.describe(tensor))
        return int(rid), int(offset)

    def release_cuda(self) -> None:
        """Unregisters every CUDA region of this client: afterwards the
        daemon no longer touches its device memory, which may then be
        freed. Freeing registered memory first is undefined behaviour in
        CUDA."""
        regions = getattr(self, "_cuda", None)
        if regions is not None:
            regions.release()

    def _preprocess_cuda(self, plan: Any, frame: Any, format: str | None,
                         out: Any) -> _core.Result:
        """preprocess with a CUDA frame and/or a CUDA out."""
        from . import cuda
        regions = self._cuda_regions()
        req = plan.opts.request()
        payload: Any = b""
        if not _is_cuda(frame):  # numpy, or a JPEG's bytes
            src = _core.check_frame(frame, format)
            payload = src.bytes_view()
        else:
            src = cuda.source(frame, format)
            if src.stream is not None:
                cuda.sync_stream(src.stream)
            req.input_loc = Location.CUDA
            req.in_region, req.in_offset = regions.region_of(src.dev)
        plan.check(src, self.limits())
        req.src_format, req.src_width, req.src_height = (
            src.format, src.width, src.height)
        req.src_stride, req.input_size = src.stride, src.span
        req.uv_stride, req.u_offset, req.v_offset = src.planes
        dev_out = None
        if isinstance(out, cuda.Exported):
            cuda.check_exported(out, plan)
            req.output_loc = Location.CUDA
            req.out_region = regions.region_of_export(out)
            req.out_offset = out.offset
            req.out_capacity = plan.tensor_bytes
        elif out is not None:
            dev_out = cuda.check_out(out, plan)
            req.output_loc = Location.CUDA
            req.out_region, req.out_offset = regions.region_of(dev_out)
            req.out_capacity = plan.tensor_bytes
        rmsg, _ = self.request(req, payload)
        if dev_out is not None:
            tensor: Any = cuda.CudaTensor(
                cuda.DeviceArray(dev_out.ptr, tuple(plan.shape),
                                 cuda._c_strides(tuple(plan.shape),
                                                 dev_out.itemsize),
                                 dev_out.typestr, dev_out.device,
                                 plan.tensor_bytes), out)
        elif out is not None:
            tensor = out  # in another process's memory: nothing to view
        else:
            tensor = _core.tensor_of(rmsg)
        return _core.new_result(tensor, rmsg, src.width, src.height)

    def ring(self, slots: int = 4, frame: Sequence[int] = (1080, 1920, 3),
             doorbell: bool = True, **options: Any) -> Ring:
        """Creates a shared-memory ring on this connection (ipc:// only):
        ``slots`` slots, each holding a frame of up to ``frame`` = (H, W)
        or (H, W, C) uint8 pixels and the tensor of ``options`` (the
        keyword arguments of :meth:`preprocess`: size, resize, order,
        dtype, layout, scale, mean, std, pad, format, matrix, yuv_range,
        rounding). With ``doorbell`` false the ring's requests always go
        over the socket. A ring of ``format="jpeg"`` holds JPEG files'
        bytes: ``frame=(1, N)`` makes each slot N bytes, and its
        ``preprocess`` takes a file's bytes (copied into a slot), or
        ``next_frame((1, n))`` filled with them (bytes after the JPEG's
        end marker are ignored by the decoder, so a whole slot holding a
        shorter file may be sent too); results carry ``decoded_size``. See
        :class:`~frameprep.Ring`."""
        from .ring import Ring
        return Ring(self, slots, frame, doorbell=doorbell, **options)


class AsyncClient(_Connection):
    """An asyncio connection to frameprepd: the methods of :class:`Client`,
    awaited, so one thread keeps many frames in flight (each request rides
    its own nng context of the C client, whose reply wakes the loop
    through ``call_soon_threadsafe``). Same arguments, results and
    exceptions as :class:`Client`, except CUDA tensors (``out=`` and CUDA
    frames), which only :class:`Client` takes (a video stream's ``out=``
    aside: :class:`~frameprep.video.AsyncVideoStream`); the constructor dials
    synchronously and asks the daemon's limits, so ``asyncio.gather`` of
    any number of requests on a fresh client keeps at most
    ``max_inflight_per_conn`` of them in flight. Use ``async with`` or
    call :meth:`close`. After ``fork``, as :class:`Client`: the child
    opens its own."""

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _arrived(fut: asyncio.Future[None], box: list[Any]) -> None:
        """On the loop: the reply of box[0] (a Pending) arrived."""
        if fut.cancelled():  # nobody waits: end the pending here
            p, box[0] = box[0], None
            with contextlib.suppress(errors.FrameprepError):
                if p is not None:
                    p.wait()
        elif not fut.done():
            fut.set_result(None)

    async def _submit(self, tmpl: Any, src: _core.Source | None) -> Any:
        """Submits tmpl (for src, else as it is) and returns its reply
        (a :class:`frameprep._native.Result`, status not checked)."""
        s = self._s
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        box: list[Any] = [None]
        cb = functools.partial(loop.call_soon_threadsafe, self._arrived,
                               fut, box)
        if src is None:
            args: tuple[Any, ...] = (None,) + (0,) * 8
        else:
            u, uo, vo = src.planes
            args = (src.array, src.span, src.format, src.width, src.height,
                    src.stride, u, uo, vo)
        s.check_fork()
        gate = s.agate
        async with gate if gate is not None else contextlib.nullcontext():
            box[0] = s.native.submit(tmpl, cb, *args)
            # The C client's timeout ends the wait; wait_for is a
            # backstop.
            try:
                await asyncio.wait_for(asyncio.shield(fut), s.timeout + 5)
            except asyncio.TimeoutError:
                fut.cancel()
                raise errors.RequestTimeoutError(
                    f"no reply from {s.address} within "
                    f"{s.timeout:g} s") from None
            except BaseException:
                fut.cancel()
                raise
            p, box[0] = box[0], None
            return p.wait()

    async def request(self, req: Request,
                      payload: Any = b"") -> tuple[Any, Any]:
        """See :meth:`Client.request` (run on the loop's executor)."""
        loop = asyncio.get_running_loop()
        res = await loop.run_in_executor(None, self._s.native.request,
                                         req.native(), _payload(payload))
        _core.checked(res)
        rep = Reply(**res.fields)
        req.request_id = rep.request_id
        return res, rep

    async def crops(self, frame: _core.Frame, boxes: Any,
                    size: Sequence[int] = (224, 224),
                    resize: ResizeName = "letterbox",
                    order: OrderName = "rgb",
                    dtype: DTypeOption = "float32",
                    layout: LayoutName = "nchw", scale: float = 1 / 255,
                    mean: float | Sequence[float] = (0.0, 0.0, 0.0),
                    std: float | Sequence[float] = (1.0, 1.0, 1.0),
                    pad: float = 114, format: FormatName | None = None,
                    out: np.ndarray[Any, Any] | None = None
                    ) -> _core.BatchResult[Any]:
        """See :meth:`Client.crops` (the request runs on the loop's
        executor; the frame must not change until it returns; a frame of
        an :class:`~frameprep.AsyncRing` of this client is read where it
        lies; ``out`` numpy only)."""
        plan = _core.plan(size, resize, order, dtype, layout, scale, mean,
                          std, pad)
        args, src, _ = _crops_args(plan, frame, boxes, format, out,
                                   await self.limits(), self._s)
        loop = asyncio.get_running_loop()
        res = await loop.run_in_executor(
            None, functools.partial(self._s.call, self._s.native.elements,
                                    *args))
        del src  # the frame's bytes, kept until the call returned
        return _crops_result(res, out)

    async def video(self, codec: str, size: Sequence[int] = (640, 640),
                    resize: ResizeName = "letterbox", order: OrderName = "rgb",
                    dtype: DTypeOption = "float32", layout: LayoutName = "nchw",
                    scale: float = 1 / 255,
                    mean: float | Sequence[float] = (0.0, 0.0, 0.0),
                    std: float | Sequence[float] = (1.0, 1.0, 1.0),
                    pad: float = 114, matrix: MatrixName = "bt601",
                    yuv_range: YuvRangeName = "limited",
                    rounding: RoundingName = "float",
                    params: bytes | None = None) -> video.AsyncVideoStream:
        """See :meth:`Client.video`: the same stream, opened on the loop's
        executor, as a :class:`~frameprep.video.AsyncVideoStream`
        (``await send(packet, pts)`` -> frames in display order, ``await
        flush()``, ``await close()``; an async context manager)."""
        loop = asyncio.get_running_loop()
        st = await loop.run_in_executor(None, functools.partial(
            video.open_stream, self, codec, size, resize, order, dtype,
            layout, scale, mean, std, pad, matrix, yuv_range, rounding,
            params))
        return video.AsyncVideoStream(st)

    async def release_cuda(self) -> None:
        """See :meth:`Client.release_cuda`: the CUDA regions that video
        streams' ``out=`` registered on this connection (run on the loop's
        executor)."""
        regions = getattr(self, "_cuda", None)
        if regions is not None:
            await asyncio.get_running_loop().run_in_executor(
                None, regions.release)

    async def info(self) -> dict[str, Any]:
        """See :meth:`Client.info`."""
        res = _core.checked(await self._submit(_INFO, None))
        info = _core.parse_info(res.payload().decode("utf-8", "replace"))
        self._s.set_limits(info)
        return info

    async def limits(self) -> dict[str, Any]:
        """See :meth:`Client.limits`."""
        if self._s._limits is None:
            await self.info()
        assert self._s._limits is not None
        return self._s._limits

    @overload
    async def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                             resize: ResizeName = ..., order: OrderName = ...,
                             dtype: _core.F32Option = ..., layout: LayoutName = ...,
                             scale: float = ..., mean: float | Sequence[float] = ...,
                             std: float | Sequence[float] = ..., pad: float = ...,
                             format: FormatName | None = ..., matrix: MatrixName = ...,
                             yuv_range: YuvRangeName = ..., rounding: RoundingName = ...
                             ) -> _core.Result[npt.NDArray[np.float32]]: ...

    @overload
    async def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                             resize: ResizeName = ..., order: OrderName = ...,
                             dtype: _core.F16Option = ..., layout: LayoutName = ...,
                             scale: float = ..., mean: float | Sequence[float] = ...,
                             std: float | Sequence[float] = ..., pad: float = ...,
                             format: FormatName | None = ..., matrix: MatrixName = ...,
                             yuv_range: YuvRangeName = ..., rounding: RoundingName = ...
                             ) -> _core.Result[npt.NDArray[np.float16]]: ...

    @overload
    async def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                             resize: ResizeName = ..., order: OrderName = ...,
                             dtype: _core.U8Option = ..., layout: LayoutName = ...,
                             scale: float = ..., mean: float | Sequence[float] = ...,
                             std: float | Sequence[float] = ..., pad: float = ...,
                             format: FormatName | None = ..., matrix: MatrixName = ...,
                             yuv_range: YuvRangeName = ..., rounding: RoundingName = ...
                             ) -> _core.Result[npt.NDArray[np.uint8]]: ...

    @overload
    async def preprocess(self, frame: _core.Frame, size: Sequence[int] = ...,
                             resize: ResizeName = ..., order: OrderName = ...,
                             dtype: DTypeOption = ..., layout: LayoutName = ...,
                             scale: float = ..., mean: float | Sequence[float] = ...,
                             std: float | Sequence[float] = ..., pad: float = ...,
                             format: FormatName | None = ..., matrix: MatrixName = ...,
                             yuv_range: YuvRangeName = ..., rounding: RoundingName = ...
                             ) -> _core.Result[npt.NDArray[Any]]: ...

    async def preprocess(self, frame: _core.Frame,
                         size: Sequence[int] = (640, 640),
                         resize: ResizeName = "letterbox",
                         order: OrderName = "rgb",
                         dtype: DTypeOption = "float32",
                         layout: LayoutName = "nchw",
                         scale: float = 1 / 255,
                         mean: float | Sequence[float] = (0.0, 0.0, 0.0),
                         std: float | Sequence[float] = (1.0, 1.0, 1.0),
                         pad: float = 114, format: FormatName | None = None,
                         matrix: MatrixName = "bt601",
                         yuv_range: YuvRangeName = "limited",
                         rounding: RoundingName = "float"
                         ) -> _core.Result[Any]:
        """See :meth:`Client.preprocess`."""
        plan = _core.plan(size, resize, order, dtype, layout, scale, mean,
                          std, pad, matrix, yuv_range, rounding)
        src = _core.check_frame(frame, format)
        plan.check(src, await self.limits())
        res = _core.checked(await self._submit(plan.native, src))
        return _core.new_result(np.asarray(res), res, src.width, src.height)

    async def ring(self, slots: int = 4,
                   frame: Sequence[int] = (1080, 1920, 3),
                   **options: Any) -> AsyncRing:
        """See :meth:`Client.ring`; returns an :class:`~frameprep.AsyncRing`."""
        from .ring import AsyncRing
        ring = AsyncRing(self, slots, frame, **options)
        await ring._register()
        return ring
