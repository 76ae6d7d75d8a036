"""frameprep: the Python client of frameprepd, a GPU preprocessing daemon.

Numpy frames in, model-ready tensors out::

    import cv2, frameprep
    with frameprep.Client() as client:
        result = client.preprocess(cv2.imread("bus.jpg"))   # BGR (H, W, 3)
    result.tensor            # float32 (1, 3, 640, 640), RGB, letterboxed, /255

:class:`Client` is blocking and thread-safe, :class:`AsyncClient` the same
over asyncio, :meth:`Client.ring` a shared-memory ring (ipc:// only).
:mod:`frameprep.cuda` keeps frames and tensors on the GPU:
``client.preprocess(frame, out=batch[k])`` writes into the caller's CUDA
tensor (``pip install 'frameprep-client[cuda]'``).
Errors are :class:`FrameprepError` subclasses, one per daemon status
(:mod:`frameprep.errors`). The work is the C library's (libframeprep,
bound by the extension :mod:`frameprep._native`): its wire codec (faced
by :mod:`frameprep.protocol`), client, rings, doorbells and regions.
"""

__version__ = "0.1.0"

from ._core import (BatchResult, CudaArray, DTypeName, DTypeOption,
                    ElementTransform, F16Option, F32Option, FormatName, Frame, LayoutName, MatrixName, Options, OrderName,
                    ResizeName, Result, RoundingName, Timings, Transform,
                    U8Option, YuvRangeName, default_address)
from .client import AsyncClient, Client
from .errors import (BY_STATUS, BitstreamError, ClosedError, CudaError, ForkedError,
                     FrameprepError,
                     InternalError, InvalidRequestError, LimitExceededError,
                     MismatchError, NvrtcError, PermissionDeniedError,
                     ProtocolError, RegionError, RequestTimeoutError,
                     RingFullError, ServerBusyError, ServerIOError, ServerOutOfMemoryError,
                     ServerShuttingDownError, TransportError,
                     UnsupportedError, VersionMismatchError,
                     error_for_status)
from .ring import AsyncRing, Ring, RingFrame, RingResult
from . import video
from .video import AsyncVideoStream, Codec, VideoFrame, VideoStream

__all__ = [
    "AsyncClient", "AsyncRing", "AsyncVideoStream", "BY_STATUS", "BatchResult", "BitstreamError",
    "Client",
    "ClosedError", "CudaArray", "ElementTransform", "F16Option",
    "F32Option", "Frame", "RoundingName", "U8Option",
    "DTypeName", "DTypeOption", "FormatName", "LayoutName", "MatrixName",
    "OrderName", "ResizeName", "YuvRangeName",
    "Codec", "CudaError", "ForkedError", "FrameprepError", "InternalError", "InvalidRequestError",
    "LimitExceededError", "MismatchError", "NvrtcError", "Options",
    "PermissionDeniedError", "ProtocolError", "RegionError",
    "RequestTimeoutError", "Result", "Ring", "RingFrame", "RingFullError",
    "RingResult",
    "ServerBusyError",
    "ServerIOError", "ServerOutOfMemoryError", "ServerShuttingDownError",
    "Timings", "Transform", "TransportError", "UnsupportedError",
    "VersionMismatchError", "VideoFrame", "VideoStream", "__version__",
    "default_address",
    "error_for_status", "video",
]
