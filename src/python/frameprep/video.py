"""Video streams: H.264 and HEVC access units in, tensors out.

The design is simple: a :class:`VideoStream` is the C client's stream
(``fprep_stream_*``, through :class:`frameprep._native.Stream`) on a
:class:`~frameprep.Client`'s connection. Each packet (one Annex-B access
unit) is one request; its reply carries the frames the decoder let out
after it, in display order (none while B-frames are reordered, one, or
several), each preprocessed as :meth:`Client.preprocess` would a frame of
its size. :func:`read` decodes a whole file with the library's demuxer
(``fprep_demux_*``: libavformat, loaded at run time).

A stream belongs to its client's connection and is used by one thread at
a time. A broken packet raises :class:`~frameprep.BitstreamError`; the
stream stays open and gives frames again from the next IDR (H.264) or
IRAP (HEVC) picture. :class:`AsyncVideoStream`, which
:meth:`AsyncClient.video` opens, is the same stream awaited: each call
runs on the event loop's executor, one at a time in the order they were
awaited.

With ``out=`` (a CUDA tensor of K frames' room) a call's tensors go into
the caller's GPU memory instead of the reply: the daemon's kernel writes
frame k into ``out[k]`` (no copy through the host; the stream must be
decoded on that GPU) and the reply carries only the frames' records. The
tensor is registered once per allocation, by the client's CUDA regions
(:class:`frameprep.cuda.Regions`, as :meth:`Client.preprocess`'s
``out=``), and each call names its own place, so a call without ``out=``
gets its tensors in the reply again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
from typing import (Any, Callable, Generic, Iterator, Protocol, Sequence,
                    TypeVar, overload)

import numpy as np

from . import _core, _native
from ._core import (DTypeOption, LayoutName, MatrixName, OrderName,
                    ResizeName, RoundingName, TensorT, Transform,
                    YuvRangeName)


class Connection(Protocol):
    """What a stream needs of its :class:`~frameprep.Client` (this module
    names no class of client.py, which makes the streams)."""

    _s: Any

    def _cuda_regions(self) -> Any:
        """The connection's CUDA regions (:class:`frameprep.cuda.Regions`),
        for ``out=``."""
        ...


class Codec(enum.IntEnum):
    """A stream's codec (``FPREP_PIX_H264``, ``FPREP_PIX_HEVC`` in
    protocol.h)."""

    H264 = 10
    """H.264 (AVC), 8-bit 4:2:0."""
    HEVC = 11
    """HEVC (H.265), 8-bit 4:2:0."""


CODECS: dict[str, Codec] = {"h264": Codec.H264, "hevc": Codec.HEVC}
"""The codec names :meth:`Client.video` takes."""


Packet = bytes | bytearray | memoryview | np.ndarray[Any, Any]
"""An access unit as :meth:`VideoStream.send` takes it."""

_INLINE_OUT = (0, 0, 0, 0)  # output_loc INLINE: the tensors in the reply


class _Rows:
    """Row k of a described CUDA array that cannot be indexed, as a
    :class:`~frameprep.cuda.CudaTensor` (``rows[k]``)."""

    def __init__(self, dev: Any):
        self._dev = dev

    def __getitem__(self, k: int) -> Any:
        from . import cuda
        d = self._dev
        return cuda.CudaTensor(cuda.DeviceArray(
            d.ptr + k * d.strides[0], d.shape[1:], d.strides[1:], d.typestr,
            d.device, d.strides[0]))


@dataclasses.dataclass(frozen=True)
class VideoFrame(Generic[TensorT]):
    """One decoded frame's tensor; unpacks as (tensor, pts, transform)."""

    tensor: TensorT
    """(C, H, W) or (H, W, C) in the stream's dtype: a numpy view of the
    reply's memory (it stays alive while the array does), or with
    ``out=`` the view ``out[k]`` of the caller's CUDA tensor (valid until
    the caller writes ``out`` again, e.g. passes it to the next call)."""
    pts: int
    """The pts its packet was sent with."""
    transform: Transform
    """Where the decoded frame landed in the tensor; ``src_width`` and
    ``src_height`` are the decoded frame's size."""

    def __iter__(self) -> Iterator[Any]:
        return iter((self.tensor, self.pts, self.transform))


