"""CUDA regions: frames read from, and tensors written into, the caller's
own GPU memory, without a copy through the host.

Any tensor that exposes ``__cuda_array_interface__`` (CuPy, Numba, PyTorch)
or DLPack (``__dlpack__`` / ``__dlpack_device__``: PyTorch, CuPy, JAX) is
accepted; neither PyTorch nor CuPy is needed. The allocation holding a
tensor (``cuMemGetAddressRange``), its IPC handle (``cuIpcGetMemHandle``)
and the device's UUID (``cuDeviceGetUuid``), what the daemon needs to open
it, are found by the C library (``src/lib/cuda_ptr.c``, the driver opened
at run time); cuda-python (``pip install 'frameprep-client[cuda]'``) is
needed only to synchronise a producer's stream that a
``__cuda_array_interface__`` names.

The daemon opens a whole allocation once (REGISTER_CUDA) and the client
caches that region per allocation, so ``batch[k]`` of one (N, 3, H, W)
batch costs one registration for all k. A region stays open until
:meth:`frameprep.Client.release_cuda` or the connection closes. Freeing the
memory while the daemon has it open is undefined behaviour in CUDA: release
the regions before the memory goes (``del batch``, or
``torch.cuda.empty_cache()`` returning a caching allocator's blocks).

Stream semantics: a frame must be complete in device memory before it is
sent (synchronise the stream that wrote it; a ``__cuda_array_interface__``
that names a stream is synchronised here). A tensor written by the daemon
is complete when the reply arrives: the consumer reads it with no
synchronisation of its own.
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
from typing import Any

_K_DLCUDA = 2  # DLDeviceType kDLCUDA
_DL_CODES = {0: "i", 1: "u", 2: "f"}  # DLDataTypeCode -> typestr kind

_drv: Any = None
_lock = threading.Lock()


def driver() -> Any:
    """cuda-python's driver bindings, initialised once. Raises ImportError
    with the command that installs them."""
    global _drv
    if _drv is not None:
        return _drv
    with _lock:
        if _drv is None:
            try:
                from cuda.bindings import driver as drv  # cuda-python >= 12.6
            except ImportError:
                try:
                    from cuda import cuda as drv  # older cuda-python
                except ImportError:
                    raise ImportError(
                        "CUDA regions need cuda-python's driver bindings: "
                        "pip install 'frameprep-client[cuda]' (or cuda-python)"
                    ) from None
            _check(drv, drv.cuInit(0), "cuInit")
            _drv = drv
    return _drv


def _check(drv: Any, ret: Any, what: str) -> Any:
    """Unpacks a cuda-python result tuple; raises CudaError on failure."""
    from .errors import CudaError
    err, *rest = ret if isinstance(ret, tuple) else (ret,)
    if int(err) != 0:
        _, name = drv.cuGetErrorName(err)
        text = name.decode() if isinstance(name, bytes) else str(err)
        raise CudaError(f"{what}: {text}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def _as_bytes(v: Any, n: int) -> bytes:
    """Bytes of a driver struct's char array (bytes, or ints maybe signed)."""
    if isinstance(v, (bytes, bytearray)):
        b = bytes(v)
    else:
        b = bytes(int(x) & 0xFF for x in v)
    return b[:n].ljust(n, b"\0")


@dataclasses.dataclass(frozen=True)
class DeviceArray:
    """A CUDA array as frameprep sees it: the address of its first byte,
    shape, strides in bytes, numpy typestr, device ordinal and the bytes
    from its first to its last element (``span``); the producer's
    stream, if it named one, and its allocation's buffer ID
    (:func:`pointer`) when :func:`describe` asked the driver."""

    ptr: int
    """The device address of the first byte."""
    shape: tuple[int, ...]
    """The array's shape."""
    strides: tuple[int, ...]
    """Strides in bytes."""
    typestr: str
    """The numpy typestr ("|u1", "<f4", "<f2")."""
    device: int
    """The CUDA device ordinal."""
    span: int
    """Bytes from the first element to the end of the last."""
    stream: int | None = None
    """The producer's stream, if it named one."""
    buffer_id: int | None = None
    """The allocation's buffer ID, when :func:`describe` asked the driver."""

    @property
    def itemsize(self) -> int:
        """Bytes per element, from the typestr."""
        return int(self.typestr[2:])

    def contiguous(self) -> bool:
        """C-contiguous (row-major, packed)."""
        step = self.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != step:
                return False
            step *= n
        return True


