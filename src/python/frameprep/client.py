"""Blocking and asyncio clients of frameprepd.

The design is simple: one nng REQ socket per client, dialled once, and one
nng context per request in flight (contexts are pooled), so any number of
threads, or of asyncio tasks, share a client and the daemon answers their
requests in any order. A request is one nng message holding the 128-byte
header and the frame's bytes (copied once, from the first byte of the view
to its last with its row stride); the reply's tensor is a numpy view of the
reply message, not a copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pynng

from . import _core, errors
from ._core import (DTypeOption, FormatName, LayoutName, MatrixName,
                    OrderName, ResizeName, YuvRangeName)
from .protocol import Kind, Location, Request

if TYPE_CHECKING:
    from .ring import AsyncRing, Ring

DEFAULT_TIMEOUT = 30.0


def _is_cuda(obj: Any) -> bool:
    """Whether obj is a CUDA array (frameprep.cuda; nothing imported)."""
    from .cuda import is_cuda
    return is_cuda(obj)


class _Socket:
    """The REQ socket and its pool of contexts."""

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
        # The users whose socket (file and peer) this client dials, and the
        # checked owner of an ipc:// socket: the one other user a ring may
        # grant its shared memory to (None: tcp://).
        self.trusted = _core.trusted_uids(trust_owner)
        self.owner = _core.check_socket_owner(self.address, self.trusted)
        # Bumped by nng's thread whenever the connection to the daemon
        # closes (it died or restarted): a wait for a reply in shared
        # memory looks at it, so a dead daemon is noticed at once.
        self.lost = 0
        # The uid of the last peer dropped for not being trusted.
        self.refused_peer: int | None = None
        ms = max(1, int(self.timeout * 1000))
        # A restarted daemon is dialled again within 200 ms (nng's backoff
        # would otherwise double without bound while it is away).
        self._sock = pynng.Req0(recv_timeout=ms, send_timeout=ms,
                                resend_time=-1, recv_max_size=0,
                                reconnect_time_min=20,
                                reconnect_time_max=200)
        self._sock.add_post_pipe_remove_cb(self._on_pipe_gone)
        if self.owner is not None:
            self._sock.add_pre_pipe_connect_cb(self._check_peer)
        try:
            self._sock.dial(self.address, block=True)
        except pynng.NNGException as exc:
            self._sock.close()
            raise errors.TransportError(
                f"connecting to {self.address}: {exc}") from None
        if self.refused_peer is not None:
            self._sock.close()
            raise errors.PermissionDeniedError(
                f"connecting to {self.address}: the daemon there runs as "
                f"uid {self.refused_peer}, not as a user this client "
                f"trusts (you, root, frameprep, trust_owner): the "
                f"connection was dropped before anything was sent")
        self._ids = itertools.count(1)
        self._pool: list[_core.Ctx] = []
        self._lock = threading.Lock()
        self._closed = False
        self._limits: dict[str, Any] | None = None
        # The daemon answers EBUSY past max_inflight_per_conn requests in
        # flight on one connection: requests past it wait here instead,
        # for one of the gate's tokens.
        self.gate: queue.SimpleQueue[None] | None = None
        self.agate: asyncio.Semaphore | None = None

    def _on_pipe_gone(self, pipe: Any) -> None:
        self.lost += 1

    def _check_peer(self, pipe: Any) -> None:
        """Drops a connection whose peer (the listening process) runs as
        an untrusted user, before anything is sent on it (the socket's
        path was checked before the dial; this closes the window after)."""
        uid = _core.pipe_peer_uid(pipe)
        if uid is not None and uid not in self.trusted:
            self.refused_peer = uid
            pipe.close()

    def set_limits(self, info: dict[str, Any]) -> None:
        """Keeps the daemon's INFO and, the first time, bounds the requests
        in flight on this connection to its max_inflight_per_conn."""
        self._limits = info
        cap = info.get("max_inflight_per_conn")
        if self.gate is None and isinstance(cap, int) and cap > 0:
            self.agate = asyncio.Semaphore(cap)
            gate: queue.SimpleQueue[None] = queue.SimpleQueue()
            for _ in range(cap):
                gate.put(None)
            self.gate = gate

    def next_id(self) -> int:
        return next(self._ids)

    def ctx_get(self) -> _core.Ctx:
        with self._lock:
            if self._closed:
                raise errors.ClosedError("the client was closed")
            if self._pool:
                return self._pool.pop()
            try:
                return _core.Ctx(self._sock)
            except pynng.NNGException as exc:
                raise _core.transport_error(exc, self.address,
                                            self.timeout) from None

    def ctx_put(self, ctx: _core.Ctx, ok: bool) -> None:
        with self._lock:
            if ok and not self._closed:
                self._pool.append(ctx)
                return
        ctx.close()

    def call(self, head: bytes, body: Any = _core._NULL,
             size: int = 0, gated: bool = False) -> Any:
        """Sends one request (head, then ``size`` bytes at body, a cdata
        pointer) on a pooled context, within the cap on requests in flight
        (unless the caller holds a token of it: gated), and returns the
        reply (an ``nng_msg *`` the caller frees). Raises the transport
        errors."""
        return self._on_ctx(lambda ctx: ctx.exchange(head, body, size),
                            gated)

    def call_shm(self, head: Any, reply_at: int, request_id: int,
                 gated: bool = False, lost: int | None = None) -> Any:
        """:meth:`call` for a request that asks for its reply in shared
        memory at address reply_at (:meth:`_core.Ctx.exchange_shm`):
        returns ``None`` when the header there is the reply, else nng's
        reply (an ``nng_msg *`` the caller frees). Raises
        :class:`_core.DaemonGone` when the connection closed while it
        waited (the daemon died), or had closed since ``s.lost`` was
        lost."""
        ms = max(1, int(self.timeout * 1000))
        return self._on_ctx(
            lambda ctx: ctx.exchange_shm(head, reply_at, request_id, ms,
                                         self, lost), gated)

    def gate_take(self) -> bool:
        """Takes one token of the cap on requests in flight, waiting up to
        the timeout; False when there is no cap (yet). Give it back with
        :meth:`gate_give`."""
        gate = self.gate
        if gate is None:
            return False
        try:
            gate.get(True, self.timeout)
        except queue.Empty:
            raise errors.RequestTimeoutError(
                f"{self.address}: no room for another request in "
                f"flight within {self.timeout:g} s") from None
        return True

    def gate_give(self) -> None:
        """Gives back a token that :meth:`gate_take` took."""
        gate = self.gate
        assert gate is not None
        gate.put(None)

    def _on_ctx(self, exchange: Any, gated: bool = False) -> Any:
        """Runs exchange(ctx) on a pooled context, within the cap on
        requests in flight (unless the caller holds a token: gated); a
        context that failed is closed."""
        took = not gated and self.gate_take()
        try:
            ctx = self.ctx_get()
            try:
                msg = exchange(ctx)
            except BaseException as exc:
                self.ctx_put(ctx, False)
                if isinstance(exc, pynng.NNGException):
                    raise _core.transport_error(exc, self.address,
                                                self.timeout) from None
                raise
            self.ctx_put(ctx, True)
        finally:
            if took:
                self.gate_give()
        return msg

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pool, self._pool = self._pool, []
        for ctx in pool:
            ctx.close()
        self._sock.close()

    @property
    def closed(self) -> bool:
        return self._closed


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
        """Closes the connection; requests still waiting on other threads
        fail with :class:`~frameprep.ClosedError`. Closing twice is a
        no-op. Results already returned stay valid."""
        self._s.close()


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

    Once the daemon's limits are known (the first frame asks for them), at
    most its ``max_inflight_per_conn`` requests are in flight on the
    connection at a time; more threads wait their turn here, within
    ``timeout``, rather than get ``EBUSY``.

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

    def request(self, req: Request, payload: bytes = b"") -> tuple[Any, Any]:
        """Sends a request header (its request_id is assigned here) and an
        optional payload; returns (reply message, :class:`Reply`) after
        checking the status. For protocol-level tools and tests."""
        req.request_id = self._s.next_id()
        head = req.encode()
        body = _core._ffi.from_buffer(payload) if len(payload) else _core._NULL
        rmsg = pynng.Message(self._s.call(head, body, len(payload)))
        rep = _core.reply_of(rmsg)
        _core.check_reply(rep, req.request_id, req.kind)
        return rmsg, rep

    def info(self) -> dict[str, Any]:
        """Asks the daemon what it runs. Returns its INFO lines as a dict
        (version, backend, device, listen, and the limits max_width,
        max_height, max_frame_bytes, max_out_width, max_out_height,
        max_tensor_bytes, max_inflight, ... as ints)."""
        req = Request(kind=Kind.INFO)
        rmsg, rep = self.request(req)
        text = _core.payload_bytes(rmsg, rep).decode("utf-8", "replace")
        info = _core.parse_info(text)
        self._s.set_limits(info)
        return info

    def limits(self) -> dict[str, Any]:
        """The daemon's INFO, fetched once and cached: the limits the
        client checks before sending."""
        if self._s._limits is None:
            self.info()
        assert self._s._limits is not None
        return self._s._limits

    def preprocess(self, frame: Any, size: Sequence[int] = (640, 640),
                   resize: ResizeName = "letterbox", order: OrderName = "rgb",
                   dtype: DTypeOption = "float32",
                   layout: LayoutName = "nchw",
                   scale: float = 1 / 255,
                   mean: float | Sequence[float] = (0.0, 0.0, 0.0),
                   std: float | Sequence[float] = (1.0, 1.0, 1.0),
                   pad: float = 114, format: FormatName | None = None,
                   matrix: MatrixName = "bt601",
                   yuv_range: YuvRangeName = "limited",
                   out: Any = None) -> _core.Result:
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
                          std, pad, matrix, yuv_range)
        if isinstance(out, np.ndarray):
            dst = _numpy_out(out, plan.shape[1:], plan.typestr)
            res = self.preprocess(frame, size, resize, order, dtype, layout,
                                  scale, mean, std, pad, format, matrix,
                                  yuv_range)
            np.copyto(dst, res.tensor[0])
            object.__setattr__(res, "tensor", out)
            return res
        if out is not None or (not isinstance(frame, np.ndarray) and
                               _is_cuda(frame)):
            return self._preprocess_cuda(plan, frame, format, out)
        src = _core.check_frame(frame, format)
        plan.check(src, self.limits())
        s = self._s
        request_id = s.next_id()
        rmsg = _core.OwnedMessage(s.call(
            plan.inline_header(src, request_id),
            _core._ffi.cast("char *", src.addr), src.span))
        rep = _core.reply_of(rmsg)
        _core.check_reply(rep, request_id, Kind.FRAME)
        return _core.make_result(_core.payload_array(rmsg, rep), rep, src)

    def preprocess_batch(self, frames: Sequence[Any], out: Any = None,
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
                         yuv_range: YuvRangeName = "limited") -> Any:
        """Preprocesses N frames (each as :meth:`preprocess` takes it,
        sizes may differ) into one batch: (N, C, H, W) for NCHW, (N, H, W,
        C) for NHWC, frame k in row k. ``out`` None: returns a new numpy
        array; a numpy array of that shape and dtype: fills it and
        returns it; a CUDA tensor of that shape (PyTorch, CuPy): the
        daemon writes each row straight into it (``out[k]``, see
        :meth:`preprocess`), and it is returned. The requests are sent from
        up to 8 threads at once, within the client's in-flight limit.
        Raises :class:`~frameprep.InvalidRequestError` for an ``out`` of
        another shape or dtype (before sending anything), and as
        :meth:`preprocess` (the first failure; rows of other frames may
        be written by then)."""
        plan = _core.plan(size, resize, order, dtype, layout, scale, mean,
                          std, pad, matrix, yuv_range)
        n = len(frames)
        shape = (n,) + tuple(plan.shape[1:])
        if out is None:
            out = np.empty(shape, plan.typestr)
        if tuple(getattr(out, "shape", ())) != shape:
            raise errors.InvalidRequestError(
                f"out shape {tuple(getattr(out, 'shape', ()))} is not the "
                f"batch's {shape}")
        if isinstance(out, np.ndarray):
            _numpy_out(out, shape, plan.typestr)

        def one(k: int) -> None:
            self.preprocess(frames[k], size, resize, order, dtype, layout,
                            scale, mean, std, pad, format, matrix, yuv_range,
                            out=out[k])

        if n <= 1:
            for k in range(n):
                one(k)
            return out
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(min(n, 8)) as pool:
            for f in [pool.submit(one, k) for k in range(n)]:
                f.result()
        return out

    def _cuda_regions(self) -> Any:
        from . import cuda
        regions = getattr(self, "_cuda", None)
        if regions is None:
            regions = self._cuda = cuda.Regions(
                lambda req: self.request(req)[1])
        return regions

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
        if isinstance(frame, np.ndarray):
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
        rmsg, rep = self.request(req, payload)
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
            tensor = _core.payload_array(rmsg, rep)
        return _core.make_result(tensor, rep, src)

    def ring(self, slots: int = 4, frame: Sequence[int] = (1080, 1920, 3),
             doorbell: bool = True, **options: Any) -> Ring:
        """Creates a shared-memory ring on this connection (ipc:// only):
        ``slots`` slots, each holding a frame of up to ``frame`` = (H, W)
        or (H, W, C) uint8 pixels and the tensor of ``options`` (the
        keyword arguments of :meth:`preprocess`: size, resize, order,
        dtype, layout, scale, mean, std, pad, format). With ``doorbell``
        false the ring's requests always go over the socket. See
        :class:`~frameprep.Ring`."""
        from .ring import Ring
        return Ring(self, slots, frame, doorbell=doorbell, **options)


class AsyncClient(_Connection):
    """An asyncio connection to frameprepd: the methods of :class:`Client`,
    awaited, so one thread keeps many frames in flight (each request rides
    its own nng context). Same arguments, results and exceptions as
    :class:`Client`, except CUDA tensors (``out=`` and CUDA frames), which
    only :class:`Client` takes; the constructor dials synchronously. Use ``async with``
    or call :meth:`close`."""

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def _roundtrip(self, request_id: int, kind: int,
                         msg: Any) -> tuple[Any, Any]:
        s = self._s
        gate = s.agate
        async with gate if gate is not None else contextlib.nullcontext():
            ctx = s.ctx_get()
            ok = False
            try:
                # nng's receive timeout ends the wait; wait_for is a
                # backstop.
                await ctx.ctx.asend_msg(msg)
                rmsg = await asyncio.wait_for(ctx.ctx.arecv_msg(),
                                              s.timeout + 5)
                ok = True
            except pynng.NNGException as exc:
                raise _core.transport_error(exc, s.address,
                                            s.timeout) from None
            except asyncio.TimeoutError:
                raise errors.RequestTimeoutError(
                    f"no reply from {s.address} within "
                    f"{s.timeout:g} s") from None
            finally:
                s.ctx_put(ctx, ok)
        rep = _core.reply_of(rmsg)
        _core.check_reply(rep, request_id, kind)
        return rmsg, rep

    async def request(self, req: Request,
                      payload: bytes = b"") -> tuple[Any, Any]:
        """See :meth:`Client.request`."""
        req.request_id = self._s.next_id()
        return await self._roundtrip(
            req.request_id, req.kind,
            _core.message(req.encode(), payload, len(payload)))

    async def info(self) -> dict[str, Any]:
        """See :meth:`Client.info`."""
        rmsg, rep = await self.request(Request(kind=Kind.INFO))
        text = _core.payload_bytes(rmsg, rep).decode("utf-8", "replace")
        info = _core.parse_info(text)
        self._s.set_limits(info)
        return info

    async def limits(self) -> dict[str, Any]:
        """See :meth:`Client.limits`."""
        if self._s._limits is None:
            await self.info()
        assert self._s._limits is not None
        return self._s._limits

    async def preprocess(self, frame: np.ndarray[Any, Any],
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
                         yuv_range: YuvRangeName = "limited"
                         ) -> _core.Result:
        """See :meth:`Client.preprocess`."""
        plan = _core.plan(size, resize, order, dtype, layout, scale, mean,
                          std, pad, matrix, yuv_range)
        src = _core.check_frame(frame, format)
        plan.check(src, await self.limits())
        request_id = self._s.next_id()
        msg = _core.message(plan.inline_header(src, request_id),
                            _core._ffi.cast("char *", src.addr), src.span)
        rmsg, rep = await self._roundtrip(request_id, Kind.FRAME, msg)
        return _core.make_result(_core.payload_array(rmsg, rep), rep, src)

    async def ring(self, slots: int = 4,
                   frame: Sequence[int] = (1080, 1920, 3),
                   **options: Any) -> AsyncRing:
        """See :meth:`Client.ring`; returns an :class:`~frameprep.AsyncRing`."""
        from .ring import AsyncRing
        ring = AsyncRing(self, slots, frame, **options)
        await ring._register()
        return ring
