"""frameprep._native's entry points refuse what they are given when it
does not hold what they would read or view (issue 35): memory comes as
the object that owns it (bytes, a numpy array, a ring), never as an
address, and each length, offset and slot is checked against it. Every
call here passed an address or an out-of-range length before, and read
or viewed arbitrary memory (a crash, or another object's bytes)."""
import dataclasses
import gc
import pathlib
import re

import numpy as np
import pytest

import frameprep
from frameprep import _core, _native
from frameprep.protocol import Kind, PixelFormat, Request

GRAY = int(PixelFormat.GRAY8)
BAD = 0xDEADBEEF  # an address nothing is mapped at


def _plan():
    return _core.plan((32, 32), "letterbox", "gray", "float32", "nchw",
                      1 / 255, 0.0, 1.0, 114)


def _gray_args(frame, span, w=8, h=8):
    """Client.frame's source arguments for a gray8 frame w x h."""
    return (frame, span, GRAY, w, h, w, 0, 0, 0)


@pytest.fixture
def native(client):
    return client._s.native


def test_frame_takes_memory_not_addresses(native):
    req = _plan().native
    frame = np.full((8, 8), 7, np.uint8)
    with pytest.raises(TypeError, match="bytes or a numpy array"):
        native.frame(req, *_gray_args(BAD, 64))
    with pytest.raises(ValueError, match="1048576 bytes to read, but the "
                                         "array holds 64"):
        native.frame(req, *_gray_args(frame, 1 << 20))
    with pytest.raises(ValueError, match="65 bytes to read, but the bytes "
                                         "holds 64"):
        native.frame(req, *_gray_args(frame.tobytes(), 65))
    # A strided crop holds the bytes from its first to the end of its
    # last pixel: 4 rows of stride 8, 4 pixels in the last.
    crop = frame[2:6, 2:6]
    with pytest.raises(ValueError, match="29 bytes to read, but the array "
                                         "holds 28"):
        native.frame(req, crop, 29, GRAY, 4, 4, 8, 0, 0, 0)
    with pytest.raises(ValueError, match="holds 0"):
        native.frame(req, *_gray_args(np.empty((0, 8), np.uint8), 64))
    # What the package sends is unchanged: span bytes of the array.
    res = native.frame(req, *_gray_args(frame, 64))
    assert res.status == 0
    res = native.frame(req, crop, 28, GRAY, 4, 4, 8, 0, 0, 0)
    assert res.status == 0
    res = native.frame(req, *_gray_args(frame.tobytes(), 64))
    assert res.status == 0


def test_request_payload_is_checked(native):
    echo = Request(kind=Kind.ECHO, input_size=4096, src_format=GRAY,
                   src_width=64, src_height=64, src_stride=64).native()
    with pytest.raises(TypeError, match="bytes or a numpy array"):
        native.request(echo, BAD)
    with pytest.raises(ValueError, match="4096 bytes to read, but the "
                                         "bytes holds 16"):
        native.request(echo, b"x" * 16)
    with pytest.raises(ValueError, match="but the array holds 1024"):
        native.request(echo, np.zeros(256, np.float32))
    # No payload at all: the library's own refusal, as before.
    with pytest.raises(frameprep.InvalidRequestError, match="without a "
                                                           "payload"):
        native.request(echo)
    res = native.request(echo, np.zeros(1024, np.float32))
    assert res.status == 0
    # A request that reads no payload ignores its size.
    res = native.request(Request(kind=Kind.INFO).native(), b"")
    assert res.status == 0


def test_submit_takes_memory_not_addresses(native):
    req = _plan().native
    called = []
    with pytest.raises(TypeError, match="bytes or a numpy array"):
        native.submit(req, lambda: called.append(1), *_gray_args(BAD, 64))
    with pytest.raises(ValueError, match="but the array holds 64"):
        native.submit(req, lambda: called.append(1),
                      *_gray_args(np.zeros((8, 8), np.uint8), 4096))
    assert not called
    p = native.submit(req, lambda: called.append(1),
                      *_gray_args(np.zeros((8, 8), np.uint8), 64))
    assert p.wait().status == 0