class VideoStream:
    """A video stream on a client (:meth:`Client.video` opens it): send
    access units, receive tensors. A context manager: leaving it closes
    the stream."""

    def __init__(self, client: Connection, codec: Codec, plan: Any,
                 params: bytes | None = None):
        self._client = client
        self._native: _native.Stream | None = _native.Stream(
            client._s.native, plan.native, int(codec), params)
        self._plan = plan
        self.codec = codec
        """The stream's :class:`Codec`."""

    @property
    def id(self) -> int:
        """The stream's id on the daemon (0 once closed)."""
        return self._native.id if self._native is not None else 0

    def _stream(self) -> _native.Stream:
        if self._native is None:
            from .errors import ClosedError
            raise ClosedError("the stream was closed")
        return self._native

    def _place(self, out: Any) -> tuple[tuple[int, int, int, int], Any]:
        """Where the next call's tensors go, and out's DeviceArray (None
        for an Exported): out None the reply; else checked, then its
        allocation's region (registered the first time). Raises
        InvalidRequestError naming the field, before anything is sent."""
        if out is None:
            return _INLINE_OUT, None
        from .errors import InvalidRequestError
        if isinstance(out, np.ndarray):
            raise InvalidRequestError(
                "out is a numpy array, but a stream's out= takes CUDA "
                "memory (a torch CUDA tensor, a CuPy array, any "
                "__cuda_array_interface__ or DLPack CUDA array): leave "
                "out= off to get numpy tensors")
        from . import cuda
        shape = (None,) + tuple(self._plan.shape[1:])
        return cuda.out_place(self._client._cuda_regions(), out, shape,
                              self._plan.typestr)

    def _frames(self, res: Any, out: Any = None,
                dev: Any = None) -> list[VideoFrame[Any]]:
        _core.checked(res)
        st = self._stream()
        records = st.frames(res)
        if not records:
            return []
        tensors: Any
        if out is None:
            tensors = np.asarray(st.tensor(res))
        elif dev is not None and not hasattr(out, "__getitem__"):
            tensors = _Rows(dev)
        else:
            tensors = out
        return [VideoFrame(tensors[k], pts,
                           Transform(sx, sy, px, py, w, h))
                for k, (pts, w, h, sx, sy, px, py) in enumerate(records)]

    @overload
    def send(self, packet: Packet, pts: int = ...,
             out: None = ...) -> list[VideoFrame[np.ndarray[Any, Any]]]: ...

    @overload
    def send(self, packet: Packet, pts: int = ...,
             out: TensorT = ...) -> list[VideoFrame[TensorT]]: ...

    def send(self, packet: Packet, pts: int = 0,
             out: Any = None) -> list[VideoFrame[Any]]:
        """Sends one access unit (an Annex-B picture: its NAL units, with
        the parameter sets where the stream has them; bytes, a bytearray,
        a memoryview or a uint8 array, whose bytes are sent) with its pts
        and returns the frames the decoder let out after it, in display
        order: none, one or several. Packets before the stream's first
        IDR/IRAP picture give none.

        ``out`` None: each frame's tensor is a numpy view of the reply.
        Else a CUDA tensor (PyTorch, CuPy, any ``__cuda_array_interface__``
        or DLPack CUDA array, or a :class:`~frameprep.cuda.Exported` of
        another process's) of shape (K, C, H, W) ((K, H, W, C) for NHWC),
        the stream's dtype, C-contiguous, with room for K >= 1 frames (a
        packet lets out one or two): the daemon writes frame k into
        ``out[k]`` on the GPU and frame k's tensor is that view, complete
        when this returns (no stream synchronisation needed) and valid
        until the caller writes ``out`` again (e.g. passes it to the next
        call). The allocation holding ``out`` is registered on the
        client's connection the first time (as :meth:`Client.preprocess`
        registers its ``out=``); keep it allocated until
        :meth:`Client.release_cuda` or the client closed.

        Raises :class:`~frameprep.BitstreamError` for a packet the decoder
        cannot decode (the stream then waits for the next IDR/IRAP
        picture), :class:`~frameprep.LimitExceededError` naming the
        daemon's limit (packet bytes, coded size, frames held; with
        ``out``: ``out_capacity`` when the packet's frames need more than
        K frames' room: those frames are dropped and the stream goes on),
        ``ValueError`` (:class:`~frameprep.InvalidRequestError`) for an
        empty packet and, before sending, for an ``out`` that is host
        memory (a numpy array) or of another shape, dtype or layout,
        :class:`~frameprep.UnsupportedError` for ``out`` on a daemon that
        decodes the stream on its CPU backend,
        :class:`~frameprep.RegionError` for ``out`` on another GPU than
        the one that decodes it, and the client's transport errors. One
        thread at a time."""
        if not isinstance(packet, bytes):
            packet = np.ascontiguousarray(
                packet if isinstance(packet, np.ndarray)
                else np.frombuffer(packet, np.uint8)).reshape(-1).view(
                    np.uint8)
        place, dev = self._place(out)
        return self._frames(self._stream().send(packet, pts, *place), out,
                            dev)

    @overload
    def flush(self, out: None = ...
              ) -> list[VideoFrame[np.ndarray[Any, Any]]]: ...

    @overload
    def flush(self, out: TensorT = ...) -> list[VideoFrame[TensorT]]: ...

    def flush(self, out: Any = None) -> list[VideoFrame[Any]]:
        """Returns every frame the decoder still holds (at the end of a
        file, or before a jump); the stream then takes packets again from
        an IDR/IRAP picture. ``out`` as for :meth:`send`, with room for
        the frames held (the decoder's reorder depth: up to the daemon's
        max_stream_frames); too little raises
        :class:`~frameprep.LimitExceededError` naming ``out_capacity``
        and those frames are dropped."""
        place, dev = self._place(out)
        return self._frames(self._stream().flush(*place), out, dev)

    def close(self) -> None:
        """Ends the stream on the daemon (frames it still holds are
        dropped: :meth:`flush` first); a second close does nothing."""
        st, self._native = self._native, None
        if st is not None:
            st.close()

    def __enter__(self) -> VideoStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_T = TypeVar("_T")


