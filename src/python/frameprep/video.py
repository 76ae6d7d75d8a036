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
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
from typing import Any, Callable, Iterator, Protocol, Sequence, TypeVar

import numpy as np

from . import _core, _native
from ._core import (DTypeOption, LayoutName, MatrixName, OrderName,
                    ResizeName, RoundingName, Transform, YuvRangeName)


class Connection(Protocol):
    """What a stream needs of its :class:`~frameprep.Client` (this module
    names no class of client.py, which makes the streams)."""

    _s: Any


class Codec(enum.IntEnum):
    """A stream's codec (``FPREP_PIX_H264``, ``FPREP_PIX_HEVC`` in
    protocol.h)."""

    H264 = 10
    """H.264 (AVC), 8-bit 4:2:0."""
    HEVC = 11
    """HEVC (H.265), 8-bit 4:2:0."""


CODECS: dict[str, Codec] = {"h264": Codec.H264, "hevc": Codec.HEVC}
"""The codec names :meth:`Client.video` takes."""


@dataclasses.dataclass(frozen=True)
class VideoFrame:
    """One decoded frame's tensor; unpacks as (tensor, pts, transform)."""

    tensor: np.ndarray[Any, Any]
    """(C, H, W) or (H, W, C) in the stream's dtype: a view of the reply's
    memory (it stays alive while the array does)."""
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

    def _frames(self, res: Any) -> list[VideoFrame]:
        _core.checked(res)
        st = self._stream()
        records = st.frames(res)
        if not records:
            return []
        tensor = np.asarray(st.tensor(res))
        return [VideoFrame(tensor[k], pts,
                           Transform(sx, sy, px, py, w, h))
                for k, (pts, w, h, sx, sy, px, py) in enumerate(records)]

    def send(self, packet: bytes | bytearray | memoryview |
             np.ndarray[Any, Any], pts: int = 0) -> list[VideoFrame]:
        """Sends one access unit (an Annex-B picture: its NAL units, with
        the parameter sets where the stream has them; bytes, a bytearray,
        a memoryview or a uint8 array, whose bytes are sent) with its pts and returns the frames the decoder let out
        after it, in display order: none, one or several. Packets before
        the stream's first IDR/IRAP picture give none.

        Raises :class:`~frameprep.BitstreamError` for a packet the decoder
        cannot decode (the stream then waits for the next IDR/IRAP
        picture), :class:`~frameprep.LimitExceededError` naming the
        daemon's limit (packet bytes, coded size, frames held),
        ``ValueError`` for an empty packet, and the client's transport
        errors."""
        if not isinstance(packet, bytes):
            packet = np.ascontiguousarray(
                packet if isinstance(packet, np.ndarray)
                else np.frombuffer(packet, np.uint8)).reshape(-1).view(
                    np.uint8)
        return self._frames(self._stream().send(packet, pts))

    def flush(self) -> list[VideoFrame]:
        """Returns every frame the decoder still holds (at the end of a
        file, or before a jump); the stream then takes packets again from
        an IDR/IRAP picture."""
        return self._frames(self._stream().flush())

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

    async def send(self, packet: bytes | bytearray | memoryview |
                   np.ndarray[Any, Any], pts: int = 0) -> list[VideoFrame]:
        """See :meth:`VideoStream.send` (the packet must not change until
        it returns)."""
        return await self._run(self._stream.send, packet, pts)

    async def flush(self) -> list[VideoFrame]:
        """See :meth:`VideoStream.flush`."""
        return await self._run(self._stream.flush)

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