def _span(shape: tuple[int, ...], strides: tuple[int, ...], item: int) -> int:
    if any(n == 0 for n in shape):
        return 0
    return sum((n - 1) * s for n, s in zip(shape, strides)) + item


def _c_strides(shape: tuple[int, ...], item: int) -> tuple[int, ...]:
    out, step = [], item
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor),
                             ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# The destructor sees a capsule being freed: it is passed as an address,
# never as an object (no reference counting on a dying object).
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                  ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                               _CAPSULE_DESTRUCTOR]


def is_cuda(obj: Any) -> bool:
    """Whether obj is a CUDA array (by its protocols; nothing is imported)."""
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None:
        return False
    try:
        return int(dev()[0]) == _K_DLCUDA
    except Exception:
        return False


def describe(obj: Any) -> DeviceArray:
    """Reads a CUDA array's address, shape, strides and dtype from
    ``__cuda_array_interface__`` or else from its DLPack capsule (the
    DLManagedTensor read with ctypes; the capsule is left unconsumed, so
    its own destructor frees it). Raises InvalidRequestError for an object
    that is neither, or lives in host memory."""
    from .errors import InvalidRequestError
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(n) for n in cai["shape"])
        typestr = cai["typestr"]
        item = int(typestr[2:])
        strides = (tuple(int(s) for s in cai["strides"])
                   if cai.get("strides") else _c_strides(shape, item))
        ptr = int(cai["data"][0])
        stream = cai.get("stream")
        bid, ordinal = pointer(ptr)
        return DeviceArray(ptr, shape, strides, typestr, ordinal,
                           _span(shape, strides, item),
                           int(stream) if stream not in (None, 0) else None,
                           bid)
    if not hasattr(obj, "__dlpack__"):
        raise InvalidRequestError(
            f"{type(obj).__name__} exposes neither __cuda_array_interface__ "
            f"nor __dlpack__")
    dev_type, dev_id = obj.__dlpack_device__()
    if int(dev_type) != _K_DLCUDA:
        raise InvalidRequestError(
            f"DLPack device type {dev_type} is not CUDA ({_K_DLCUDA})")
    capsule = obj.__dlpack__()
    addr = _api.PyCapsule_GetPointer(capsule, b"dltensor")
    t = _DLManagedTensor.from_address(addr).dl_tensor
    if t.dtype.lanes != 1 or t.dtype.code not in _DL_CODES:
        raise InvalidRequestError(
            f"DLPack dtype code {t.dtype.code} bits {t.dtype.bits} lanes "
            f"{t.dtype.lanes} is not a plain number")
    item = t.dtype.bits // 8
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = (tuple(int(t.strides[i]) * item for i in range(t.ndim))
               if t.strides else _c_strides(shape, item))
    typestr = "<" + _DL_CODES[t.dtype.code] + str(item)
    if item == 1:
        typestr = "|" + typestr[1:]
    ptr = int(t.data or 0) + int(t.byte_offset)
    del capsule
    return DeviceArray(ptr, shape, strides, typestr, int(dev_id),
                       _span(shape, strides, item))


def pointer(ptr: int) -> tuple[int, int]:
    """(buffer ID, device ordinal) of the allocation holding the device
    memory at ptr, with one driver call (``cuPointerGetAttributes``; the
    C library's ``fprep__cuda_ptr_id``). The buffer ID is unique within
    the process for its whole life: an allocation freed and made again at
    the same address has another. Raises
    :class:`~frameprep.UnsupportedError` (no CUDA driver here),
    :class:`~frameprep.InvalidRequestError` (not device memory) or
    :class:`~frameprep.CudaError`."""
    from . import _native
    bid, ordinal = _native.cuda_pointer(ptr)
    return int(bid), int(ordinal)


@dataclasses.dataclass(frozen=True)
class Allocation:
    """The allocation holding a device buffer, as REGISTER_CUDA names it:
    base address, size, IPC handle (64 bytes), device UUID (16 bytes)."""

    base: int
    """The allocation's device address."""
    size: int
    """The allocation's size in bytes."""
    handle: bytes
    """Its CUDA IPC memory handle (64 bytes)."""
    uuid: bytes
    """Its device's UUID (16 bytes)."""