class AsyncVideoStream:
    """The asyncio twin of :class:`VideoStream` (:meth:`AsyncClient.video`
    opens it): ``await send(packet, pts)``, ``await flush()``, ``await
    close()``, with the same results and exceptions; an async context
    manager. Each call runs the stream's on the loop's executor; calls on
    one stream run one at a time, in the order they were awaited, so
    frames come back in display order."""

    def __init__(self, stream: VideoStream):
        self._stream = stream
        self._lock = asyncio.Lock()
        self.codec = stream.codec
        """The stream's :class:`Codec`."""

    @property
    def id(self) -> int:
        """The stream's id on the daemon (0 once closed)."""
        return self._stream.id

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        loop = asyncio.get_running_loop()
        async with self._lock:
            return await loop.run_in_executor(
                None, functools.partial(fn, *args))

    @overload
    async def send(self, packet: Packet, pts: int = ...,
                   out: None = ...
                   ) -> list[VideoFrame[np.ndarray[Any, Any]]]: ...

    @overload
    async def send(self, packet: Packet, pts: int = ...,
                   out: TensorT = ...) -> list[VideoFrame[TensorT]]: ...

    async def send(self, packet: Packet, pts: int = 0,
                   out: Any = None) -> list[VideoFrame[Any]]:
        """See :meth:`VideoStream.send` (the packet must not change until
        it returns; ``out``, a CUDA tensor, is registered on the client's
        connection the first time: :meth:`AsyncClient.release_cuda`
        unregisters it)."""
        return await self._run(self._stream.send, packet, pts, out)

    @overload
    async def flush(self, out: None = ...
                    ) -> list[VideoFrame[np.ndarray[Any, Any]]]: ...

    @overload
    async def flush(self, out: TensorT = ...) -> list[VideoFrame[TensorT]]: ...

    async def flush(self, out: Any = None) -> list[VideoFrame[Any]]:
        """See :meth:`VideoStream.flush`."""
        return await self._run(self._stream.flush, out)

    async def close(self) -> None:
        """See :meth:`VideoStream.close`."""
        await self._run(self._stream.close)

    async def __aenter__(self) -> AsyncVideoStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def open_stream(client: Connection, codec: str, size: Sequence[int],
                resize: ResizeName, order: OrderName, dtype: DTypeOption,
                layout: LayoutName, scale: float,
                mean: float | Sequence[float], std: float | Sequence[float],
                pad: float, matrix: MatrixName, yuv_range: YuvRangeName,
                rounding: RoundingName,
                params: bytes | None) -> VideoStream:
    """:meth:`Client.video`'s work: checks the codec name and the
    options, then opens the stream."""
    c = CODECS.get(codec)
    if c is None:
        from .errors import InvalidRequestError
        raise InvalidRequestError(
            f"codec {codec!r}: one of {', '.join(CODECS)}")
    plan = _core.plan(size, resize, order, dtype, layout, scale, mean, std,
                      pad, matrix, yuv_range, rounding)
    return VideoStream(client, c, plan, params)


