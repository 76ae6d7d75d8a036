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
unregisters the region and unmaps it. Nothing relies on ``__del__``.
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
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import _core, errors
from .protocol import (REPLY_HEADER_SIZE, Kind, Location, Reply, Request,
                       set_request_id)

_lib = _core._lib
_ffi = _core._ffi
_U8 = np.dtype(np.uint8)
_FRAME = int(Kind.FRAME)
_U64 = struct.Struct("<Q")

if TYPE_CHECKING:
    from .client import AsyncClient, Client

_PAGE = 4096
_FREE, _RESERVED, _INFLIGHT = 0, 1, 2
_names = itertools.count()


def _round_page(n: int) -> int:
    return (n + _PAGE - 1) // _PAGE * _PAGE


def _daemon_uid(address: str) -> int | None:
    """The user the daemon at an ipc:// address runs as (its socket file's
    owner), or None (tcp://, or the file cannot be read)."""
    if not address.startswith("ipc://"):
        return None
    try:
        return os.stat(address[len("ipc://"):]).st_uid
    except OSError:
        return None


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


class _RingBase:
    """Bookkeeping shared by :class:`Ring` and :class:`AsyncRing`."""

    # Whether the ring's requests ask for their reply in the slot
    # (protocol.h, "The reply in shared memory"): the daemon then sends
    # nothing through nng, so only a ring that waits in the slot may.
    _shm_reply = False
    # Whether the ring keeps a doorbell area after its slots (protocol.h,
    # "Doorbells"), one entry for each of its first 64 slots.
    _doorbell = False

    def __init__(self, slots: int, frame: Sequence[int], options: dict):
        fmt = options.pop("format", None)
        if fmt is not None and _core._pick(_core._FORMATS, fmt,
                                           "format").is_yuv:
            raise errors.InvalidRequestError(
                f"format {fmt}: rings take interleaved frames; send YUV "
                f"frames with preprocess()")
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
        # The area's address once the daemon polls it, else 0.
        self._db_area = 0
        self.region_id = 0
        self._state = [_FREE] * self.slots
        self._free = collections.deque(range(self.slots))
        self._lock = threading.Lock()
        self._closed = False
        self._mm: mmap.mmap | None = None
        self._buf: np.ndarray | None = None
        self._base = 0
        # Per slot, views of the whole frame area and of the tensor: a
        # request's views are fresh views of these.
        self._frames: list[np.ndarray] = []
        self._tensors: list[np.ndarray] = []
        # A whole-slot view that next_frame handed out, by id(), until it
        # is sent: such a frame needs no checks, and each slot keeps its
        # checked source and a request header that differs only in its id.
        self._handed: dict[int, tuple[int, np.ndarray]] = {}
        self._handed_at = [0] * self.slots
        self._slot_srcs: list[_core.Source] = []
        self._slot_heads: list[tuple[bytearray, Any]] = []
        self._slot_form: tuple = ()
        self._slot_checked: Any = None
        # The bytes of a successful reply to a request of this ring, but
        # for its id at byte 8 and its scales, pads and times at 40..80.
        ok = Reply(kind=_FRAME, dtype=self._opts.dtype,
                   layout=self._opts.layout, ndim=4,
                   output_loc=Location.SHM, shape=self._opts.shape,
                   tensor_size=self.tensor_bytes).encode()
        self._reply_form = (ok[:8], ok[16:40], ok[80:96])
        self._tensor_form = (self._opts.shape, int(self._opts.dtype),
                             self.tensor_bytes)

    def _create(self, limits: dict[str, Any],
                address: str) -> tuple[str, int]:
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
            uid = _daemon_uid(address)
            if uid is not None and uid != os.geteuid():
                _grant(fd, uid)
        except (OSError, errors.RegionError):
            os.close(fd)
            os.unlink(path)
            raise
        try:
            os.ftruncate(fd, self.size)
            self._mm = mmap.mmap(fd, self.size, mmap.MAP_SHARED,
                                 mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as exc:
            os.close(fd)
            os.unlink(path)
            raise errors.RegionError(f"sizing or mapping {path}: "
                                     f"{exc}") from None
        self._buf = np.frombuffer(self._mm, np.uint8)
        self._base = self._buf.__array_interface__["data"][0]
        fshape = tuple(self.frame_shape)
        for k in range(self.slots):
            self._frames.append(self._view(
                k * self._slot_bytes + self._frame_off, self.frame_bytes,
                "u1", fshape))
            self._tensors.append(self._view(
                k * self._slot_bytes, self.tensor_bytes, self._plan.typestr,
                self._opts.shape))
        return name, fd

    def _registered(self, region_id: int) -> None:
        """Keeps the region id the daemon gave and the header of the
        ring's requests."""
        self.region_id = region_id
        req = self._opts.request()
        req.input_loc = req.output_loc = Location.SHM
        req.in_region = req.out_region = region_id
        req.shm_reply = self._shm_reply
        self._plan = _core.Plan(self._opts, req)
        try:
            srcs = [_core.check_frame(f, self._format) for f in self._frames]
        except errors.InvalidRequestError:
            return  # the format does not fit: every request says so
        for k, src in enumerate(srcs):
            head = self._plan.header.buffer(
                0, src.format, src.width, src.height, src.stride,
                src.addr - self._base, k * self._slot_bytes,
                self._out_capacity, src.span)
            self._slot_heads.append((head, _ffi.from_buffer(head)))
        self._slot_srcs = srcs
        f = self._frames[0]
        self._slot_form = (f.shape, f.strides)

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
        self._db_area = 0
        self._handed.clear()
        self._slot_srcs = []
        self._slot_heads = []
        self._buf = None
        self._frames = []
        self._tensors = []
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # views the caller holds keep the mapping alive
            self._mm = None

    def _view(self, offset: int, nbytes: int, dtype: str,
              shape: tuple) -> np.ndarray:
        assert self._buf is not None
        return self._buf[offset:offset + nbytes].view(dtype).reshape(shape)

    def _try_take(self, state: int) -> int | None:
        """Takes the least recently used free slot (caller holds the
        lock)."""
        if self._closed:
            raise errors.ClosedError("the ring was closed")
        if not self._free:
            return None
        k = self._free.popleft()
        self._state[k] = state
        return k

    def _frame_view(self, k: int, shape: Sequence[int] | None) -> np.ndarray:
        if shape is None:
            view = self._frames[k][...]
            if self._slot_srcs:
                self._handed[id(view)] = (k, view)
                self._handed_at[k] = id(view)
            return view
        shape = tuple(shape)
        n = int(np.prod(shape))
        if n > self.frame_bytes or len(shape) not in (2, 3):
            self._release(k)
            raise errors.InvalidRequestError(
                f"frame shape {shape} does not fit the ring's slot of "
                f"{self.frame_shape}")
        return self._view(k * self._slot_bytes + self._frame_off, n, "u1",
                          shape)

    def _claim_handed(self, frame: Any) -> int | None:
        """The slot of frame if it is a whole-slot view from next_frame,
        unchanged and not sent yet (the slot is then in flight), else
        None."""
        got = self._handed.pop(id(frame), None)
        if (got is None or got[1] is not frame or frame.dtype is not _U8 or
                (frame.shape, frame.strides) != self._slot_form):
            return None
        k = got[0]
        with self._lock:
            if self._closed or self._state[k] != _RESERVED:
                return None
            self._state[k] = _INFLIGHT
            self._handed_at[k] = 0
        return k

    def _forget_handed(self, k: int) -> None:
        """Drops slot k's entry in the handed views (caller holds the
        lock): a view sent as a crop, or not at all."""
        hid = self._handed_at[k]
        if hid:
            self._handed_at[k] = 0
            self._handed.pop(hid, None)

    def _slot_header(self, k: int, request_id: int,
                     limits: dict[str, Any]) -> Any:
        """The header (a cdata array) of the request for slot k's whole
        frame, after the checks against the daemon's limits."""
        if limits is not self._slot_checked:
            self._plan.check(self._slot_srcs[k], limits)
            self._slot_checked = limits
        head, ptr = self._slot_heads[k]
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

    def _claim(self, frame: Any) -> tuple[int | None, _core.Source]:
        """Checks frame; if it lies in a slot reserved by next_frame, marks
        that slot in flight and returns its index, else None."""
        src = _core.check_frame(frame, self._format)
        # The only slot whose frame area can hold the frame's first byte.
        k, at = divmod(src.addr - self._base - self._frame_off,
                       self._slot_bytes)
        with self._lock:
            if self._buf is None:
                raise errors.ClosedError("the ring was closed")
            if (0 <= k < self.slots and self._state[k] == _RESERVED and
                    at + src.span <= self.frame_bytes):
                self._state[k] = _INFLIGHT
                return k, src
        return None, src

    def _build(self, k: int, src: _core.Source, copy: bool, request_id: int,
               limits: dict[str, Any]) -> tuple[bytes, _core.Source]:
        """The request header for src in slot k, after copying src there if
        copy."""
        if copy:
            if src.span > self.frame_bytes:
                raise errors.LimitExceededError(
                    f"frame of {src.span} bytes is larger than the ring's "
                    f"slot of {self.frame_bytes}")
            a = src.array
            shape = (src.height, src.width, a.shape[2] if a.ndim == 3 else 1)
            n = shape[0] * shape[1] * shape[2]
            dst = self._view(k * self._slot_bytes + self._frame_off, n, "u1",
                             shape)
            np.copyto(dst, a.reshape(shape))
            src = _core.Source(src.format, src.width, src.height,
                               src.width * shape[2], n, dst,
                               _core.address_of(dst))
        plan = self._plan
        plan.check(src, limits)
        return plan.header.stamp(request_id, src.format, src.width,
                                 src.height, src.stride,
                                 src.addr - self._base, k * self._slot_bytes,
                                 self._out_capacity, src.span), src

    def _finish(self, k: int, rep: Any, src: _core.Source) -> _core.Result:
        if (rep.shape, rep.dtype, rep.tensor_size) == self._tensor_form:
            tensor = self._tensors[k][...]
        else:
            shape = tuple(rep.shape[:rep.ndim])
            tensor = self._view(k * self._slot_bytes, rep.tensor_size,
                                _core.DType(rep.dtype).numpy, shape)
        return _core.make_result(tensor, rep, src)

    def _release(self, k: int) -> None:
        with self._lock:
            self._forget_handed(k)
            self._state[k] = _FREE
            self._free.append(k)
        self._wake()

    def _wake(self) -> None:
        pass


class Ring(_RingBase):
    """A ring of shared-memory slots on a :class:`~frameprep.Client`
    (create it with :meth:`Client.ring`), for the zero-copy path over
    ``ipc://``.

    Each slot holds one frame of up to ``frame_shape`` uint8 pixels and one
    tensor of the ring's options. The ring hands out the least recently
    used free slot, and is safe to share between threads.

    Writing in place: ``buf = ring.next_frame()`` reserves the next slot
    and returns a writable numpy view (H, W, C) of its frame area; write
    the frame there (a decoder's output, ``cv2.resize(..., dst=buf)``,
    ``buf[:] = ...``) and pass ``buf`` (or a crop of it) to
    :meth:`preprocess`, which sends it without a copy (``buf`` itself, as
    next_frame() returned it, takes the quickest path). Any other array
    given to :meth:`preprocess` is copied into the next free slot.

    Tensor lifetime: the result's tensor is a numpy view of the slot's
    output area, not a copy. It is valid until the ring hands that slot
    out again, which happens only after every other free slot has been
    handed out: with one thread, for the next ``slots - 1`` requests on the
    ring. Threads or tasks sharing a ring should give it more slots than
    requests in flight (twice as many is comfortable) and read the tensor
    before their next request. Copy it (``result.tensor.copy()``) to keep
    it longer. After
    :meth:`close`, views still held keep the memory mapped (reading them
    is safe) but the daemon no longer writes there.

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
        name, fd = self._create(client.limits(), client.address)
        try:
            _, rep = client.request(self._register_request(name))
        except BaseException:
            self._unmap()
            raise
        finally:
            self._forget_name(name, fd)
        self._registered(rep.region_id)
        if self._db_entries:
            self._ring_doorbell()

    def _ring_doorbell(self) -> None:
        """Asks the daemon to poll the ring's doorbell area. A daemon
        that refuses (doorbells off, at its limit, or one that predates
        them) leaves the ring on nng alone."""
        try:
            self._client.request(Request(
                kind=Kind.DOORBELL, region_id=self.region_id,
                doorbell_entries=self._db_entries,
                doorbell_offset=self._db_off))
        except errors.FrameprepError:
            return
        self._db_area = self._base + self._db_off

    def __enter__(self) -> Ring:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _release(self, k: int) -> None:
        with self._lock:
            self._forget_handed(k)
            self._state[k] = _FREE
            self._free.append(k)
            if self._waiting:
                self._cond.notify_all()

    def _take(self, state: int) -> int:
        with self._lock:
            k = self._try_take(state)
        if k is not None:
            return k
        deadline = time.monotonic() + self._client.timeout
        with self._cond:
            while (k := self._try_take(state)) is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.RequestTimeoutError(
                        f"no free ring slot within "
                        f"{self._client.timeout:g} s")
                self._waiting += 1
                try:
                    self._cond.wait(left)
                finally:
                    self._waiting -= 1
            return k

    def next_frame(self, shape: Sequence[int] | None = None) -> np.ndarray:
        """Reserves the next free slot and returns a writable uint8 view of
        its frame area, of shape ``shape`` (default ``frame_shape``; at most
        the slot's bytes). Pass it to :meth:`preprocess`. Waits up to the
        client's timeout for a free slot
        (:class:`~frameprep.RequestTimeoutError`)."""
        return self._frame_view(self._take(_RESERVED), shape)

    def preprocess(self, frame: np.ndarray) -> _core.Result:
        """Preprocesses a frame through the ring: a view from
        :meth:`next_frame` (or a crop of one) as it lies, any other uint8
        array (H, W[, C]) after copying it into the next free slot. Returns
        a :class:`~frameprep.Result` whose tensor views the slot (see the
        class's tensor lifetime). Raises as :meth:`Client.preprocess`, and
        :class:`~frameprep.LimitExceededError` for a frame larger than a
        slot."""
        k = self._claim_handed(frame)
        handed = k is not None
        if k is not None:
            src = self._slot_srcs[k]
        else:
            k, src = self._claim(frame)
            copy = k is None
            if k is None:
                k = self._take(_INFLIGHT)
        try:
            client = self._client
            s = client._s
            request_id = s.next_id()
            limits = s._limits
            if limits is None:
                limits = client.limits()
            if handed:
                head = self._slot_header(k, request_id, limits)
            else:
                head, src = self._build(k, src, copy, request_id, limits)
            if k < self._db_entries and self._db_area:
                # Through the doorbell while the daemon polls it; the
                # reply header comes in the entry.
                at = (self._db_area + _core.DOORBELL_HEADER_SIZE +
                      k * _core.DOORBELL_ENTRY_SIZE)
                msg = None
                try:
                    taken = _core.doorbell_call(self._db_area, at, head,
                                                request_id, client.timeout)
                except errors.RequestTimeoutError:
                    self._db_area = 0  # taken, never answered: left alone
                    raise
                if taken:
                    at += _core.DOORBELL_REPLY_AT
                elif self._shm_reply:
                    at = self._base + k * self._slot_bytes + self._reply_off
                    msg = s.call_shm(head, at, request_id)
                else:
                    msg = s.call(head)
            elif self._shm_reply:
                at = self._base + k * self._slot_bytes + self._reply_off
                msg = s.call_shm(head, at, request_id)
            else:
                msg = s.call(head)
            if msg is None:  # the reply header in the slot
                head = bytes(self._buf[at - self._base:
                                       at - self._base + REPLY_HEADER_SIZE])
                length = REPLY_HEADER_SIZE
            else:
                try:
                    head, length = _core.reply_head(msg)
                finally:
                    _lib.nng_msg_free(msg)
            if handed and self._usual_reply(head, length, request_id):
                return _core.new_result(self._tensors[k][...], request_id,
                                        src, None, head, length)
            rep = Reply.decode(head, length)
            _core.check_reply(rep, request_id, _FRAME)
            return self._finish(k, rep, src)
        finally:
            self._release(k)

    def close(self) -> None:
        """Unregisters the region (best effort) and unmaps it. Requests on
        the ring must have finished. Closing twice is a no-op."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._client.request(Request(kind=Kind.UNREGISTER,
                                         region_id=self.region_id))
        except errors.FrameprepError:
            pass
        self._unmap()


class AsyncRing(_RingBase):
    """The asyncio form of :class:`Ring`, made by :meth:`AsyncClient.ring`:
    ``await ring.next_frame()``, ``await ring.preprocess(frame)``, ``await
    ring.aclose()`` or ``async with``. Same slots, lifetimes and errors."""

    def __init__(self, client: AsyncClient, slots: int,
                 frame: Sequence[int], **options: Any):
        super().__init__(slots, frame, options)
        self._client = client
        self._freed = asyncio.Event()

    async def _register(self) -> None:
        name, fd = self._create(await self._client.limits(),
                                self._client.address)
        try:
            _, rep = await self._client.request(
                self._register_request(name))
        except BaseException:
            self._unmap()
            raise
        finally:
            self._forget_name(name, fd)
        self._registered(rep.region_id)

    async def __aenter__(self) -> AsyncRing:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _wake(self) -> None:
        self._freed.set()

    async def _take(self, state: int) -> int:
        deadline = time.monotonic() + self._client.timeout
        while True:
            with self._lock:
                k = self._try_take(state)
            if k is not None:
                return k
            self._freed.clear()
            left = deadline - time.monotonic()
            try:
                await asyncio.wait_for(self._freed.wait(), max(left, 0))
            except asyncio.TimeoutError:
                raise errors.RequestTimeoutError(
                    f"no free ring slot within "
                    f"{self._client.timeout:g} s") from None

    async def next_frame(self,
                         shape: Sequence[int] | None = None) -> np.ndarray:
        """See :meth:`Ring.next_frame`."""
        return self._frame_view(await self._take(_RESERVED), shape)

    async def preprocess(self, frame: np.ndarray) -> _core.Result:
        """See :meth:`Ring.preprocess`."""
        limits = await self._client.limits()
        k = self._claim_handed(frame)
        handed = k is not None
        if k is not None:
            src = self._slot_srcs[k]
        else:
            k, src = self._claim(frame)
            copy = k is None
            if k is None:
                k = await self._take(_INFLIGHT)
        try:
            request_id = self._client._s.next_id()
            if handed:
                head = self._slot_header(k, request_id, limits)
            else:
                head, src = self._build(k, src, copy, request_id, limits)
            _, rep = await self._client._roundtrip(
                request_id, Kind.FRAME, _core.message(head))
            return self._finish(k, rep, src)
        finally:
            self._release(k)

    async def aclose(self) -> None:
        """See :meth:`Ring.close`."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            await self._client.request(Request(kind=Kind.UNREGISTER,
                                               region_id=self.region_id))
        except errors.FrameprepError:
            pass
        self._unmap()