def allocation(ptr: int) -> Allocation:
    """Finds the allocation holding ptr, its IPC handle and its device's
    UUID, as the C library tells the daemon of it (``cuda_ptr.c``, the
    driver opened at run time). Raises
    :class:`~frameprep.UnsupportedError` (no CUDA driver here),
    :class:`~frameprep.InvalidRequestError` (not device memory, or no IPC
    handle for it: a stream-ordered pool or cuMemMap memory) or
    :class:`~frameprep.CudaError`."""
    from . import _native
    base, size, handle, uuid, _ = _native.cuda_allocation(ptr)
    return Allocation(base, size, bytes(handle), bytes(uuid))


def sync_stream(stream: int) -> None:
    """Waits for a producer's stream (from __cuda_array_interface__)."""
    drv = driver()
    if stream in (1, 2):  # legacy / per-thread default stream
        _check(drv, drv.cuCtxSynchronize(), "cuCtxSynchronize")
        return
    _check(drv, drv.cuStreamSynchronize(drv.CUstream(stream)),
           "cuStreamSynchronize")


class CudaTensor:
    """A tensor the daemon wrote into GPU memory: the caller's own when it
    passed ``out=``, exposed again as ``__cuda_array_interface__`` version
    3 and DLPack, so PyTorch (``torch.as_tensor(t, device="cuda")``,
    ``torch.from_dlpack(t)``), CuPy or CV-CUDA consume it without a copy.

    The daemon replies only after the work on this memory has completed:
    the tensor is ready when this object exists. So the interface's
    ``stream`` is None (no synchronisation needed) and ``__dlpack__``
    ignores the consumer's stream. ``owner`` (the caller's ``out``, if
    any) is kept alive with it."""

    def __init__(self, arr: DeviceArray, owner: Any = None):
        self._arr = arr
        self.owner = owner
        """The caller's ``out``, kept alive with the tensor (or None)."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape."""
        return self._arr.shape

    @property
    def dtype(self) -> str:
        """The numpy typestr of its elements."""
        return self._arr.typestr

    @property
    def device(self) -> int:
        """The CUDA device ordinal."""
        return self._arr.device

    @property
    def ptr(self) -> int:
        """The device address of its first byte."""
        return self._arr.ptr

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        a = self._arr
        return {"version": 3, "shape": a.shape, "typestr": a.typestr,
                "data": (a.ptr, False), "strides": a.strides,
                "stream": None}

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_K_DLCUDA, self._arr.device)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: Any = None) -> Any:
        """A DLPack capsule ("dltensor") viewing this memory; its deleter
        releases the reference it holds on this object."""
        return _export(self)

    def __repr__(self) -> str:
        a = self._arr
        return (f"CudaTensor(shape={a.shape}, dtype={a.typestr}, "
                f"device=cuda:{a.device}, ptr={a.ptr:#x})")


_exported: dict[int, tuple[Any, ...]] = {}  # DLManagedTensor address -> what it keeps


def _dl_deleter_py(mt: Any) -> None:
    _exported.pop(ctypes.cast(mt, ctypes.c_void_p).value or 0, None)


def _capsule_destructor_py(capsule: int) -> None:
    # An unconsumed capsule frees its tensor; a consumer renamed it to
    # "used_dltensor" and calls the deleter itself.
    if _raw_is_valid(capsule, b"dltensor"):
        _exported.pop(_raw_get_pointer(capsule, b"dltensor"), None)


# The C callbacks (kept alive here for the life of the module).
_dl_deleter = _DELETER(_dl_deleter_py)
_capsule_destructor = _CAPSULE_DESTRUCTOR(_capsule_destructor_py)


