"""Shared-memory rings: frames and tensors that never cross the socket.

The design is simple: the ring is the C library's (``fprep_ring`` of
``frameprep/ring.h``, bound as ``_native.CRing``): one shared-memory
region registered with the daemon, cut into ``slots`` equal slots, each a
tensor area with the reply header after it, then a page-aligned frame
area, and after the slots a doorbell area of one entry per slot (up to
64). The C ring hands out leases on slots (take, hold, release, cancel),
sends a slot's request (through its doorbell entry while the daemon
watches the doorbell, else over the socket) and waits for the reply in
the slot with the GIL released, caps the requests in flight with the
client's gate, and registers a new region of the same layout when the
daemon restarted (a reply that may stem from the region before is never
taken). This module adds what Python needs: numpy views of a slot's
frame and tensor that hold the slot while they live, and the errors.

Lifetimes are explicit: :meth:`Ring.close` (or the context manager)
unregisters the region; its memory stays mapped while a result or an
array viewing it lives. A slot belongs to whoever holds it (a frame
reserved by :meth:`Ring.next_frame`, a request in flight, a
:class:`RingResult` not yet released, a numpy array viewing a result's
tensor) and is never handed out again before it is given back: once its
result is released and no array views its tensor. A released result's
``tensor`` raises :class:`~frameprep.ClosedError`, so no array read after
``release()`` can show another frame's tensor. A holder that is
garbage-collected without giving it back gives it back then, with a
``ResourceWarning``. A caller that asks for a slot while it holds every
slot itself, none in flight, would wait for ever: it gets
:class:`~frameprep.RingFullError` at once.

Whole frames go in one call: ``Ring.next_frame`` and ``Ring.preprocess``
are ``_native.RingCore``'s, which reserve a slot, or copy an array of the
frame's shape into a free one, send the request prepared for a whole
frame (``CRing.prepare``) and make the result in C. Anything else (a
crop, a frame of another shape or ring, no free slot at once) goes
through the Python steps here, over the same C ring. A result's
``release()``, ``timings`` and ``with`` block are
``_native.RingResultCore``'s.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np
import numpy.typing as npt

from . import _core, _native, errors

if TYPE_CHECKING:
    from typing_extensions import Buffer

_set = object.__setattr__
_new_ring_result = object.__new__
# A slot is free, reserved by next_frame() (its frame not yet sent),
# taken (in flight) or held by its result and the arrays viewing its
# tensor (enum fprep_slot_state).
_RESERVED, _TAKEN, _HELD = 1, 2, 3
# A lease on a slot: (slot, ticket, epoch), as CRing.take gives it.
_Lease = tuple[int, int, int]


class _Owner(Protocol):
    """What a :class:`Ring` uses of its client (a Client): its socket
    (the C client, the in-flight gate, the limits it read), its timeout
    and limits. The client makes its rings; a ring never names the client
    class."""

    _s: Any

    @property
    def timeout(self) -> float: ...

    def limits(self) -> dict[str, Any]: ...


class _AsyncOwner(Protocol):
    """What an :class:`AsyncRing` uses of its client (an AsyncClient)."""

    _s: Any

    @property
    def timeout(self) -> float: ...

    async def limits(self) -> dict[str, Any]: ...


# What holds one slot of a ring (_native.Hold): a frame reserved by
# next_frame() or a result's tensor. numpy arrays made from it (its
# array(), or np.asarray through its __array_struct__) keep it alive, so
# the slot stays held while the holder or any view of it lives, and the
# ring's memory stays mapped. A reserved frame's holder gives the slot
# back at cancel() or hands it on when sent; a result's when it is gone
# after the result's release() (which lets go of it and of the tensor:
# the last view gone, the holder goes). Its ``ring`` is None once it no
# longer holds the slot; one that is garbage-collected holding it
# unreleased gives it back then, with a ResourceWarning. The C ring hands
# slots out under its own mutex, so neither needs the GIL's order.
_Hold = _native.Hold


def _hold_of(frame: Any) -> _Hold | None:
    """The holder of a frame reserved by next_frame() (or of a view of
    one), or None. (numpy makes the holder an array's base, or the first
    of a (holder, capsule) tuple that is the base: numpy 1.x.)"""
    b: Any = getattr(frame, "base", None)
    for _ in range(8):
        t = type(b)
        if t is tuple:
            b = b[0]
            t = type(b)
        if t is _Hold:
            return b  # type: ignore[no-any-return]
        if not isinstance(b, np.ndarray):
            return None
        b = b.base
    return None


class RingFrame(np.ndarray):  # type: ignore[type-arg]
    """A frame area reserved in a ring's slot by :meth:`Ring.next_frame`:
    a writable uint8 numpy array (views of it, such as crops, are
    RingFrames too). Send it (or a crop of it) with :meth:`Ring.preprocess`,
    which hands the slot on to the result; or give the slot back unsent
    with :meth:`cancel`. As a context manager (``with ring.next_frame() as
    buf:``) it gives the slot back at the end unless it was sent, also
    when the block raises. A reserved frame that is garbage-collected
    unsent gives its slot back with a ``ResourceWarning``."""

    def cancel(self) -> None:
        """Gives the slot back unsent; no-op once sent or cancelled. The
        array must not be written after that."""
        hold = _hold_of(self)
        if hold is not None:
            hold.cancel()

    def __enter__(self) -> RingFrame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class RingResult(_native.RingResultCore, _core.Result):
    """A :class:`~frameprep.Result` of a ring: its tensor views the
    ring's slot (no copy), which the ring hands to nobody else while the
    result is unreleased or any numpy array views that tensor.

    The contract: ``r.tensor`` may be read until :meth:`release` (or the
    end of the ``with`` block); after that it raises
    :class:`~frameprep.ClosedError`. An array taken from it before
    (``t = r.tensor``, a slice, ``np.asarray``, ``torch.from_numpy(t)``,
    a DLPack capsule) keeps the slot, so it keeps this frame's values
    for as long as it lives; the slot goes back to the ring when the
    result is released and the last such array is gone (at once on
    release when there is none). Copy what you keep (``r.tensor.copy()``)
    so that slots come back: a caller that asks for a slot while it holds
    every slot itself gets :class:`~frameprep.RingFullError`. A result
    (or a view of its tensor) garbage-collected unreleased gives the slot
    back then, with a ``ResourceWarning``.

    ``release()``, ``timings`` and the ``with`` block are
    _native.RingResultCore's, in C (the calls made for every frame)."""

    __slots__ = ("_hold", "_tensor")
    _hold: _Hold | None
    _tensor: np.ndarray[Any, Any] | None

    @property
    def tensor(self) -> np.ndarray[Any, Any]:  # type: ignore[override]
        """The tensor: a numpy view of the slot (made when first read),
        which keeps the slot held while it lives. Raises
        :class:`~frameprep.ClosedError` once the result is released."""
        t = self._tensor
        if t is None:
            hold = self._hold
            if hold is None:
                raise errors.ClosedError(
                    "the ring result was released: its tensor is no "
                    "longer readable through it (read or copy it before "
                    "release(); an array taken before keeps the slot)")
            t = hold.array(np.ndarray)
            object.__setattr__(self, "_tensor", t)
        return t

    if TYPE_CHECKING:
        # RingResultCore's, in C (see its docstrings).
        def release(self) -> None: ...

        @property
        def timings(self) -> _core.Timings: ...

        def __enter__(self) -> RingResult: ...

        def __exit__(self, *exc: object) -> None: ...

    async def __aenter__(self) -> RingResult:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Releases the result (``async with await ring.preprocess(f) as
        r:``, the same as ``with``)."""
        self.release()

    @property
    def released(self) -> bool:
        """Whether the result was released (its slot goes back once no
        array views its tensor)."""
        return self._hold is None

    def __repr__(self) -> str:
        if self._hold is None:
            return f"RingResult(released, request_id={self.request_id})"
        return super().__repr__()


# What CRing.next_frame and CRing.send make (the ring's whole frames in
# one call each).
_native.set_ring_classes(RingFrame, RingResult, _core.Timings)


class _RingBase:
    """What :class:`Ring` and :class:`AsyncRing` share: the layout, the C
    ring and the Python steps over it."""

    # Whether the ring keeps a doorbell area after its slots (protocol.h,
    # "Doorbells"), one entry for each of its first 64 slots.
    _doorbell = False
    _c: Any
    _client: Any  # a Ring's _Owner, an AsyncRing's _AsyncOwner

    def __init__(self, slots: int, frame: Sequence[int],
                 options: dict[str, Any]):
        fmt = options.pop("format", None)
        self._opts = _core.Options.make(**options)
        self._plan = _core.Plan(self._opts)
        self._format = fmt
        shape = tuple(int(v) for v in frame)
        if len(shape) == 2:
            shape = shape + (1,)
        if (len(shape) != 3 or shape[2] not in (1, 3, 4) or
                min(shape) < 1):
            raise errors.InvalidRequestError(
                f"ring frame {tuple(frame)} is not (H, W) or (H, W, C) "
                f"with C in 1, 3, 4")
        if int(slots) < 1:
            raise errors.InvalidRequestError(f"ring slots {slots} < 1")
        self.slots = int(slots)
        """The number of slots (frames in flight at most)."""
        self.frame_shape = shape if shape[2] != 1 else shape[:2]
        """A slot's frame: (H, W, C), or (H, W) for one channel."""
        self.frame_bytes = shape[0] * shape[1] * shape[2]
        """A slot's frame in bytes (uint8 pixels)."""
        self.tensor_bytes = self._opts.tensor_bytes
        """A slot's tensor in bytes."""
        self.size = 0
        """The shared memory's size in bytes: the slots, page-aligned, and
        the doorbell area where the ring has one."""
        self._c = None
        self._closed = False
        self._lock = threading.Lock()
        req = self._opts.request()
        req.shm_reply = True  # the reply lands in the slot
        self._native = req.native()

    def _free_hook(self) -> Any:
        """What to call (any thread) when a slot comes free, or None."""
        return None

    def _open(self, gate: Any) -> Any:
        """Opens the C ring on the client's connection (blocking)."""
        return _native.CRing(self._client._s.native, self.slots,
                             self.frame_bytes, self.tensor_bytes,
                             self._doorbell, gate, self._client.timeout)

    def _install(self, c: Any, limits: dict[str, Any]) -> None:
        """Takes c as the ring's C ring: the layout of its arrays and,
        when a whole frame passes the daemon's limits, its request."""
        dt = np.dtype(self._plan.typestr)
        c.layout(tuple(self.frame_shape), tuple(self._opts.shape), dt.kind,
                 dt.itemsize, self._free_hook())
        whole = c.frame_view(0, c.epoch)[:self.frame_bytes].reshape(
            self.frame_shape)
        try:
            src = _core.check_frame(whole, self._format)
            self._plan.check(src, limits)
        except errors.FrameprepError:
            pass  # every request of a whole frame says why
        else:
            u, uo, vo = src.planes
            c.prepare(self._native, src.span, src.format, src.width,
                      src.height, src.stride, u, uo, vo)
        self.size = c.size
        self._c = c

    @property
    def _free(self) -> list[int]:
        """The free slots, least recently used first."""
        return self._c.free()  # type: ignore[no-any-return]

    @property
    def region_id(self) -> int:
        """The id the daemon gave the ring's region (it changes when the
        ring registers anew after a daemon restart)."""
        c = self._c
        return int(c.region_id) if c is not None else 0

    def _frame_view(self, lease: _Lease,
                    shape: Sequence[int] | None) -> RingFrame:
        """A reserved frame for the lease: a RingFrame over a holder."""
        if shape is not None:
            shape = tuple(int(v) for v in shape)
            n = 1
            for v in shape:
                n *= v
            if (n > self.frame_bytes or len(shape) not in (2, 3) or
                    min(shape) < 1):
                self._c.release(*lease)
                raise errors.InvalidRequestError(
                    f"frame shape {shape} does not fit the ring's slot of "
                    f"{self.frame_shape}")
        hold = self._c.frame_hold(lease, self)
        if shape is not None and shape != self.frame_shape:
            hold.reshape(shape)
        return hold.array(RingFrame)  # type: ignore[no-any-return]

    def _claim(self, hold: _Hold | None) -> _Lease | None:
        """The lease of hold when it is a frame reserved on this ring and
        not yet sent (its slot is then in flight, the holder's no more),
        else None."""
        if hold is None or not self._c.claim(hold):
            return None
        return (hold.slot, hold.ticket, hold.epoch)

    def _check_copy(self, src: _core.Source) -> None:
        if src.array.size > self.frame_bytes:
            raise errors.LimitExceededError(
                f"frame of {src.array.size} bytes is larger than the "
                f"ring's slot of {self.frame_bytes}")

    def _place(self, lease: _Lease, src: _core.Source,
               hold: _Hold | None) -> tuple[_core.Source, int]:
        """src as it lies in the lease's frame area, and its offset there:
        a reserved frame's (hold) where it lies, anything else copied
        (packed) to the area's start."""
        if hold is not None:
            off = src.address() - hold.address
            if 0 <= off and off + src.span <= self.frame_bytes:
                return src, off
        self._check_copy(src)
        a = src.array
        dst = self._c.frame_view(lease[0], lease[2])[:a.size].reshape(
            a.shape)
        np.copyto(dst, a)
        return _core.check_frame(dst, self._format), 0

    def _request(self, lease: _Lease, src: _core.Source,
                 off: int) -> tuple[Any, int]:
        """Sends the lease's request for src, off bytes into its frame
        area, and waits for the reply (GIL released): (Result, epoch)."""
        u, uo, vo = src.planes
        return self._c.request(  # type: ignore[no-any-return]
            lease, self._native, off, src.span, src.format, src.width,
            src.height, src.stride, u, uo, vo)

    def _result(self, lease: _Lease, res: Any,
                src: _core.Source) -> RingResult:
        """The result of the lease's slot (now held by it): its tensor
        views the slot through a holder."""
        _core.checked(res)
        out = _new_ring_result(RingResult)
        _set(out, "_hold", self._c.result_hold(lease, self))
        _set(out, "_tensor", None)
        _set(out, "request_id", res.request_id)
        _set(out, "_res", res)
        _set(out, "_src_width", src.width)
        _set(out, "_src_height", src.height)
        _set(out, "_reply", None)
        _set(out, "_transform", None)
        _set(out, "_timings", None)
        return out

    def _full(self, who: str) -> errors.RingFullError:
        """The error for a caller that holds every slot itself."""
        return errors.RingFullError(
            f"the ring has {self.slots} slot{'s' if self.slots != 1 else ''}"
            f" and {who} holds every one (results not released, arrays "
            f"viewing released results' tensors, frames reserved and not "
            f"sent), none in flight: no slot can come free. Release "
            f"results and drop views of their tensors (copy what you "
            f"keep), or make the ring larger than the results held at "
            f"once")

    def _timed_out(self) -> errors.RequestTimeoutError:
        return errors.RequestTimeoutError(
            f"no free ring slot within {self._client.timeout:g} s: every "
            f"slot is held (release results when done)")

    def close(self) -> None:
        """Unregisters the region (best effort). Requests on the ring must
        have finished; results still held keep the memory mapped (reading
        them is safe) but the daemon no longer writes there. Closing
        twice is a no-op."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._c is not None:
            self._c.close()


class Ring(_native.RingCore, _RingBase):
    """A ring of shared-memory slots on a :class:`~frameprep.Client`
    (create it with :meth:`Client.ring`), for the zero-copy path over
    ``ipc://``.

    Each slot holds one frame of up to ``frame_shape`` uint8 pixels (a YUV
    frame of ``format`` nv12, i420 or yuyv as the 2-D array OpenCV takes)
    and one tensor of the ring's options. The ring hands out the least
    recently used free slot, and is safe to share between threads.

    Results hold their slot: ``with ring.preprocess(frame) as r:`` (or
    ``r.release()`` when done) — until then the slot is handed to nobody
    else, so ``r.tensor`` (a numpy view of the slot, not a copy) keeps its
    values. After that ``r.tensor`` raises
    :class:`~frameprep.ClosedError`; an array taken from it before keeps
    the slot (and its values) until the array is gone (see
    :class:`RingResult`). A thread that wants a slot while all are held
    waits for one, up to the client's timeout
    (:class:`~frameprep.RequestTimeoutError`), unless it holds every slot
    itself (none in flight): then it gets
    :class:`~frameprep.RingFullError` at once, naming the slot count.
    Give a ring at least as many slots as results held at once; a result
    handed to another thread to release still counts as its maker's.

    Writing in place: ``buf = ring.next_frame()`` reserves a slot and
    returns a writable :class:`RingFrame` (H, W, C) of its frame area;
    write the frame there (a decoder's output, ``cv2.resize(..., dst=buf)``,
    ``buf[:] = ...``) and pass ``buf`` (or a crop of it) to
    :meth:`preprocess`, which sends it without a copy and hands the slot to
    the result. ``buf.cancel()`` gives an unsent slot back (``with
    ring.next_frame() as buf:`` does on leaving the block, on an exception
    too). Any other array given to :meth:`preprocess` is copied into a free
    slot.

    At most the client's in-flight limit (the daemon's
    ``max_inflight_per_conn``) of the client's requests, the ring's
    included, are in flight at a time; more wait their turn.

    Daemon restarts: when the connection to the daemon closes (noticed at
    once by a request waiting in the slot or the doorbell), or the daemon
    no longer knows the ring's region, the ring registers a new region of
    the same layout (the frames and held tensors stay in the old memory,
    still mapped) and sends the request again; a reply that may stem from
    before the restart is never taken (the C ring's ``fprep_ring_send``).

    Doorbell: while the daemon polls for requests (it spins: frameprepd
    ``--spin-us``, on by default with a GPU), the requests of the ring's
    first 64 slots are posted in a doorbell area of the ring's memory
    (protocol.h, "Doorbells") instead of sent over the socket, so that no
    nng thread stands between the call and the daemon's loop; while it
    sleeps, they are posted there too and the area's wake word is rung
    (futex(2)), which wakes the daemon's loop through one thread of its
    own. A daemon whose kernel lacks futex_waitv(2) arms no wake word:
    then a request that finds it asleep goes over the socket. The results
    are the same either way.
    """

    _doorbell = True
    _client: _Owner

    def __init__(self, client: _Owner, slots: int, frame: Sequence[int],
                 doorbell: bool = True, **options: Any):
        if not doorbell:
            self._doorbell = False
        super().__init__(slots, frame, options)
        self._client = client
        limits = client.limits()  # makes the client's gate
        self._install(self._open(client._s.gate), limits)

    def __enter__(self) -> Ring:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self, state: int) -> _Lease:
        got = self._c.take(state, self._client.timeout)
        if got is False:
            raise self._full("this thread")
        if got is None:
            raise self._timed_out()
        return got  # type: ignore[no-any-return]

    if TYPE_CHECKING:
        # RingCore's, in C (see their docstrings there): a whole frame in
        # one call (CRing.next_frame, CRing.send), else _next_frame or
        # _preprocess.
        def next_frame(self,
                       shape: Sequence[int] | None = None) -> RingFrame:
            """Reserves a free slot and returns a writable uint8
            :class:`RingFrame` of its frame area, of shape ``shape``
            (default ``frame_shape``; at most the slot's bytes). Pass it
            to :meth:`preprocess`, or give it back with its ``cancel()``.
            Waits up to the client's timeout for a free slot
            (:class:`~frameprep.RequestTimeoutError`)."""

        def preprocess(self, frame: npt.NDArray[Any] | Buffer
                       ) -> RingResult:
            """Preprocesses a frame through the ring: a frame from
            :meth:`next_frame` (or a crop of one) as it lies, any other
            uint8 array (H, W[, C], or a YUV frame of the ring's format)
            after copying it into a free slot. Returns a
            :class:`RingResult` whose tensor views the slot, held until
            the result is released. Raises as :meth:`Client.preprocess`,
            and :class:`~frameprep.LimitExceededError` for a frame larger
            than a slot."""

    def _next_frame(self, shape: Sequence[int] | None) -> RingFrame:
        """next_frame, step by step."""
        return self._frame_view(self._take(_RESERVED), shape)

    def _preprocess(self, frame: np.ndarray[Any, Any]) -> RingResult:
        """preprocess, step by step."""
        hold = _hold_of(frame)
        lease = self._claim(hold)
        if lease is None:
            hold = None
            src = _core.check_frame(frame, self._format)
            self._check_copy(src)
            lease = self._take(_TAKEN)
        try:
            if hold is not None:
                src = _core.check_frame(frame, self._format)
            used, off = self._place(lease, src, hold)
            s = self._client._s
            self._plan.check(used, s._limits or self._client.limits())
            res, epoch = self._request(lease, used, off)
            return self._result((lease[0], lease[1], epoch), res, used)
        except BaseException:
            self._c.release(*lease)
            raise


class AsyncRing(_RingBase):
    """The asyncio form of :class:`Ring`, made by :meth:`AsyncClient.ring`:
    ``await ring.next_frame()``, ``await ring.preprocess(frame)``, ``await
    ring.aclose()`` or ``async with``. Same slots, holders, lifetimes,
    errors and re-registration after a daemon restart; its requests go over
    the socket (no doorbell), each waited for on a thread of the loop's
    executor while the loop goes on. One event loop at a time.

    A task that wants a slot while all are held waits for one (up to the
    client's timeout) while some holder is a task still running (which
    may release it), and gets :class:`~frameprep.RingFullError` at once
    when every slot is held by itself or by tasks that are done (their
    results returned and not released, as in ``asyncio.gather`` of more
    requests than slots): gather at most ``slots`` at a time, or release
    each result in the task that made it."""

    _client: _AsyncOwner

    def __init__(self, client: _AsyncOwner, slots: int,
                 frame: Sequence[int], **options: Any):
        self._freed_event = asyncio.Event()
        super().__init__(slots, frame, options)
        self._client = client
        # Per slot, the task that reserved it or holds its result, with
        # the slot's ticket then.
        self._holders: dict[int, tuple[int, asyncio.Task[Any] | None]] = {}

    async def _register(self) -> None:
        """Opens the C ring (on a thread of the loop's executor). Its
        requests take none of the client's tokens: an AsyncClient's are
        the loop's (its gate is for blocking calls)."""
        limits = await self._client.limits()
        loop = asyncio.get_running_loop()
        self._install(await loop.run_in_executor(None, self._open, None),
                      limits)

    async def __aenter__(self) -> AsyncRing:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _free_hook(self) -> Any:
        # The event's method, not the ring's: the C ring keeps it.
        return self._freed_event.set

    def _held_by(self, k: int, ticket: int) -> None:
        """Slot k (ticket) is reserved or held by the current task."""
        self._holders[k] = (ticket, asyncio.current_task())

    def _stuck(self) -> bool:
        """Whether every slot is reserved or held (none free or in flight)
        by the current task or by tasks that are done: none can come free
        while the current task waits (one held by a task still running
        may)."""
        me = asyncio.current_task()
        for k, (state, ticket) in enumerate(self._c.states()):
            if state not in (_RESERVED, _HELD):
                return False
            got = self._holders.get(k)
            if got is None or got[0] != ticket:
                return False
            task = got[1]
            if task is not me and (task is None or not task.done()):
                return False
        return True

    async def _take(self, state: int) -> _Lease:
        deadline = time.monotonic() + self._client.timeout
        while True:
            # Cleared first: a slot freed after the look sets it again.
            self._freed_event.clear()
            # Not the thread's check: every task of the loop is on one
            # thread; _stuck looks at the tasks.
            got = self._c.take(state, 0.0, False)
            if got:
                self._held_by(got[0], got[1])
                return got  # type: ignore[no-any-return]
            if self._stuck():
                raise self._full("this task (with tasks that are done)")
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timed_out()
            # A slot given back on another thread (a holder collected
            # there) sets the event unsafely for asyncio: look again soon.
            try:
                await asyncio.wait_for(self._freed_event.wait(),
                                       min(left, 0.05))
            except asyncio.TimeoutError:
                pass

    async def next_frame(self,
                         shape: Sequence[int] | None = None) -> RingFrame:
        """See :meth:`Ring.next_frame`."""
        return self._frame_view(await self._take(_RESERVED), shape)

    async def preprocess(self, frame: npt.NDArray[Any] | Buffer
                         ) -> RingResult:
        """See :meth:`Ring.preprocess`."""
        limits = await self._client.limits()
        hold = _hold_of(frame)
        src = _core.check_frame(frame, self._format)
        lease = self._claim(hold)
        if lease is None:
            hold = None
            self._check_copy(src)
            lease = await self._take(_TAKEN)
        try:
            used, off = self._place(lease, src, hold)
            self._plan.check(used, limits)
            loop = asyncio.get_running_loop()
            res, epoch = await loop.run_in_executor(
                None, self._request, lease, used, off)
            self._held_by(lease[0], lease[1])
            return self._result((lease[0], lease[1], epoch), res, used)
        except BaseException:
            self._c.release(*lease)
            raise

    async def aclose(self) -> None:
        """See :meth:`Ring.close`."""
        self.close()