def test_elements_source_is_checked(native):
    plan = _plan()
    rois = plan.opts.request(Kind.ROIS).native()
    batch = plan.opts.request(Kind.BATCH).native()
    box = [(_core.ELEM_BOX, 0, 0.0, 0.0, 4.0, 4.0, 0.0, 0.0, 0)]
    frame = np.zeros((8, 8), np.uint8)
    with pytest.raises(TypeError, match="bytes or a numpy array"):
        native.elements(rois, box, *_gray_args(BAD, 64))
    with pytest.raises(ValueError, match="but the array holds 64"):
        native.elements(rois, box, *_gray_args(frame, 1 << 16, 256, 256))
    # BATCH: frame k at its element's offset, each of span bytes; the
    # last one reaches 3 * 64 + 64 bytes of an array of 128.
    frames = [(_core.ELEM_FRAME, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, k * 64)
              for k in (0, 1, 3)]
    two = np.zeros((2, 8, 8), np.uint8)
    with pytest.raises(ValueError, match="256 bytes to read, but the "
                                         "array holds 128"):
        native.elements(batch, frames, *_gray_args(two, 64))
    res = native.elements(batch, frames[:2], *_gray_args(two, 64))
    assert res.status == 0
    # In a region, the source argument is not read (the daemon refuses
    # the region id).
    res = native.elements(rois, box, *_gray_args(BAD, 64), 1, 12345, 0)
    assert res.status != 0


def _cring(native, n=2, frame=(8, 8), tensor=(1, 1, 32, 32)):
    """A CRing of n slots of 4096 frame bytes and 4096 tensor bytes."""
    c = _native.CRing(native, n, 4096, 4096, False, None, 5.0)
    c.layout(frame, tensor, "f", 4, None)
    return c


def test_slot_holds_take_a_lease_and_check_it(native):
    c = _cring(native)
    try:
        got = c.take(1, 0)
        assert got is not None
        k, ticket, epoch = got
        with pytest.raises(TypeError):
            c.frame_hold(BAD, None)
        with pytest.raises(IndexError, match="slot 2: the ring has 2"):
            c.frame_hold((2, ticket, epoch), None)
        with pytest.raises(IndexError):
            c.result_hold((1 << 31, ticket, epoch), None)
        with pytest.raises(IndexError, match="slot 2: the ring has 2"):
            c.frame_view(2, epoch)
        hold = c.frame_hold(got, None)
        a = hold.array(np.ndarray)
        at = a.__array_interface__["data"][0]
        view = c.frame_view(k, epoch)
        assert at == hold.address == view.__array_interface__["data"][0]
        assert view.nbytes == 4096
        assert c.base <= at and at + 4096 <= c.base + c.size
        a[:] = 9  # inside the region
        # reshape: at most the frame's area (4096 bytes).
        hold.reshape((64, 64))
        with pytest.raises(ValueError, match="larger than the slot's "
                                             "4096 bytes"):
            hold.reshape((64, 65))
        with pytest.raises(ValueError):
            hold.reshape((1 << 40, 1 << 40))
        res = c.result_hold(got, None)
        with pytest.raises(ValueError, match="larger than the slot's "
                                             "4096 bytes"):
            res.reshape((1, 1, 32, 33))  # float32: 4224 bytes
        with pytest.raises(TypeError, match="numpy.ndarray or a subclass"):
            hold.array(int)
        with pytest.raises(TypeError):
            hold.array(3)
        res.give_back()
        hold.give_back()
        del a, res, hold, view
    finally:
        c.close()
        del c
        gc.collect()


@pytest.mark.parametrize("args, why", [
    (((64, 65), (1,), "u", 1), "larger than the ring's slot"),
    (((8, 8), (1, 1, 32, 33), "f", 4), "larger than the ring's slot"),
    (((8, 8), (1,), "f", 8), "not u1, f4 or f2"),
    (((8, 8), (1,), "u", 64), "not u1, f4 or f2"),
    (((1 << 62, 1 << 62), (1,), "u", 1), "larger than the ring's slot"),
    (((8, -1), (1,), "u", 1), "negative"),
])
def test_layout_is_checked(native, args, why):
    c = _native.CRing(native, 2, 4096, 4096, False, None, 5.0)
    with pytest.raises(ValueError, match=why):
        c.layout(*args, None)
    c.close()


