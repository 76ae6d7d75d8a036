"""Exceptions: one class per daemon status (``enum fprep_err`` in
``include/frameprep/frameprep.h``).

Every class derives from :class:`FrameprepError`, carries the status number
(``status``), its enum name (``name``, e.g. "ELIMIT") and the daemon's
sentence (``message``). A reply with a non-zero status raises the class of
that status; the client raises the same classes for what it can check
before sending. Invalid input also derives from ``ValueError``, transport
failures from ``ConnectionError``, timeouts from ``TimeoutError``.
"""

from __future__ import annotations


class FrameprepError(Exception):
    """Base of every frameprep error. ``status`` is the ``enum fprep_err``
    number (0 only for errors of unknown status), ``message`` the
    daemon's or the client's sentence."""

    status: int = 0
    """The ``enum fprep_err`` number (each subclass has its own)."""
    name: str = "UNKNOWN"
    """The enum name without ``FPREP_``, e.g. "ELIMIT"."""

    def __init__(self, message: str = "", status: int | None = None):
        super().__init__(message)
        self.message = message
        """The daemon's or the client's sentence."""
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return f"{self.name}: {self.message}" if self.message else self.name


class ProtocolError(FrameprepError):
    """EPROTO: a malformed message (from the daemon, or a reply the
    client cannot read)."""

    status, name = 1, "EPROTO"


class VersionMismatchError(FrameprepError):
    """EVERSION: unsupported protocol version."""

    status, name = 2, "EVERSION"


class InvalidRequestError(FrameprepError, ValueError):
    """EINVAL: a field has an invalid value (dtype, shape, option)."""

    status, name = 3, "EINVAL"


class LimitExceededError(FrameprepError, ValueError):
    """ELIMIT: a size exceeds a limit the daemon enforces (see INFO)."""

    status, name = 4, "ELIMIT"


class RingFullError(LimitExceededError):
    """ELIMIT: a ring's caller asked for a slot while it holds every slot
    itself (results not released, numpy views of released results' tensors
    still alive, frames reserved and not sent), none in flight: no slot
    could come free while it waited, so it is told at once. Release
    results (and drop views of them) sooner, or give the ring more
    slots."""


class ServerOutOfMemoryError(FrameprepError, MemoryError):
    """ENOMEM: the daemon (or the client) ran out of memory."""

    status, name = 5, "ENOMEM"


class ServerBusyError(FrameprepError):
    """EBUSY: the daemon has no room for the request now (its
    max_inflight_per_conn on this connection, or its reply-memory budget);
    retry."""

    status, name = 6, "EBUSY"


class ServerShuttingDownError(FrameprepError):
    """ESHUTDOWN: the daemon is stopping."""

    status, name = 7, "ESHUTDOWN"


class CudaError(FrameprepError):
    """ECUDA: a CUDA call failed in the daemon."""

    status, name = 8, "ECUDA"


class NvrtcError(FrameprepError):
    """ENVRTC: runtime kernel compilation failed in the daemon."""

    status, name = 9, "ENVRTC"


class TransportError(FrameprepError, ConnectionError):
    """ETRANSPORT: the connection failed (nobody listens, connection
    lost, socket closed under a request)."""

    status, name = 10, "ETRANSPORT"


class RequestTimeoutError(FrameprepError, TimeoutError):
    """ETIMEDOUT: no reply within the client's timeout."""

    status, name = 11, "ETIMEDOUT"


class RegionError(FrameprepError):
    """EREGION: a shared-memory region could not be created, mapped or
    used (unknown id, span outside it, object shrunk)."""

    status, name = 12, "EREGION"


class PermissionDeniedError(FrameprepError, PermissionError):
    """EPERM: permission denied (e.g. a region owned by another user)."""

    status, name = 13, "EPERM"


class InternalError(FrameprepError):
    """EINTERNAL: a bug in the daemon."""

    status, name = 14, "EINTERNAL"


class ServerIOError(FrameprepError):
    """EIO: an input/output error in the daemon."""

    status, name = 15, "EIO"


class UnsupportedError(FrameprepError):
    """EUNSUPPORTED: not supported (e.g. shared memory over tcp://)."""

    status, name = 16, "EUNSUPPORTED"


class ClosedError(FrameprepError):
    """ECLOSED: the client or ring was closed."""

    status, name = 17, "ECLOSED"


class MismatchError(FrameprepError):
    """EMISMATCH: a reply that does not match its request."""

    status, name = 18, "EMISMATCH"


class ForkedError(FrameprepError):
    """EFORKED: a client (or ring, or request) of the parent process used
    in a child made by ``fork``. A child opens a client of its own; the
    parent's stays the parent's, and keeps working there."""

    status, name = 19, "EFORKED"


class BitstreamError(FrameprepError, ValueError):
    """EBITSTREAM: a video packet (or a stream's parameter sets) the
    decoder cannot decode: corrupt or truncated slices, missing parameter
    sets, a picture decoded with errors. The stream stays open and drops
    packets until its next IDR (H.264) or IRAP (HEVC) picture, from which
    it decodes again; other streams are not affected."""

    status, name = 20, "EBITSTREAM"


BY_STATUS: dict[int, type[FrameprepError]] = {
    cls.status: cls
    for cls in (ProtocolError, VersionMismatchError, InvalidRequestError,
                LimitExceededError, ServerOutOfMemoryError, ServerBusyError,
                ServerShuttingDownError, CudaError, NvrtcError,
                TransportError, RequestTimeoutError, RegionError,
                PermissionDeniedError, InternalError, ServerIOError,
                UnsupportedError, ClosedError, MismatchError, ForkedError,
                BitstreamError)
}
"""Each status number's class (:func:`error_for_status` uses it)."""


def error_for_status(status: int, message: str) -> FrameprepError:
    """Returns the exception for a daemon status (a plain
    :class:`FrameprepError` carrying the number for an unknown one)."""
    cls = BY_STATUS.get(status)
    if cls is None:
        return FrameprepError(f"status {status}: {message}", status)
    return cls(message)