def _export(t: CudaTensor) -> Any:
    a = t._arr
    item = a.itemsize
    kind = {"i": 0, "u": 1, "f": 2}[a.typestr[1]]
    n = len(a.shape)
    shape = (ctypes.c_int64 * n)(*a.shape)
    strides = (ctypes.c_int64 * n)(*(s // item for s in a.strides))
    mt = _DLManagedTensor()
    mt.dl_tensor.data = a.ptr
    mt.dl_tensor.device = _DLDevice(_K_DLCUDA, a.device)
    mt.dl_tensor.ndim = n
    mt.dl_tensor.dtype = _DLDataType(kind, item * 8, 1)
    mt.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    mt.dl_tensor.strides = ctypes.cast(strides,
                                       ctypes.POINTER(ctypes.c_int64))
    mt.dl_tensor.byte_offset = 0
    mt.manager_ctx = None
    mt.deleter = _dl_deleter
    addr = ctypes.addressof(mt)
    _exported[addr] = (mt, shape, strides, t)
    return _api.PyCapsule_New(addr, b"dltensor", _capsule_destructor)


@dataclasses.dataclass(frozen=True)
class Exported:
    """A CUDA buffer described for another process (picklable): the
    allocation's IPC handle and device UUID, the buffer's byte offset in
    the allocation, its shape and numpy typestr (C-contiguous). A producer
    passes it (or ``exported[k]``, element k along the first axis) as
    ``out=`` to :meth:`frameprep.Client.preprocess`, and the daemon writes
    the tensor straight into the memory of the process that exported it.
    That process must keep the memory allocated until the producer's
    connection released its region (``release_cuda``) or closed."""

    handle: bytes
    """The allocation's CUDA IPC memory handle (64 bytes)."""
    uuid: bytes
    """The device's UUID (16 bytes)."""
    alloc_size: int
    """The allocation's size in bytes."""
    offset: int
    """The buffer's byte offset in the allocation."""
    shape: tuple[int, ...]
    """The buffer's shape (C-contiguous)."""
    typestr: str
    """The numpy typestr of its elements."""

    @property
    def nbytes(self) -> int:
        """The buffer's size in bytes."""
        n = int(self.typestr[2:])
        for d in self.shape:
            n *= d
        return n

    def __getitem__(self, k: int) -> Exported:
        n = self.shape[0]
        if not -n <= k < n:
            raise IndexError(f"element {k} of {n}")
        k %= n
        sub = Exported(self.handle, self.uuid, self.alloc_size, self.offset,
                       self.shape[1:], self.typestr)
        return dataclasses.replace(sub, offset=self.offset + k * sub.nbytes)


def export(tensor: Any) -> Exported:
    """Describes a C-contiguous CUDA tensor for another process (see
    :class:`Exported`). Raises InvalidRequestError (not contiguous),
    CudaError or ImportError."""
    from .errors import InvalidRequestError
    a = describe(tensor)
    if not a.contiguous():
        raise InvalidRequestError(f"strides {a.strides} are not "
                                  f"C-contiguous")
    alloc = allocation(a.ptr)
    return Exported(alloc.handle, alloc.uuid, alloc.size,
                    a.ptr - alloc.base, a.shape, a.typestr)


class Regions:
    """One connection's CUDA regions, one per allocation, registered on
    first use (REGISTER_CUDA) and kept until :meth:`release`. ``call``
    sends a request and returns its reply (the client's plumbing).

    An allocation of this process is known by its buffer ID
    (:func:`pointer`, one driver call a request, made by :func:`describe`
    already for a ``__cuda_array_interface__``); its base, size and
    region are kept per ID, so the allocation's full lookup (address
    range, IPC handle, device UUID: :func:`allocation`) and registration
    happen once. A pointer into memory freed and allocated again has a
    new ID, so it never maps to the old allocation's region."""

    def __init__(self, call: Any):
        self._call = call
        # (IPC handle, size) of another process's allocation -> region id
        self._by_alloc: dict[tuple[Any, int], int] = {}
        # buffer ID -> (base, size, region id) of this process's
        self._by_buffer: dict[int, tuple[int, int, int]] = {}
        self._lock = threading.Lock()
        self._registering = threading.Lock()  # one registration at a time

    def region_of(self, arr: DeviceArray) -> tuple[int, int]:
        """(region id, offset of arr in it), registering its allocation
        the first time. Raises the daemon's errors (UnsupportedError over
        tcp:// or on the CPU backend, PermissionDeniedError when CUDA
        regions are off, LimitExceededError past max-cuda-regions) and
        those of :func:`pointer` and :func:`allocation`."""
        ptr, bid = arr.ptr, arr.buffer_id
        if bid is None:
            bid = pointer(ptr)[0]
        with self._lock:
            got = self._by_buffer.get(bid)
        if got is None:
            with self._registering:
                with self._lock:
                    got = self._by_buffer.get(bid)
                if got is None:
                    got = self._register(ptr, bid)
        base, size, rid = got
        if not base <= ptr < base + size:  # one ID, one allocation
            raise AssertionError(f"pointer {ptr:#x} outside buffer {bid}'s "
                                 f"allocation at {base:#x} of {size}")
        return rid, ptr - base

    def _register(self, ptr: int, bid: int) -> tuple[int, int, int]:
        """Registers the allocation holding ptr (buffer ID bid) and keeps
        it; returns (base, size, region id)."""
        from .protocol import Kind, Request
        alloc = allocation(ptr)
        rep = self._call(Request(kind=Kind.REGISTER_CUDA,
                                 region_size=alloc.size, cuda_offset=0,
                                 cuda_handle=alloc.handle,
                                 cuda_uuid=alloc.uuid))
        got = (alloc.base, alloc.size, int(rep.region_id))
        with self._lock:
            self._by_buffer[bid] = got
        return got

    def region_of_export(self, exp: Exported) -> int:
        """The region id of another process's exported allocation,
        registering it the first time (cached by handle)."""
        from .protocol import Kind, Request
        key = (exp.handle, exp.alloc_size)
        with self._lock:
            rid = self._by_alloc.get(key)
        if rid is None:
            rep = self._call(Request(kind=Kind.REGISTER_CUDA,
                                     region_size=exp.alloc_size,
                                     cuda_offset=0, cuda_handle=exp.handle,
                                     cuda_uuid=exp.uuid))
            rid = rep.region_id
            with self._lock:
                self._by_alloc[key] = rid
        return rid

    def count(self) -> int:
        """The number of regions registered now."""
        with self._lock:
            return len(self._by_alloc) + len(self._by_buffer)

    def release(self) -> None:
        """Unregisters every region: when it returns, the daemon no longer
        touches any of this connection's device memory."""
        from .protocol import Kind, Request
        with self._lock:
            ids = list(self._by_alloc.values())
            ids += [rid for _, _, rid in self._by_buffer.values()]
            self._by_alloc.clear()
            self._by_buffer.clear()
        for rid in ids:
            self._call(Request(kind=Kind.UNREGISTER, region_id=rid))


def source(frame: Any, format: str | None = None) -> Any:
    """Checks a CUDA frame: uint8 (H, W) or (H, W, C) with C in 1, 3, 4,
    packed pixels (rows may be strided). Returns a Source whose ``dev`` is
    its DeviceArray and ``stream`` the producer's stream, if it named one.
    Raises InvalidRequestError."""
    from . import _core
    from .errors import InvalidRequestError
    a = describe(frame)
    if a.typestr[1:] != "u1":
        raise InvalidRequestError(f"CUDA frame dtype {a.typestr} is not "
                                  f"uint8")
    if format is not None:
        fmt = _core._pick(_core._FORMATS, format, "format")
        if fmt.is_yuv:
            return _yuv_source(a, fmt)
    shape, strides = a.shape, a.strides
    if len(shape) == 2:
        shape, strides = shape + (1,), strides + (1,)
    if len(shape) != 3 or shape[2] not in (1, 3, 4):
        raise InvalidRequestError(f"CUDA frame shape {a.shape} is not "
                                  f"(H, W), (H, W, 1), (H, W, 3) or "
                                  f"(H, W, 4)")
    h, w, c = shape
    if h < 1 or w < 1:
        raise InvalidRequestError(f"CUDA frame shape {a.shape} is empty")
    if (strides[2] != 1 and c != 1) or (strides[1] != c and w != 1) or \
            strides[0] < w * c:
        raise InvalidRequestError(
            f"CUDA frame strides {a.strides} are not packed pixels "
            f"(make it contiguous first)")
    if format is None:
        fmt = _core._DEFAULT_FORMATS[c]
    else:
        fmt = _core._pick(_core._FORMATS, format, "format")
        if fmt.channels != c:
            raise InvalidRequestError(
                f"format {format} has {fmt.channels} channels but the "
                f"CUDA frame has {c}")
    src = _core.Source(fmt, w, h, strides[0], strides[0] * (h - 1) + w * c,
                       None, a.ptr)  # type: ignore[arg-type]
    src.dev = a  # type: ignore[attr-defined]
    src.stream = a.stream  # type: ignore[attr-defined]
    return src


def _yuv_source(a: Any, fmt: Any) -> Any:
    """A contiguous CUDA YUV frame in OpenCV's layout, as
    :func:`frameprep._core.check_frame` takes it on the host: NV12 and
    I420 (H * 3 / 2, W), YUYV (H, W, 2)."""
    from . import _core
    from .errors import InvalidRequestError
    from .protocol import PixelFormat
    shape, name = tuple(a.shape), fmt.name.lower()
    if fmt == PixelFormat.YUYV:
        if len(shape) != 3 or shape[2] != 2:
            raise InvalidRequestError(f"a yuyv frame is (H, W, 2), not "
                                      f"{shape}")
        h, w = shape[0], shape[1]
    else:
        if len(shape) != 2 or shape[0] % 3 != 0:
            raise InvalidRequestError(f"a {name} frame is (H * 3 / 2, W) "
                                      f"with H even, not {shape}")
        h, w = shape[0] // 3 * 2, shape[1]
    if w < 2 or h < 1 or w % 2 or (fmt != PixelFormat.YUYV and h % 2):
        raise InvalidRequestError(f"{name} frame {w}x{h}: width and "
                                  f"height must be even")
    if _c_strides(shape, 1) != tuple(a.strides):
        raise InvalidRequestError(
            f"CUDA {name} frame strides {a.strides} are not contiguous "
            f"(make it contiguous first)")
    span = 1
    for n in shape:
        span *= n
    planes = (0, 0, 0)
    stride = 2 * w if fmt == PixelFormat.YUYV else w
    if fmt != PixelFormat.YUYV:
        uv = w if fmt == PixelFormat.NV12 else w // 2
        planes = (uv, w * h,
                  w * h + uv * (h // 2) if fmt == PixelFormat.I420 else 0)
    src = _core.Source(fmt, w, h, stride, span,
                       None, a.ptr, planes)  # type: ignore[arg-type]
    src.dev = a  # type: ignore[attr-defined]
    src.stream = a.stream  # type: ignore[attr-defined]
    return src


def _bare_typestr(typestr: str) -> str:
    """typestr without its byte-order mark ("<f4" and "f4" -> "f4")."""
    return typestr[1:] if typestr[:1] in "<>|=" else typestr


def check_exported(out: Exported | DeviceArray, plan: Any) -> None:
    """Checks an exported ``out`` (or a described one) against the
    request's tensor: shape (1, C, H, W) / (C, H, W) (or NHWC alike) and
    dtype. Raises InvalidRequestError."""
    from .errors import InvalidRequestError
    want = tuple(plan.shape)
    if out.shape not in (want, want[1:]):
        raise InvalidRequestError(f"out shape {out.shape} is not {want} or "
                                  f"{want[1:]}")
    if _bare_typestr(out.typestr) != _bare_typestr(plan.typestr):
        raise InvalidRequestError(f"out dtype {out.typestr} is not "
                                  f"{plan.typestr}")


def out_place(regions: Regions, out: Any, shape: tuple[int | None, ...],
              typestr: str) -> tuple[tuple[int, int, int, int],
                                     DeviceArray | None]:
    """Where a CUDA ``out`` takes a tensor of ``shape`` and typestr: a
    C-contiguous tensor of this process, registered through regions
    (:meth:`Regions.region_of`), or an :class:`Exported` of another's.
    ``shape[0]`` None takes any number of rows K >= 1 (a stream's
    frames). Returns ((output_loc CUDA, region id, byte offset, capacity:
    out's bytes), out's DeviceArray, or None for an Exported). Raises
    InvalidRequestError naming the field (shape, dtype, strides) before
    anything is registered, and the errors of :meth:`Regions.region_of`."""
    from .errors import InvalidRequestError
    from .protocol import Location
    if isinstance(out, Exported):
        got, ts, dev = tuple(out.shape), out.typestr, None
    else:
        dev = describe(out)
        got, ts = dev.shape, dev.typestr
    want = tuple("K" if n is None else n for n in shape)
    if len(got) != len(shape) or any(
            n != g for n, g in zip(shape, got) if n is not None) or \
            (shape and shape[0] is None and got[0] < 1):
        text = ", ".join(str(n) for n in want)
        raise InvalidRequestError(
            f"out shape {got} is not the tensor's ({text})"
            + (", K >= 1" if shape and shape[0] is None else ""))
    if _bare_typestr(ts) != _bare_typestr(typestr):
        raise InvalidRequestError(f"out dtype {ts} is not {typestr}")
    if dev is None:
        assert isinstance(out, Exported)
        return (Location.CUDA, regions.region_of_export(out), out.offset,
                out.nbytes), None
    if not dev.contiguous():
        raise InvalidRequestError(
            f"out strides {dev.strides} are not C-contiguous")
    rid, offset = regions.region_of(dev)
    return (Location.CUDA, rid, offset, dev.span), dev


def check_out(out: Any, plan: Any) -> DeviceArray:
    """Checks an ``out`` tensor against the request's tensor as
    :func:`check_exported` does, and that it is C-contiguous. Raises
    InvalidRequestError."""
    from .errors import InvalidRequestError
    a = describe(out)
    check_exported(a, plan)
    if not a.contiguous():
        raise InvalidRequestError(f"out strides {a.strides} are not "
                                  f"C-contiguous")
    return a
