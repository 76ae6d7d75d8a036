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

from typing import Any

BY_STATUS: dict[int, type[FrameprepError]] = {}
"""Each status number's class (:func:`error_for_status` uses it); a class
enters it by naming its status in its bases (``status=..., name=...``)."""


class FrameprepError(Exception):
    """Base of every frameprep error. ``status`` is the ``enum fprep_err``
    number (0 only for errors of unknown status), ``message`` the
    daemon's or the client's sentence."""

    status: int = 0
    """The ``enum fprep_err`` number (each subclass has its own)."""
    name: str = "UNKNOWN"
    """The enum name without ``FPREP_``, e.g. "ELIMIT"."""

    def __init_subclass__(cls, status: int | None = None, name: str = "",
                          **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if status is not None:
            cls.status, cls.name = status, name
            BY_STATUS[status] = cls

    def __init__(self, message: str = "", status: int | None = None):
        super().__init__(message)
        self.message = message
        """The daemon's or the client's sentence."""
        if status is not None:
            self.status = status

    def __str__(self) -> str:
        return f"{self.name}: {self.message}" if self.message else self.name


class ProtocolError(FrameprepError, status=1, name="EPROTO"):
    """EPROTO: a malformed message (from the daemon, or a reply the
    client cannot read)."""


class VersionMismatchError(FrameprepError, status=2, name="EVERSION"):
    """EVERSION: unsupported protocol version."""


class InvalidRequestError(FrameprepError, ValueError, status=3, name="EINVAL"):
    """EINVAL: a field has an invalid value (dtype, shape, option)."""


class LimitExceededError(FrameprepError, ValueError, status=4, name="ELIMIT"):
    """ELIMIT: a size exceeds a limit the daemon enforces (see INFO)."""


class RingFullError(LimitExceededError):
    """ELIMIT: a ring's caller asked for a slot while it holds every slot
    itself (results not released, numpy views of released results' tensors
    still alive, frames reserved and not sent), none in flight: no slot
    could come free while it waited, so it is told at once. Release
    results (and drop views of them) sooner, or give the ring more
    slots."""


class ServerOutOfMemoryError(FrameprepError, MemoryError,
                             status=5, name="ENOMEM"):
    """ENOMEM: the daemon (or the client) ran out of memory."""


class ServerBusyError(FrameprepError, status=6, name="EBUSY"):
    """EBUSY: the daemon has no room for the request now (its
    max_inflight_per_conn on this connection, or its reply-memory budget);
    retry."""


class ServerShuttingDownError(FrameprepError, status=7, name="ESHUTDOWN"):
    """ESHUTDOWN: the daemon is stopping."""


class CudaError(FrameprepError, status=8, name="ECUDA"):
    """ECUDA: a CUDA call failed in the daemon."""


class NvrtcError(FrameprepError, status=9, name="ENVRTC"):
    """ENVRTC: runtime kernel compilation failed in the daemon."""


class TransportError(FrameprepError, ConnectionError,
                     status=10, name="ETRANSPORT"):
    """ETRANSPORT: the connection failed (nobody listens, connection
    lost, socket closed under a request)."""


class RequestTimeoutError(FrameprepError, TimeoutError,
                          status=11, name="ETIMEDOUT"):
    """ETIMEDOUT: no reply within the client's timeout."""


class RegionError(FrameprepError, status=12, name="EREGION"):
    """EREGION: a shared-memory region could not be created, mapped or
    used (unknown id, span outside it, object shrunk)."""


class PermissionDeniedError(FrameprepError, PermissionError,
                            status=13, name="EPERM"):
    """EPERM: permission denied (e.g. a region owned by another user)."""


class InternalError(FrameprepError, status=14, name="EINTERNAL"):
    """EINTERNAL: a bug in the daemon."""


class ServerIOError(FrameprepError, status=15, name="EIO"):
    """EIO: an input/output error in the daemon."""


class UnsupportedError(FrameprepError, status=16, name="EUNSUPPORTED"):
    """EUNSUPPORTED: not supported (e.g. shared memory over tcp://)."""


class ClosedError(FrameprepError, status=17, name="ECLOSED"):
    """ECLOSED: the client or ring was closed."""


class MismatchError(FrameprepError, status=18, name="EMISMATCH"):
    """EMISMATCH: a reply that does not match its request."""


class ForkedError(FrameprepError, status=19, name="EFORKED"):
    """EFORKED: a client (or ring, or request) of the parent process used
    in a child made by ``fork``. A child opens a client of its own; the
    parent's stays the parent's, and keeps working there."""


class BitstreamError(FrameprepError, ValueError, status=20, name="EBITSTREAM"):
    """EBITSTREAM: a video packet (or a stream's parameter sets) the
    decoder cannot decode: corrupt or truncated slices, missing parameter
    sets, a picture decoded with errors. The stream stays open and drops
    packets until its next IDR (H.264) or IRAP (HEVC) picture, from which
    it decodes again; other streams are not affected."""


def error_for_status(status: int, message: str) -> FrameprepError:
    """Returns the exception for a daemon status (a plain
    :class:`FrameprepError` carrying the number for an unknown one)."""
    cls = BY_STATUS.get(status)
    if cls is None:
        return FrameprepError(f"status {status}: {message}", status)
    return cls(message)