class Demuxer:
    """A file's H.264 or HEVC video as Annex-B access units (the library's
    demuxer: .mp4, .mkv, raw .h264/.hevc). A context manager and an
    iterator of (packet bytes, pts)."""

    def __init__(self, path: str):
        self._d: _native.Demux | None = _native.Demux(path)
        (codec, self.width, self.height, self.frames, fps_num, fps_den,
         tb_num, tb_den) = self._d.info
        self.codec = Codec(codec)
        """The video's :class:`Codec`."""
        self.fps = fps_num / fps_den if fps_num > 0 else 0.0
        """Frames per second the container gives (0.0: unknown)."""
        self.time_base = tb_num / tb_den if tb_den > 0 else 0.0
        """The unit of the packets' pts, in seconds."""

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        while self._d is not None:
            unit = self._d.read()
            if unit is None:
                return
            yield unit

    def close(self) -> None:
        """Closes the file; a second close does nothing."""
        d, self._d = self._d, None
        if d is not None:
            d.close()

    def __enter__(self) -> Demuxer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read(path: str, client: Connection,
         size: Sequence[int] = (640, 640), resize: ResizeName = "letterbox",
         order: OrderName = "rgb", dtype: DTypeOption = "float32",
         layout: LayoutName = "nchw", scale: float = 1 / 255,
         mean: float | Sequence[float] = (0.0, 0.0, 0.0),
         std: float | Sequence[float] = (1.0, 1.0, 1.0), pad: float = 114,
         matrix: MatrixName = "bt601", yuv_range: YuvRangeName = "limited",
         rounding: RoundingName = "float",
         skip_broken: bool = False) -> Iterator[VideoFrame]:
    """Decodes the H.264 or HEVC video of the file at path (.mp4, .mkv,
    raw .h264/.hevc) on the daemon and yields each frame's
    :class:`VideoFrame` in display order, the stream flushed at the end.
    The preprocessing keywords are :meth:`Client.preprocess`'s. client: the
    :class:`~frameprep.Client` whose connection carries the stream (it
    stays open). A broken packet raises
    :class:`~frameprep.BitstreamError` unless skip_broken, when the frames
    resume at the next IDR/IRAP picture.

    Raises :class:`~frameprep.UnsupportedError` when FFmpeg's libraries
    (libavformat.so.59, libavcodec.so.59, libavutil.so.57) are missing,
    :class:`~frameprep.ServerIOError` when the file cannot be read and
    :class:`~frameprep.InvalidRequestError` when it has no H.264 or HEVC
    video."""
    from .errors import BitstreamError
    with Demuxer(path) as dmx:
        name = "h264" if dmx.codec == Codec.H264 else "hevc"
        with open_stream(client, name, size, resize, order, dtype, layout,
                         scale, mean, std, pad, matrix, yuv_range,
                         rounding, None) as st:
            for packet, pts in dmx:
                try:
                    yield from st.send(packet, pts)
                except BitstreamError:
                    if not skip_broken:
                        raise
            yield from st.flush()
