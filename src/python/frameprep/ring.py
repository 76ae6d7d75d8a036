"""Shared-memory rings: frames and tensors that never cross the socket.

The design is simple, and the C library's (``src/lib/client_region.c``): create a
POSIX shared-memory object (``/dev/shm/NAME``, mode 0600, a unique name),
size it, map it, ask the daemon to REGISTER it (the daemon maps it by
name), then unlink the name at once: the memory is shared by exactly the two
mappings and disappears with the last of them, so a process that dies
leaves nothing behind. When the daemon runs as another user (the packaged
service's ``frameprep``, the owner of its ipc:// socket), that one user gets
a POSIX ACL entry on the object (through libacl, as the C library does):
group and others keep no access and the owner stays this process's user. The region is cut into ``slots`` equal slots, each a
page-aligned tensor area followed by a page-aligned frame area. A request
names (region, offset, length) for its frame and for its tensor; the daemon
reads the frame in place and writes the tensor in place.

Lifetimes are explicit: :meth:`Ring.close` (or the context manager)
unregisters the region and unmaps it. A slot belongs to whoever holds it
(a frame reserved by :meth:`Ring.next_frame`, a request in flight, a
:class:`RingResult` not yet released) and is never handed out again
before it is given back; a holder that is garbage-collected without
giving it back gives it back then, with a ``ResourceWarning``.

When the daemon restarts (its connection closes: the region and the
doorbell went with it), the ring makes a new region of the same layout,
registers it and sends the requests again there; a reply that may stem
from the region before is never accepted.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import ctypes.util
import itertools
import mmap
import os
import secrets
import struct
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Sequence, cast

import numpy as np

from . import _core, errors
from .protocol import (REPLY_HEADER_SIZE, DType, Kind, Location, Reply,
                       Request, set_request_id)

_lib = _core._lib
_ffi = _core._ffi
_U8 = np.dtype(np.uint8)
_FRAME = int(Kind.FRAME)
_U64 = struct.Struct("<Q")

if TYPE_CHECKING:
    from .client import AsyncClient, Client

_PAGE = 4096
# A slot is free, reserved by next_frame() (its frame not yet sent), or
# taken: in flight, then held by its result until released.
_FREE, _RESERVED, _TAKEN = 0, 1, 2
# How often a request is sent again after the daemon's connection closed
# or its region was unknown (each time after the ring registered anew).
_ATTEMPTS = 4
_names = itertools.count()


def _round_page(n: int) -> int:
    return (n + _PAGE - 1) // _PAGE * _PAGE


def _grant(fd: int, uid: int) -> None:
    """Gives user uid read and write access to the object open on fd with
    one ACL entry (libacl's acl_from_text + acl_set_fd)."""
    lib = ctypes.CDLL(ctypes.util.find_library("acl") or "libacl.so.1",
                      use_errno=True)
    lib.acl_from_text.restype = ctypes.c_void_p
    lib.acl_from_text.argtypes = [ctypes.c_char_p]
    lib.acl_set_fd.argtypes = [ctypes.c_int, ctypes.c_void_p]
    lib.acl_free.argtypes = [ctypes.c_void_p]
    acl = lib.acl_from_text(
        f"u::rw-,u:{uid}:rw-,g::---,m::rw-,o::---".encode())
    if not acl:
        raise errors.RegionError("acl_from_text failed")
    try:
        if lib.acl_set_fd(fd, acl) != 0:
            err = ctypes.get_errno()
            raise errors.RegionError(
                f"granting the daemon (uid {uid}) access to the region: "
                f"{os.strerror(err)}")
    finally:
        lib.acl_free(acl)


class _Hold:
    """What holds one slot of a ring: a frame reserved by next_frame() or
    a result's tensor. Its ``__array_interface__`` describes that memory,
    and the arrays made from it (``np.asarray``) keep it alive, so the
    slot stays held while the holder or any view of it lives, until
    :meth:`give_back`. ``ring`` is None once it no longer holds the slot
    (given back, or the reserved frame was sent)."""

    __slots__ = ("__array_interface__", "ring", "slot", "ticket", "map",
                 "what")

    def __init__(self, ring: _RingBase, slot: int, ticket: int, m: _Map,
                 iface: dict[str, Any], what: str):
        self.__array_interface__ = iface  # numpy only reads it
        self.ring: _RingBase | None = ring
        self.slot = slot
        self.ticket = ticket
        self.map = m  # keeps the mapping alive while views of it live
        self.what = what

    def give_back(self) -> None:
        ring = self.ring
        if ring is not None:
            self.ring = None
            ring._release(self.slot, self.ticket)

    def __del__(self) -> None:
        if self.ring is not None:
            try:
                warnings.warn(
                    f"a ring slot's {self.what} was never released: given "
                    f"back when it was garbage-collected (use 'with', "
                    f"release() or cancel())", ResourceWarning, 2)
            except Exception:  # interpreter shutdown
                pass
            self.give_back()


def _iface(addr: int, shape: tuple[int, ...],
           typestr: str) -> dict[str, Any]:
    """The __array_interface__ of shape elements of typestr at addr."""
    return {"data": (addr, False), "shape": shape, "typestr": typestr,
            "version": 3}


def _hold_of(frame: Any) -> _Hold | None:
    """The holder of a frame reserved by next_frame() (or of a view of
    one), or None."""
    b = getattr(frame, "base", None)
    for _ in range(8):
        if type(b) is _Hold:
            return b
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
            ring = hold.ring
            if ring is not None:
                ring._cancel(hold)

    def __enter__(self) -> RingFrame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()


class RingResult(_core.Result):
    """A :class:`~frameprep.Result` of a ring: its tensor views the
    ring's slot, which this result holds until :meth:`release` (or the end
    of its ``with`` block): until then the ring hands that slot to nobody
    else, so the tensor keeps its values. Read or copy the tensor before
    releasing; views of it must not be read after that. A result (or
    view of its tensor) that is garbage-collected unreleased gives the slot
    back then, with a ``ResourceWarning``."""

    __slots__ = ("_hold",)
    _hold: _Hold

    def release(self) -> None:
        """Gives the slot back to the ring; no-op when done already."""
        self._hold.give_back()

    @property
    def released(self) -> bool:
        """Whether the slot was given back."""
        return self._hold.ring is None

    def __enter__(self) -> RingResult:
        return self

    def __exit__(self, *exc: object) -> None:
        self._hold.give_back()


class _Map:
    """One registration of the ring's memory: the mapping, the id the
    daemon gave it, its doorbell area, the per-slot views and request
    headers, and the connection's ``lost`` count when it was registered
    (a change means the daemon forgot it). A daemon restart makes a new
    one; the old mapping stays alive while arrays view it."""

    __slots__ = ("mm", "buf", "base", "region_id", "db_area", "lost",
                 "frames", "slot_srcs", "slot_heads", "slot_form",
                 "frame_ifaces", "tensor_ifaces")

    def __init__(self, mm: mmap.mmap, buf: np.ndarray[Any, Any]) -> None:
        self.mm = mm
        self.buf = buf
        self.base = buf.__array_interface__["data"][0]
        self.region_id = 0
        self.db_area = 0
        self.lost = 0
        self.frames: list[np.ndarray[Any, Any]] = []
        self.slot_srcs: list[_core.Source] = []
        self.slot_heads: list[tuple[bytearray, Any]] = []
        self.slot_form: tuple[Any, ...] = ()
        # Per slot, the array interfaces of its whole frame and its tensor.
        self.frame_ifaces: list[dict[str, Any]] = []
        self.tensor_ifaces: list[dict[str, Any]] = []


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
        self.frame_shape = shape if shape[2] != 1 else shape[:2]
        self.frame_bytes = shape[0] * shape[1] * shape[2]
        self.tensor_bytes = self._opts.tensor_bytes
        # A slot: the tensor, the reply header that the daemon also writes
        # there (protocol.h, "The reply in shared memory"), 8-byte aligned,
        # then page-aligned the frame.
        self._reply_off = (self.tensor_bytes + 7) // 8 * 8
        self._out_capacity = self._reply_off + REPLY_HEADER_SIZE
        self._frame_off = _round_page(self._out_capacity)
        self._slot_bytes = self._frame_off + _round_page(self.frame_bytes)
        self.size = self._slot_bytes * self.slots
        self._db_entries = 0
        if self._doorbell:
            self._db_off = self.size
            self._db_entries = min(self.slots, _core.DOORBELL_ENTRIES_MAX)
            self.size += _round_page(_core.DOORBELL_HEADER_SIZE +
                                     _core.DOORBELL_ENTRY_SIZE *
                                     self._db_entries)
        self._map: _Map | None = None
        # A slot's state and its ticket, which changes each time the slot
        # is handed out, so that a holder gives back only what it holds.
        self._state = [_FREE] * self.slots
        self._ticket = [0] * self.slots
        self._free = collections.deque(range(self.slots))
        # Reentrant: a holder's __del__ may run (garbage collection) on a
        # thread that holds it.
        self._lock = threading.RLock()
        self._closed = False
        # A restart's re-registration: _epoch changes when it begins (a
        # reply to a request sent before is not accepted), _recovering is
        # set while it runs (requests wait for it).
        self._epoch = 0
        self._recovering = False
        self._recover_lock = threading.Lock()
        # The bytes of a successful reply to a request of this ring, but
        # for its id at byte 8 and its scales, pads and times at 40..80.
        ok = Reply(kind=_FRAME, dtype=self._opts.dtype,
                   layout=self._opts.layout, ndim=4,
                   output_loc=Location.SHM, shape=self._opts.shape,
                   tensor_size=self.tensor_bytes).encode()
        self._reply_form = (ok[:8], ok[16:40], ok[80:96])
        self._tensor_form = (self._opts.shape, int(self._opts.dtype),
                             self.tensor_bytes)

    @property
    def region_id(self) -> int:
        """The id the daemon gave the ring's region (it changes when the
        ring registers anew after a daemon restart)."""
        m = self._map
        return m.region_id if m is not None else 0

    def _create(self, limits: dict[str, Any],
                owner: int | None) -> tuple[str, int, _Map]:
        """Creates, sizes and maps a new shared-memory object for the
        ring, open to the daemon's user owner too (the checked owner of
        its socket) when that is another user."""
        bound = limits.get("max_region_bytes")
        if isinstance(bound, int) and self.size > bound:
            raise errors.LimitExceededError(
                f"ring of {self.size} bytes exceeds the daemon's "
                f"max_region_bytes {bound}")
        name = (f"/frameprep-py-{os.getpid()}-{next(_names)}-"
                f"{secrets.token_hex(4)}")
        path = "/dev/shm" + name
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL |
                         os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise errors.RegionError(f"creating {path}: {exc}") from None
        try:
            if owner is not None and owner != os.geteuid():
                _grant(fd, owner)
        except (OSError, errors.RegionError):
            os.close(fd)
            os.unlink(path)
            raise
        try:
            os.ftruncate(fd, self.size)
            mm = mmap.mmap(fd, self.size, mmap.MAP_SHARED,
                           mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as exc:
            os.close(fd)
            os.unlink(path)
            raise errors.RegionError(f"sizing or mapping {path}: "
                                     f"{exc}") from None
        m = _Map(mm, np.frombuffer(mm, np.uint8))
        fshape = tuple(self.frame_shape)
        for k in range(self.slots):
            at = k * self._slot_bytes
            m.frames.append(self._view(m, at + self._frame_off,
                                       self.frame_bytes, "u1", fshape))
            m.frame_ifaces.append(_iface(m.base + at + self._frame_off,
                                         fshape, "|u1"))
            m.tensor_ifaces.append(_iface(m.base + at, self._opts.shape,
                                          self._plan.typestr))
        return name, fd, m

    def _registered(self, m: _Map, region_id: int) -> None:
        """Keeps the region id the daemon gave and the headers of the
        requests for each slot's whole frame."""
        m.region_id = region_id
        req = self._opts.request()
        req.input_loc = req.output_loc = Location.SHM
        req.in_region = req.out_region = region_id
        req.shm_reply = self._shm_reply
        self._plan = _core.Plan(self._opts, req)
        try:
            srcs = [_core.check_frame(f, self._format) for f in m.frames]
        except errors.InvalidRequestError:
            return  # the format does not fit: every request says so
        for k, src in enumerate(srcs):
            head = self._plan.header.buffer(
                0, src.format, src.width, src.height, src.stride,
                src.addr - m.base, k * self._slot_bytes,
                self._out_capacity, src.span, src.planes)
            m.slot_heads.append((head, _ffi.from_buffer(head)))
        m.slot_srcs = srcs
        f = m.frames[0]
        m.slot_form = (f.shape, f.strides)

    @staticmethod
    def _forget_name(name: str, fd: int) -> None:
        os.close(fd)
        try:
            os.unlink("/dev/shm" + name)
        except FileNotFoundError:
            pass

    def _register_request(self, name: str) -> Request:
        return Request(kind=Kind.REGISTER, region_size=self.size,
                       region_name=name)

    def _unmap(self) -> None:
        m, self._map = self._map, None
        if m is not None:
            self._drop(m)

    @staticmethod
    def _drop(m: _Map) -> None:
        """Unmaps m, unless arrays the caller holds view it (they keep
        the mapping alive)."""
        m.db_area = 0
        m.frames = []
        m.slot_srcs = []
        m.slot_heads = []
        m.buf = np.empty(0, np.uint8)
        try:
            m.mm.close()
        except BufferError:
            pass

    @staticmethod
    def _view(m: _Map, offset: int, nbytes: int, dtype: str,
              shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
        return m.buf[offset:offset + nbytes].view(dtype).reshape(shape)

    def _try_take(self, state: int) -> tuple[int, int] | None:
        """Takes the least recently used free slot (caller holds the
        lock): its index and new ticket."""
        if self._closed:
            raise errors.ClosedError("the ring was closed")
        if not self._free:
            return None
        k = self._free.popleft()
        self._state[k] = state
        t = self._ticket[k] + 1
        self._ticket[k] = t
        return k, t

    def _frame_view(self, k: int, ticket: int,
                    shape: Sequence[int] | None) -> RingFrame:
        """A reserved frame for slot k: a RingFrame over a holder."""
        m = self._map
        if m is None:
            self._release(k, ticket)
            raise errors.ClosedError("the ring was closed")
        if shape is None:
            shape = tuple(self.frame_shape)
        else:
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
        addr = m.base + k * self._slot_bytes + self._frame_off
        if shape == self.frame_shape:
            iface = m.frame_ifaces[k]
        else:
            iface = _iface(addr, shape, "|u1")
        hold = _Hold(self, k, ticket, m, iface, "frame")
        return np.asarray(hold).view(RingFrame)

    def _claim(self, hold: _Hold | None) -> bool:
        """Whether hold is a frame reserved on this ring and not yet sent
        (its slot is then in flight, the holder's no more)."""
        if hold is None or hold.ring is not self:
            return False
        k = hold.slot
        with self._lock:
            if (self._closed or hold.ring is not self or
                    self._ticket[k] != hold.ticket or
                    self._state[k] != _RESERVED):
                return False
            self._state[k] = _TAKEN
            hold.ring = None
        return True

    def _cancel(self, hold: _Hold) -> None:
        """Gives back a reserved, unsent frame's slot."""
        with self._lock:
            if hold.ring is not self:
                return
            hold.ring = None
            if self._state[hold.slot] != _RESERVED:
                return
        self._release(hold.slot, hold.ticket)

    def _is_whole(self, m: _Map, k: int, frame: Any,
                  hold: _Hold) -> bool:
        """Whether frame is slot k's whole frame as next_frame() gave it,
        in the current mapping: its request header is ready. (A view of
        the holder's memory with the whole frame's shape and strides
        starts where it does: the holder's memory is no larger.)"""
        return (bool(m.slot_heads) and hold.map is m and
                type(frame) is RingFrame and frame.dtype is _U8 and
                (frame.shape, frame.strides) == m.slot_form)

    def _slot_header(self, m: _Map, k: int, request_id: int,
                     limits: dict[str, Any]) -> Any:
        """The header (a cdata array) of the request for slot k's whole
        frame, after the checks against the daemon's limits."""
        self._plan.check(m.slot_srcs[k], limits)
        head, ptr = m.slot_heads[k]
        set_request_id(head, request_id)
        return ptr

    def _usual_reply(self, head: bytes, length: int, request_id: int) -> bool:
        """Whether a reply (its header and length) is the successful reply
        to request_id with the ring's tensor, which then needs no further
        checks: each field that Reply.decode and check_reply check has the
        value they accept."""
        a, b, c = self._reply_form
        return (length == REPLY_HEADER_SIZE and head[16:40] == b and
                head[80:96] == c and head[:8] == a and head[-1] == 0 and
                _U64.unpack_from(head, 8)[0] == request_id)

    def _build(self, m: _Map, k: int, src: _core.Source, copy: bool,
               request_id: int,
               limits: dict[str, Any]) -> tuple[bytes, _core.Source]:
        """The request header for src in slot k of mapping m, after
        copying src there if copy (packed, with its shape)."""
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
        plan = self._plan
        plan.check(src, limits)
        return plan.header.stamp(request_id, src.format, src.width,
                                 src.height, src.stride,
                                 src.addr - m.base, k * self._slot_bytes,
                                 self._out_capacity, src.span,
                                 src.planes), src

    def _result(self, m: _Map, k: int, ticket: int, rep: Reply | None,
                request_id: int, src: _core.Source, head: bytes = b"",
                length: int = 0) -> RingResult:
        """The result of slot k (now held by it): its tensor views the
        slot through a holder."""
        if rep is None or (rep.shape, rep.dtype,
                           rep.tensor_size) == self._tensor_form:
            iface = m.tensor_ifaces[k]
        else:
            iface = _iface(m.base + k * self._slot_bytes,
                           tuple(rep.shape[:rep.ndim]),
                           DType(rep.dtype).numpy)
        hold = _Hold(self, k, ticket, m, iface, "result")
        res = cast(RingResult,
                   _core.new_result(np.asarray(hold), request_id, src, rep,
                                    head, length, RingResult))
        object.__setattr__(res, "_hold", hold)
        return res

    def _release(self, k: int, ticket: int) -> None:
        with self._lock:
            if self._ticket[k] != ticket or self._state[k] == _FREE:
                return
            self._state[k] = _FREE
            self._free.append(k)
            self._freed()

    def _freed(self) -> None:
        """A slot was given back (the lock is held)."""


class Ring(_RingBase):
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
    values. A thread that wants a slot while all are held waits for one,
    up to the client's timeout (:class:`~frameprep.RequestTimeoutError`):
    give a ring at least as many slots as results held at once.

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

    _shm_reply = _core.SHM_REPLY
    _doorbell = _core.DOORBELL

    def __init__(self, client: Client, slots: int, frame: Sequence[int],
                 doorbell: bool = True, **options: Any):
        if not doorbell:
            self._doorbell = False
        super().__init__(slots, frame, options)
        self._client = client
        self._cond = threading.Condition(self._lock)
        self._waiting = 0
        self._map = self._register()

    def _register(self) -> _Map:
        """Makes, registers and (doorbell) rings up a new mapping."""
        client = self._client
        s = client._s
        name, fd, m = self._create(client.limits(), s.owner)
        m.lost = s.lost
        try:
            _, rep = client.request(self._register_request(name))
        except BaseException:
            self._drop(m)
            raise
        finally:
            self._forget_name(name, fd)
        self._registered(m, rep.region_id)
        if self._db_entries:
            self._ring_doorbell(m)
        return m

    def _ring_doorbell(self, m: _Map) -> None:
        """Asks the daemon to poll the ring's doorbell area. A daemon
        that refuses (doorbells off, at its limit, or one that predates
        them) leaves the ring on nng alone."""
        try:
            self._client.request(Request(
                kind=Kind.DOORBELL, region_id=m.region_id,
                doorbell_entries=self._db_entries,
                doorbell_offset=self._db_off))
        except errors.FrameprepError:
            return
        m.db_area = m.base + self._db_off

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
                if old is not None and old.lost == self._client._s.lost:
                    # Same connection (the daemon dropped the region, not
                    # the connection): let it go of the old one too.
                    try:
                        self._client.request(Request(
                            kind=Kind.UNREGISTER, region_id=old.region_id))
                    except errors.FrameprepError:
                        pass
                if closed:
                    self._drop(m)
            finally:
                with self._lock:
                    self._recovering = False

    def _current(self) -> tuple[_Map, int]:
        """The mapping to send in and the epoch, once no re-registration
        runs."""
        while True:
            with self._lock:
                m = self._map
                if m is None or self._closed:
                    raise errors.ClosedError("the ring was closed")
                if not self._recovering:
                    return m, self._epoch
            with self._recover_lock:
                pass

    def __enter__(self) -> Ring:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _freed(self) -> None:
        if self._waiting:
            self._cond.notify_all()

    def _take(self, state: int) -> tuple[int, int]:
        with self._lock:
            got = self._try_take(state)
        if got is not None:
            return got
        deadline = time.monotonic() + self._client.timeout
        with self._cond:
            while (got := self._try_take(state)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.RequestTimeoutError(
                        f"no free ring slot within "
                        f"{self._client.timeout:g} s: every slot is held "
                        f"(release results when done)")
                self._waiting += 1
                try:
                    self._cond.wait(left)
                finally:
                    self._waiting -= 1
            return got

    def next_frame(self, shape: Sequence[int] | None = None) -> RingFrame:
        """Reserves a free slot and returns a writable uint8
        :class:`RingFrame` of its frame area, of shape ``shape`` (default
        ``frame_shape``; at most the slot's bytes). Pass it to
        :meth:`preprocess`, or give it back with its ``cancel()``. Waits up
        to the client's timeout for a free slot
        (:class:`~frameprep.RequestTimeoutError`)."""
        k, ticket = self._take(_RESERVED)
        return self._frame_view(k, ticket, shape)

    def preprocess(self, frame: np.ndarray[Any, Any]) -> RingResult:
        """Preprocesses a frame through the ring: a frame from
        :meth:`next_frame` (or a crop of one) as it lies, any other uint8
        array (H, W[, C], or a YUV frame of the ring's format) after
        copying it into a free slot. Returns a :class:`RingResult` whose
        tensor views the slot, held until the result is released. Raises
        as :meth:`Client.preprocess`, and
        :class:`~frameprep.LimitExceededError` for a frame larger than a
        slot."""
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
        """Sends slot k's request (src None: the whole reserved frame,
        its header ready; hold None: src copied into the slot) and returns
        its result, sending it again after a daemon restart."""
        client = self._client
        s = client._s
        for attempt in range(_ATTEMPTS):
            m, epoch = self._current()
            if s.lost != m.lost:  # the daemon forgot the region
                self._recover(epoch)
                continue
            request_id = s.next_id()
            limits = s._limits
            if limits is None:
                limits = client.limits()
            if hold is not None and hold.map is not m:
                # Reserved before a restart: its bytes are in the old
                # memory, complete now that it is sent.
                if src is None:
                    src = _core.check_frame(frame, self._format)
                head, used = self._build(m, k, src, True, request_id, limits)
            elif src is None:
                used = m.slot_srcs[k]
                head = self._slot_header(m, k, request_id, limits)
            else:
                head, used = self._build(m, k, src, hold is None,
                                         request_id, limits)
            try:
                rhead, length = self._call(m, k, head, request_id)
                if self._epoch != epoch:
                    continue  # answered after a restart began
                if src is None and self._usual_reply(rhead, length,
                                                     request_id):
                    return self._result(m, k, ticket, None, request_id,
                                        used, rhead, length)
                rep = Reply.decode(rhead, length)
                _core.check_reply(rep, request_id, _FRAME)
            except (_core.DaemonGone, errors.RegionError):
                if attempt + 1 == _ATTEMPTS:
                    raise
                self._recover(epoch)
                continue
            return self._result(m, k, ticket, rep, request_id, used)
        raise errors.RegionError(
            f"the daemon forgot the ring's region {_ATTEMPTS} times in a "
            f"row")

    def _call(self, m: _Map, k: int, head: Any,
              request_id: int) -> tuple[bytes, int]:
        """Sends head within the client's in-flight limit (the doorbell
        of slot k when the daemon watches it, else the socket) and returns
        the reply's header and length."""
        client = self._client
        s = client._s
        gated = s.gate_take()
        try:
            msg = None
            if k < self._db_entries and m.db_area:
                # Through the doorbell while the daemon watches it; the
                # reply header comes in the entry.
                at = (m.db_area + _core.DOORBELL_HEADER_SIZE +
                      k * _core.DOORBELL_ENTRY_SIZE)
                try:
                    taken = _core.doorbell_call(m.db_area, at, head,
                                                request_id, client.timeout,
                                                s, m.lost)
                except errors.RequestTimeoutError:
                    m.db_area = 0  # taken, never answered: left alone
                    raise
                if taken:
                    at += _core.DOORBELL_REPLY_AT
                elif self._shm_reply:
                    at = m.base + k * self._slot_bytes + self._reply_off
                    msg = s.call_shm(head, at, request_id, True, m.lost)
                else:
                    msg = s.call(head, gated=True)
            elif self._shm_reply:
                at = m.base + k * self._slot_bytes + self._reply_off
                msg = s.call_shm(head, at, request_id, True, m.lost)
            else:
                msg = s.call(head, gated=True)
        finally:
            if gated:
                s.gate_give()
        if msg is None:  # the reply header in shared memory
            return bytes(m.buf[at - m.base:
                               at - m.base + REPLY_HEADER_SIZE]), \
                REPLY_HEADER_SIZE
        try:
            return _core.reply_head(msg)
        finally:
            _lib.nng_msg_free(msg)

    def close(self) -> None:
        """Unregisters the region (best effort) and unmaps it. Requests on
        the ring must have finished; results still held keep the memory
        mapped (reading them is safe) but the daemon no longer writes
        there. Closing twice is a no-op."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._waiting:
                self._cond.notify_all()
        m = self._map
        if m is not None:
            try:
                self._client.request(Request(kind=Kind.UNREGISTER,
                                             region_id=m.region_id))
            except errors.FrameprepError:
                pass
        self._unmap()


class AsyncRing(_RingBase):
    """The asyncio form of :class:`Ring`, made by :meth:`AsyncClient.ring`:
    ``await ring.next_frame()``, ``await ring.preprocess(frame)``, ``await
    ring.aclose()`` or ``async with``. Same slots, holders, lifetimes,
    errors and re-registration after a daemon restart; its requests go over
    the socket (no doorbell). One event loop at a time."""

    def __init__(self, client: AsyncClient, slots: int,
                 frame: Sequence[int], **options: Any):
        super().__init__(slots, frame, options)
        self._client = client
        self._freed_event = asyncio.Event()
        self._arecover_lock = asyncio.Lock()

    async def _register(self) -> None:
        s = self._client._s
        name, fd, m = self._create(await self._client.limits(), s.owner)
        m.lost = s.lost
        try:
            _, rep = await self._client.request(
                self._register_request(name))
        except BaseException:
            self._drop(m)
            raise
        finally:
            self._forget_name(name, fd)
        self._registered(m, rep.region_id)
        self._map = m

    async def __aenter__(self) -> AsyncRing:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _freed(self) -> None:
        self._freed_event.set()

    async def _take(self, state: int) -> tuple[int, int]:
        deadline = time.monotonic() + self._client.timeout
        while True:
            with self._lock:
                got = self._try_take(state)
                if got is None:
                    self._freed_event.clear()
            if got is not None:
                return got
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

    async def preprocess(self, frame: np.ndarray[Any, Any]) -> RingResult:
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
        for attempt in range(_ATTEMPTS):
            if self._recovering:
                async with self._arecover_lock:
                    pass
            m, epoch = self._map, self._epoch
            if m is None or self._closed:
                raise errors.ClosedError("the ring was closed")
            if s.lost != m.lost:  # the daemon forgot the region
                await self._recover(epoch)
                continue
            request_id = s.next_id()
            moved = hold is not None and hold.map is not m
            head, used = self._build(m, k, src, copy or moved, request_id,
                                     limits)
            try:
                _, rep = await self._client._roundtrip(
                    request_id, Kind.FRAME, _core.message(head))
            except errors.RegionError:
                if attempt + 1 == _ATTEMPTS:
                    raise
                await self._recover(epoch)
                continue
            if self._epoch != epoch:
                continue  # answered after a restart began
            return self._result(m, k, ticket, rep, request_id, used)
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
                while True:
                    try:
                        await self._register()
                        return
                    except (errors.TransportError,
                            errors.RequestTimeoutError,
                            errors.RegionError,
                            errors.ServerShuttingDownError,
                            errors.ServerBusyError):
                        if time.monotonic() > deadline or self._closed:
                            raise
                        await asyncio.sleep(0.02)
            finally:
                self._recovering = False

    async def aclose(self) -> None:
        """See :meth:`Ring.close`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        m = self._map
        if m is not None:
            try:
                await self._client.request(Request(
                    kind=Kind.UNREGISTER, region_id=m.region_id))
            except errors.FrameprepError:
                pass
        self._unmap()