def test_ring_requests_are_checked(native):
    """A ring of no slots or bytes is refused; a request whose lease is
    not taken, whose frame lies past the slot's frame area, or a whole
    frame larger than a slot, is refused before anything is read."""
    for n, f, t in ((0, 64, 64), (1, 0, 64), (1, 64, 0)):
        with pytest.raises(frameprep.InvalidRequestError):
            _native.CRing(native, n, f, t, False, None, 5.0)
    with pytest.raises(TypeError, match="gate is a Gate or None"):
        _native.CRing(native, 1, 64, 64, False, 3, 5.0)
    c = _cring(native)
    req = _plan().native
    try:
        with pytest.raises(frameprep.InvalidRequestError, match="larger"):
            c.prepare(req, 4097, GRAY, 8, 8, 8, 0, 0, 0)
        k, ticket, epoch = c.take(1, 0)  # reserved, not taken
        with pytest.raises(frameprep.InvalidRequestError,
                           match="not taken with the lease's ticket"):
            c.request((k, ticket, epoch), req, 0, 64, GRAY, 8, 8, 8, 0,
                      0, 0)
        with pytest.raises(frameprep.InvalidRequestError):
            c.request((k, ticket + 1, epoch), req, 0, 64, GRAY, 8, 8, 8,
                      0, 0, 0)
        assert c.release(k, ticket, epoch)
        lease = c.take(2, 0)
        with pytest.raises(frameprep.InvalidRequestError):
            c.request(lease, req, 4096 - 63, 64, GRAY, 8, 8, 8, 0, 0, 0)
        res, _ = c.request(lease, req, 4096 - 64, 64, GRAY, 8, 8, 8, 0,
                           0, 0)
        assert res.status == 0
        assert c.release(*lease)
        assert not c.release(*lease)  # an earlier turn: nothing changes
    finally:
        c.close()


def test_ring_classes_are_checked():
    from frameprep.ring import RingFrame, RingResult
    for bad in ((int, RingResult, _core.Timings),
                (RingFrame, dict, _core.Timings),
                (RingFrame, RingResult, dict)):
        with pytest.raises(TypeError, match="set_ring_classes"):
            _native.set_ring_classes(*bad)


def test_cuda_pointers_go_to_the_driver_only():
    """Device pointers are never read by the CPU: the CUDA driver says
    whether they are device memory (UnsupportedError without one)."""
    for fn in (_native.cuda_pointer, _native.cuda_allocation):
        with pytest.raises(frameprep.FrameprepError):
            fn(BAD)
        with pytest.raises(OverflowError):
            fn(-1)


# ---- A request's fields, declared once ----
#
# fprep_request and fprep_register_request (include/frameprep/protocol.h)
# are the declaration; the extension's field tables (_native.c: what
# decode_request returns) and protocol.Request's dataclass follow them
# (_native.pyi names none: Request takes a dict). A field added to the
# header and missed in either, or left there after it went, fails here,
# naming the field and the place.

_ROOT = pathlib.Path(__file__).resolve().parents[2]
# Decoded from a ROIS or BATCH request's element table, not the header.
_NOT_ON_THE_HEADER = {"elements", "input_span"}


def _struct_fields(name):
    """The members of typedef struct name in protocol.h, in order."""
    text = (_ROOT / "include/frameprep/protocol.h").read_text()
    body = re.search(r"typedef struct %s \{(.*?)\n\} %s;" % (name, name),
                     text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [re.match(r"\s*[\w ]+?\s+(\w+)(\[.*\])?$", d.strip()).group(1)
            for d in body.split(";") if d.strip()]


def test_request_fields_declared_everywhere():
    frame = _struct_fields("fprep_request")
    register = _struct_fields("fprep_register_request")
    assert "src_width" in frame and "region_name" in register
    header = set(frame) - _NOT_ON_THE_HEADER
    req = Request(kind=Kind.FRAME, src_format=GRAY, src_width=8,
                  src_height=8, src_stride=8, input_size=64)
    native = set(_native.decode_request(req.encode() + bytes(64)))
    reg = Request(kind=Kind.REGISTER, region_size=4096, region_name="/x")
    native_reg = set(_native.decode_request(reg.encode()))
    dataclass = {f.name for f in dataclasses.fields(Request)}
    places = {"_native.c's request table": (native, header),
              "_native.c's register table": (native_reg, set(register)),
              "protocol.Request": (dataclass, header | set(register))}
    for place, (got, want) in places.items():
        assert not want - got, f"{place} lacks {sorted(want - got)}"
        assert not got - want, (f"{place} has {sorted(got - want)}, "
                                f"not in protocol.h")
