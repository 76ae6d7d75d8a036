"""Shared-memory rings: frames and tensors that never cross the socket.

The design is simple: the memory is one region of the C library
(``fprep_region_open``: a POSIX shared-memory object registered with the
daemon and unlinked at once, open to the daemon's user through an ACL
entry when it runs as another), cut into ``slots`` equal slots, each a
tensor area with the reply header after it, then a page-aligned frame
area, and after the slots a doorbell area of one entry per slot (up to
64). Requests go through ``fprep_region_request``: slot k's request is
posted in entry k while the daemon watches the doorbell, else sent over
the socket, and its reply header lands in the slot. A request
names (region, offset, length) for its frame and for its tensor; the daemon
reads the frame in place and writes the tensor in place.

Lifetimes are explicit: :meth:`Ring.close` (or the context manager)
unregisters the region and unmaps it. A slot belongs to whoever holds it
(a frame reserved by :meth:`Ring.next_frame`, a request in flight, a
:class:`RingResult` not yet released, a numpy array viewing a result's
tensor) and is never handed out again before it is given back: once its
result is released and no array views its tensor. A released result's
``tensor`` raises :class:`~frameprep.ClosedError`, so no array read after
``release()`` can show another frame's tensor. A holder that is
garbage-collected without giving it back gives it back then, with a
``ResourceWarning``. A caller that asks for a slot while it holds every
slot itself, none in flight, would wait for ever: it gets
:class:`~frameprep.RingFullError` at once.

When the daemon restarts (its connection closes: the region and the
doorbell went with it), the ring makes a new region of the same layout,
registers it and sends the requests again there; a reply that may stem
from the region before is never accepted.

Whole frames go in one call: once a request of a :class:`Ring`
succeeded, its slot table (``_native.Slots``, over the C library's
``fprep_slots`` of ``frameprep/ring.h``) is armed with that
registration, and ``Slots.next_frame`` and ``Slots.send`` do in C what
the Python steps here do for a reserved whole frame or an array of the
frame's shape (take the slot, copy, send the slot's prepared request,
make the result). Whatever else, or anything unusual on the way (no free
slot or in-flight token at once, a lost connection, a re-registration
begun meanwhile: ``_recover`` disarms), goes through the Python steps.
The calls made for every frame bind straight to C: ``Ring.next_frame``
and ``Ring.preprocess`` are ``_native.RingCore``'s (which call the
Python steps when the slot table leaves the frame to them), a
result's ``release()``, ``timings`` and ``with`` block
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
from .protocol import REPLY_HEADER_SIZE

if TYPE_CHECKING:
    from typing_extensions import Buffer

_U8 = np.dtype(np.uint8)
_set = object.__setattr__
_new_ring_result = object.__new__
_PAGE = 4096
# A slot is free, reserved by next_frame() (its frame not yet sent),
# taken (in flight) or held by its result and the arrays viewing its
# tensor (the states of _native.Slots).
_RESERVED, _TAKEN, _HELD = 1, 2, 3
# How often a request is sent again after the daemon's connection closed
# or its region was unknown (each time after the ring registered anew).
_ATTEMPTS = 4
_DB_HEADER = int(_native.constants["FPREP_DOORBELL_HEADER_SIZE"])
_DB_ENTRY = int(_native.constants["FPREP_DOORBELL_ENTRY_SIZE"])
_DB_MAX = int(_native.constants["FPREP_DOORBELL_ENTRIES_MAX"])
_EREGION = int(_native.constants["FPREP_EREGION"])


def _round_page(n: int) -> int:
    return (n + _PAGE - 1) // _PAGE * _PAGE


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
# the slot stays held while the holder or any view of it lives. A
# reserved frame's holder gives the slot back at cancel() or hands it on
# when sent; a result's when it is gone after the result's release()
# (which lets go of it and of the tensor: the last view gone, the holder
# goes). Its ``ring`` is None once it no longer holds the slot; one that
# is garbage-collected holding it unreleased gives it back then, with a
# ResourceWarning. The slot table (_native.Slots) hands slots out under
# its own mutex, so neither needs the GIL's order.
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


# What Slots.next_frame and Slots.send make (the ring's whole frames in
# one call each while the ring's registration is armed: Ring._arm).
_native.set_ring_classes(RingFrame, RingResult, _core.Timings)


class _Map:
    """One registration of the ring's memory: the C region (its mapping
    lives while arrays view it), its id, its bytes, the per-slot frame
    views and array interfaces, and the client's lost connections when it
    was registered (a change means the daemon forgot it). A daemon restart
    makes a new one; the old mapping stays alive while arrays view it."""

    __slots__ = ("region", "buf", "base", "region_id", "lost", "frames",
                 "slot_srcs", "slot_args", "slot_form", "checked",
                 "doorbell")

    def __init__(self, region: Any) -> None:
        self.region = region
        self.buf: np.ndarray[Any, Any] = np.asarray(region)
        self.base = int(region.base)
        self.region_id = int(region.id)
        self.lost = int(region.lost)
        self.doorbell = False
        self.frames: list[np.ndarray[Any, Any]] = []
        self.slot_srcs: list[_core.Source] = []
        # Per slot, the arguments of Region.request for its whole frame.
        self.slot_args: list[tuple[Any, ...]] = []
        self.slot_form: tuple[Any, ...] = ()
        # The daemon's limits that the slots' whole frames were checked
        # against (region.prepare keeps their requests).
        self.checked: dict[str, Any] | None = None


class _RingBase:
    """Bookkeeping shared by :class:`Ring` and :class:`AsyncRing`."""

    # Whether the ring's requests ask for their reply in the slot
    # (protocol.h, "The reply in shared memory"): the daemon then sends
    # nothing through nng, so only a ring that waits in the slot may.
    _shm_reply = False
    # Whether the ring keeps a doorbell area after its slots (protocol.h,
    # "Doorbells"), one entry for each of its first 64 slots.
    _doorbell = False

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
        # A slot: the tensor, the reply header that the daemon also writes
        # there (protocol.h, "The reply in shared memory"), 8-byte aligned,
        # then page-aligned the frame.
        self._reply_off = (self.tensor_bytes + 7) // 8 * 8
        self._out_capacity = self._reply_off + REPLY_HEADER_SIZE
        self._frame_off = _round_page(self._out_capacity)
        self._slot_bytes = self._frame_off + _round_page(self.frame_bytes)
        self.size = self._slot_bytes * self.slots
        """The shared memory's size in bytes: the slots, page-aligned, and
        the doorbell area where the ring has one."""
        self._db_entries = 0
        if self._doorbell:
            self._db_off = self.size
            self._db_entries = min(self.slots, _DB_MAX)
            self.size += _round_page(_DB_HEADER +
                                     _DB_ENTRY * self._db_entries)
        self._map: _Map | None = None
        # The slot table: each slot's state and its ticket, which changes
        # each time the slot is handed out, so that a holder gives back
        # only what it holds; free slots go out least recently used first.
        dt = np.dtype(self._plan.typestr)
        self._slots = _native.Slots(self.slots)
        self._slots.layout(self._slot_bytes, self._frame_off,
                           tuple(self.frame_shape), tuple(self._opts.shape),
                           dt.kind, dt.itemsize, self._free_hook())
        # The map, epoch and closed flag.
        self._lock = threading.RLock()
        self._closed = False
        # A restart's re-registration: _epoch changes when it begins (a
        # reply to a request sent before is not accepted), _recovering is
        # set while it runs (requests wait for it).
        self._epoch = 0
        self._recovering = False
        self._recover_lock = threading.Lock()
        req = self._opts.request()
        req.shm_reply = self._shm_reply
        self._native = req.native()

    def _free_hook(self) -> Any:
        """What to call (any thread) when a slot comes free, or None."""
        return None

    @property
    def _free(self) -> list[int]:
        """The free slots, least recently used first."""
        return self._slots.free()

    @property
    def region_id(self) -> int:
        """The id the daemon gave the ring's region (it changes when the
        ring registers anew after a daemon restart)."""
        m = self._map
        return m.region_id if m is not None else 0

    def _new_map(self, region: Any) -> _Map:
        """The mapping of a newly registered region: views and interfaces
        of its slots."""
        m = _Map(region)
        fshape = tuple(self.frame_shape)
        for k in range(self.slots):
            at = k * self._slot_bytes + self._frame_off
            m.frames.append(self._view(m, at, self.frame_bytes, "u1",
                                       fshape))
        try:
            srcs = [_core.check_frame(f, self._format) for f in m.frames]
        except errors.InvalidRequestError:
            return m  # the format does not fit: every request says so
        m.slot_args = [self._args(m, k, src) for k, src in enumerate(srcs)]
        for args in m.slot_args:
            region.prepare(*args)
        m.slot_srcs = srcs
        f = m.frames[0]
        m.slot_form = (f.shape, f.strides)
        return m

    def _check_size(self, limits: dict[str, Any]) -> None:
        bound = limits.get("max_region_bytes")
        if isinstance(bound, int) and self.size > bound:
            raise errors.LimitExceededError(
                f"ring of {self.size} bytes exceeds the daemon's "
                f"max_region_bytes {bound}")

    def _unmap(self) -> None:
        m, self._map = self._map, None
        if m is not None:
            self._drop(m)

    @staticmethod
    def _drop(m: _Map) -> None:
        """Unregisters m; its mapping goes with the last array viewing
        it."""
        m.region.unregister()
        m.frames = []
        m.slot_srcs = []
        m.slot_args = []

    @staticmethod
    def _view(m: _Map, offset: int, nbytes: int, dtype: str,
              shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
        return m.buf[offset:offset + nbytes].view(dtype).reshape(shape)

    def _frame_view(self, k: int, ticket: int,
                    shape: Sequence[int] | None) -> RingFrame:
        """A reserved frame for slot k: a RingFrame over a holder."""
        m = self._map
        if m is None:
            self._release(k, ticket)
            raise errors.ClosedError("the ring was closed")
        if shape is not None:
            shape = tuple(int(v) for v in shape)
            n = 1
            for v in shape:
                n *= v
            if (n > self.frame_bytes or len(shape) not in (2, 3) or
                    min(shape) < 1):
                self._release(k, ticket)
                raise errors.InvalidRequestError(
                    f"frame shape {shape} does not fit the ring's slot of "
                    f"{self.frame_shape}")
        hold = self._slots.frame_hold(k, ticket, self, m, m.region)
        if shape is not None and shape != self.frame_shape:
            hold.reshape(shape)
        return hold.array(RingFrame)

    def _claim(self, hold: _Hold | None) -> bool:
        """Whether hold is a frame reserved on this ring and not yet sent
        (its slot is then in flight, the holder's no more)."""
        return hold is not None and self._slots.claim(hold)

    def _is_whole(self, m: _Map, k: int, frame: Any,
                  hold: _Hold) -> bool:
        """Whether frame is slot k's whole frame as next_frame() gave it,
        in the current mapping: its request header is ready. (A view of
        the holder's memory with the whole frame's shape and strides
        starts where it does: the holder's memory is no larger.)"""
        return (bool(m.slot_srcs) and hold.map is m and
                type(frame) is RingFrame and frame.dtype is _U8 and
                (frame.shape, frame.strides) == m.slot_form)

    def _src_in(self, m: _Map, k: int, src: _core.Source,
                copy: bool) -> _core.Source:
        """src as it lies in slot k of mapping m, after copying it there if
        copy (packed, with its shape)."""
        if copy:
            a = src.array
            if a.size > self.frame_bytes:
                raise errors.LimitExceededError(
                    f"frame of {a.size} bytes is larger than the ring's "
                    f"slot of {self.frame_bytes}")
            dst = self._view(m, k * self._slot_bytes + self._frame_off,
                             a.size, "u1", a.shape)
            np.copyto(dst, a)
            src = _core.check_frame(dst, self._format)
        return src

    def _args(self, m: _Map, k: int, src: _core.Source) -> tuple[Any, ...]:
        """The arguments of Region.request for src in slot k of m."""
        u, uo, vo = src.planes
        return (k, self._native, src.addr - m.base, k * self._slot_bytes,
                self._out_capacity, src.span, src.format, src.width,
                src.height, src.stride, u, uo, vo)

    def _result(self, m: _Map, k: int, ticket: int, res: Any,
                src: _core.Source) -> RingResult:
        """The result of slot k (now held by it): its tensor views the
        slot through a holder."""
        out = _new_ring_result(RingResult)
        _set(out, "_hold", self._slots.result_hold(k, ticket, self, m,
                                                   m.region))
        _set(out, "_tensor", None)
        _set(out, "request_id", res.request_id)
        _set(out, "_res", res)
        _set(out, "_src_width", src.width)
        _set(out, "_src_height", src.height)
        _set(out, "_reply", None)
        _set(out, "_transform", None)
        _set(out, "_timings", None)
        return out

    def _release(self, k: int, ticket: int) -> None:
        """Gives slot k back unless it was since (its ticket changed)."""
        self._slots.release(k, ticket)

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
    before the restart is never taken.

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

    _shm_reply = True
    _doorbell = True

    def __init__(self, client: _Owner, slots: int, frame: Sequence[int],
                 doorbell: bool = True, **options: Any):
        if not doorbell:
            self._doorbell = False
        super().__init__(slots, frame, options)
        self._client = client
        self._map = self._register()

    def _register(self) -> _Map:
        """Opens and registers a new region and asks the daemon to poll
        its doorbell area (a daemon that refuses, doorbells off or at its
        limit, leaves the ring on the socket alone)."""
        client = self._client
        self._check_size(client.limits())
        m = self._new_map(client._s.native.region_open(self.size))
        if self._db_entries:
            try:
                m.region.doorbell(self._db_off, self._db_entries)
                m.doorbell = True
            except errors.FrameprepError:
                pass
        return m

    def _recover(self, epoch: int) -> None:
        """Registers the ring anew after the daemon forgot its region
        (restarted), unless another thread did since epoch; retries for
        up to the client's timeout while the daemon is away."""
        with self._recover_lock:
            with self._lock:
                if self._epoch != epoch or self._closed:
                    return
                self._epoch += 1
                self._recovering = True
                # Slots.send takes no reply from now on (ring.py sends
                # its request again), until _send arms the new map.
                self._slots.disarm()
            try:
                deadline = time.monotonic() + self._client.timeout
                while True:
                    try:
                        m = self._register()
                        break
                    except (errors.TransportError,
                            errors.RequestTimeoutError,
                            errors.RegionError,
                            errors.ServerShuttingDownError,
                            errors.ServerBusyError):
                        if (time.monotonic() > deadline or
                                self._closed):
                            raise
                        time.sleep(0.02)
                with self._lock:
                    closed = self._closed
                    old = self._map
                    if not closed:
                        self._map = m
                if closed:  # closed meanwhile: the new region goes too
                    old = m
                if old is not None:
                    # Unregistered unless its connection is gone (the C
                    # library sends nothing then).
                    self._drop(old)
                if closed:
                    self._drop(m)
            finally:
                with self._lock:
                    self._recovering = False

    def _current(self) -> tuple[_Map, int]:
        """The mapping to send in and the epoch, once no re-registration
        runs."""
        while True:
            # Read without the lock, the epoch first: a re-registration
            # that begins after this changes it, and the reply is not
            # taken then.
            epoch = self._epoch
            m = self._map
            if m is None or self._closed:
                raise errors.ClosedError("the ring was closed")
            if not self._recovering:
                return m, epoch
            with self._recover_lock:
                pass

    def __enter__(self) -> Ring:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self, state: int) -> tuple[int, int]:
        got = self._slots.take(state, self._client.timeout)
        if got is False:
            raise self._full("this thread")
        if got is None:
            raise errors.RequestTimeoutError(
                f"no free ring slot within {self._client.timeout:g} s: "
                f"every slot is held (release results when done)")
        return got

    if TYPE_CHECKING:
        # RingCore's, in C (see their docstrings there): while armed
        # (_arm), a whole frame in one call (Slots.next_frame, Slots.send),
        # else _next_frame, _preprocess or _resend.
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
        k, ticket = self._take(_RESERVED)
        return self._frame_view(k, ticket, shape)

    def _resend(self, frame: np.ndarray[Any, Any],
                got: tuple[int, int, _Hold | None]) -> RingResult:
        """preprocess after Slots.send took slot k (ticket; hold: the
        reserved frame's holder, None for a copy) but left the request to
        be sent again here (the registration changed meanwhile, the
        connection was lost, the daemon forgot the region)."""
        k, ticket, hold = got
        try:
            src = (None if hold is not None else
                   _core.check_frame(frame, self._format))
            return self._send(k, ticket, src, hold, frame)
        except BaseException:
            self._release(k, ticket)
            raise

    def _preprocess(self, frame: np.ndarray[Any, Any]) -> RingResult:
        """preprocess, step by step."""
        hold = _hold_of(frame)
        if self._claim(hold):
            assert hold is not None
            k, ticket = hold.slot, hold.ticket
            try:
                src = None
                m = self._map
                if m is None or not self._is_whole(m, k, frame, hold):
                    src = _core.check_frame(frame, self._format)
                return self._send(k, ticket, src, hold, frame)
            except BaseException:
                self._release(k, ticket)
                raise
        src = _core.check_frame(frame, self._format)
        if src.array.size > self.frame_bytes:
            raise errors.LimitExceededError(
                f"frame of {src.array.size} bytes is larger than the "
                f"ring's slot of {self.frame_bytes}")
        k, ticket = self._take(_TAKEN)
        try:
            return self._send(k, ticket, src, None, frame)
        except BaseException:
            self._release(k, ticket)
            raise

    def _send(self, k: int, ticket: int, src: _core.Source | None,
              hold: _Hold | None, frame: Any) -> RingResult:
        """Sends slot k's request (src None: the whole reserved frame;
        hold None: src copied into the slot) and returns its result,
        sending it again after a daemon restart."""
        client = self._client
        s = client._s
        native = s.native
        for attempt in range(_ATTEMPTS):
            # The epoch first (see _current).
            epoch = self._epoch
            m = self._map
            if m is None or self._closed or self._recovering:
                m, epoch = self._current()
            if native.conn_lost() != m.lost:  # the daemon forgot the region
                self._recover(epoch)
                continue
            limits = s._limits or client.limits()
            args: tuple[Any, ...] | None = None
            if hold is not None and hold.map is not m:
                # Reserved before a restart: its bytes are in the old
                # memory, complete now that it is sent.
                used = self._src_in(m, k, src or _core.check_frame(
                    frame, self._format), True)
                args = self._args(m, k, used)
            elif src is None:
                # The whole reserved frame: its request is prepared
                # (Region.prepare), checked once per limits.
                used = m.slot_srcs[k]
                if m.checked is not limits:
                    self._plan.check(used, limits)
                    m.checked = limits
            else:
                used = self._src_in(m, k, src, hold is None)
                args = self._args(m, k, used)
            if args is not None:
                self._plan.check(used, limits)
            try:
                if args is None:
                    gate = s.gate
                    if gate is None:
                        res = m.region.send(k)
                    else:
                        s.gate_take()
                        try:
                            res = m.region.send(k)
                        finally:
                            gate.give()
                elif s.gate is None:
                    res = m.region.request(*args)
                else:
                    res = s.call(m.region.request, *args)
            except (errors.RegionError, errors.TransportError) as exc:
                # A transport error is the daemon's death when the
                # connection was lost; else it is the caller's.
                if (attempt + 1 == _ATTEMPTS or
                        (not isinstance(exc, errors.RegionError) and
                         native.conn_lost() == m.lost)):
                    raise
                self._recover(epoch)
                continue
            if self._epoch != epoch:
                continue  # answered after a restart began
            if res.status:
                if res.status == _EREGION and attempt + 1 < _ATTEMPTS:
                    self._recover(epoch)
                    continue
                _core.checked(res)
            if not self._slots.armed:
                self._arm(m, epoch, limits)
            return self._result(m, k, ticket, res, used)
        raise errors.RegionError(
            f"the daemon forgot the ring's region {_ATTEMPTS} times in a "
            f"row")

    def _arm(self, m: _Map, epoch: int, limits: dict[str, Any]) -> None:
        """Arms the slot table's one-call path (Slots.next_frame and
        Slots.send) with mapping m, once a request in it succeeded, unless
        a re-registration began since epoch: the slots' whole-frame
        requests prepared there and checked against limits (while the
        client keeps these), the client's cap on requests in flight."""
        s = self._client._s
        if not m.slot_srcs or s._limits is not limits:
            return
        src = m.slot_srcs[0]
        if m.checked is not limits:
            try:
                self._plan.check(src, limits)
            except errors.FrameprepError:
                return
            m.checked = limits
        with self._lock:
            if (self._epoch == epoch and not self._recovering and
                    not self._closed and self._map is m):
                self._slots.arm(m, m.region, s, limits, s.gate, src.width,
                                src.height)

    def close(self) -> None:
        """Unregisters the region (best effort). Requests on the ring must
        have finished; results still held keep the memory mapped (reading
        them is safe) but the daemon no longer writes there. Closing
        twice is a no-op."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._slots.close()
        self._unmap()


class AsyncRing(_RingBase):
    """The asyncio form of :class:`Ring`, made by :meth:`AsyncClient.ring`:
    ``await ring.next_frame()``, ``await ring.preprocess(frame)``, ``await
    ring.aclose()`` or ``async with``. Same slots, holders, lifetimes,
    errors and re-registration after a daemon restart; its requests go over
    the socket (no doorbell), each on a thread of the loop's executor
    while the loop goes on. One event loop at a time.

    A task that wants a slot while all are held waits for one (up to the
    client's timeout) while some holder is a task still running (which
    may release it), and gets :class:`~frameprep.RingFullError` at once
    when every slot is held by itself or by tasks that are done (their
    results returned and not released, as in ``asyncio.gather`` of more
    requests than slots): gather at most ``slots`` at a time, or release
    each result in the task that made it."""

    _shm_reply = True

    def __init__(self, client: _AsyncOwner, slots: int,
                 frame: Sequence[int], **options: Any):
        self._freed_event = asyncio.Event()
        super().__init__(slots, frame, options)
        self._client = client
        self._arecover_lock = asyncio.Lock()
        # Per slot, the task that reserved it or holds its result, with
        # the slot's ticket then.
        self._holders: dict[int, tuple[int, asyncio.Task[Any] | None]] = {}

    async def _register(self) -> None:
        self._check_size(await self._client.limits())
        loop = asyncio.get_running_loop()
        region = await loop.run_in_executor(
            None, self._client._s.native.region_open, self.size)
        self._map = self._new_map(region)

    async def __aenter__(self) -> AsyncRing:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _free_hook(self) -> Any:
        # The event's method, not the ring's: the slot table keeps it.
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
        for k, (state, ticket) in enumerate(self._slots.states()):
            if state not in (_RESERVED, _HELD):
                return False
            got = self._holders.get(k)
            if got is None or got[0] != ticket:
                return False
            task = got[1]
            if task is not me and (task is None or not task.done()):
                return False
        return True

    async def _take(self, state: int) -> tuple[int, int]:
        deadline = time.monotonic() + self._client.timeout
        while True:
            # Cleared first: a slot freed after the look sets it again.
            self._freed_event.clear()
            # Not the thread's check: every task of the loop is on one
            # thread; _stuck looks at the tasks.
            got = self._slots.take(state, 0.0, False)
            if got:
                self._held_by(got[0], got[1])
                return got
            if self._stuck():
                raise self._full("this task (with tasks that are done)")
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.RequestTimeoutError(
                    f"no free ring slot within "
                    f"{self._client.timeout:g} s: every slot is held "
                    f"(release results when done)")
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
        k, ticket = await self._take(_RESERVED)
        return self._frame_view(k, ticket, shape)

    async def preprocess(self, frame: npt.NDArray[Any] | Buffer
                         ) -> RingResult:
        """See :meth:`Ring.preprocess`."""
        limits = await self._client.limits()
        hold = _hold_of(frame)
        src = _core.check_frame(frame, self._format)
        if self._claim(hold):
            assert hold is not None
            k, ticket, copy = hold.slot, hold.ticket, False
        else:
            if src.array.size > self.frame_bytes:
                raise errors.LimitExceededError(
                    f"frame of {src.array.size} bytes is larger than the "
                    f"ring's slot of {self.frame_bytes}")
            k, ticket = await self._take(_TAKEN)
            copy = True
        try:
            return await self._send(k, ticket, src, hold, copy, limits)
        except BaseException:
            self._release(k, ticket)
            raise

    async def _send(self, k: int, ticket: int, src: _core.Source,
                    hold: _Hold | None, copy: bool,
                    limits: dict[str, Any]) -> RingResult:
        """Sends slot k's request and returns its result, sending it again
        after a daemon restart (see :meth:`Ring._send`)."""
        s = self._client._s
        loop = asyncio.get_running_loop()
        for attempt in range(_ATTEMPTS):
            if self._recovering:
                async with self._arecover_lock:
                    pass
            m, epoch = self._map, self._epoch
            if m is None or self._closed:
                raise errors.ClosedError("the ring was closed")
            if s.native.conn_lost() != m.lost:  # the daemon forgot it
                await self._recover(epoch)
                continue
            moved = hold is not None and hold.map is not m
            used = self._src_in(m, k, src, copy or moved)
            self._plan.check(used, limits)
            try:
                res = await loop.run_in_executor(
                    None, lambda: m.region.request(*self._args(m, k, used)))
            except (errors.RegionError, errors.TransportError):
                if attempt + 1 == _ATTEMPTS:
                    raise
                await self._recover(epoch)
                continue
            if self._epoch != epoch:
                continue  # answered after a restart began
            if res.status:
                if res.status == _EREGION and attempt + 1 < _ATTEMPTS:
                    await self._recover(epoch)
                    continue
                _core.checked(res)
            self._held_by(k, ticket)
            return self._result(m, k, ticket, res, used)
        raise errors.RegionError(
            f"the daemon forgot the ring's region {_ATTEMPTS} times in a "
            f"row")

    async def _recover(self, epoch: int) -> None:
        """See :meth:`Ring._recover`."""
        async with self._arecover_lock:
            if self._epoch != epoch or self._closed:
                return
            self._epoch += 1
            self._recovering = True
            try:
                deadline = time.monotonic() + self._client.timeout
                old = self._map
                while True:
                    try:
                        await self._register()
                        break
                    except (errors.TransportError,
                            errors.RequestTimeoutError,
                            errors.RegionError,
                            errors.ServerShuttingDownError,
                            errors.ServerBusyError):
                        if time.monotonic() > deadline or self._closed:
                            raise
                        await asyncio.sleep(0.02)
                if old is not None:
                    self._drop(old)
            finally:
                self._recovering = False

    async def aclose(self) -> None:
        """See :meth:`Ring.close`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._slots.close()
        self._unmap()
