"""python -m frameprep info|send IMAGE: the C CLI's info and send, in
Python.

``send`` decodes the image with OpenCV (``cv2``, when installed) as the
daemon expects it (BGR, BGRA or gray), or reads a ``.npy`` uint8 array
without OpenCV, sends it (inline, or through a shared-memory ring with
``--shm``), prints what came back and can save the tensor as ``.npy``.
Exit status, the C CLI's (src/tools/frameprep_cli.c) for the same
failures: 0 success, 1 the daemon refused the request (or would: a frame
or option the client checks against the daemon's limits first), 2 usage
(bad arguments, a malformed URL), 3 input or transport error (an image
that cannot be read or decoded, a truncated JPEG, no daemon, a socket of
an untrusted owner, a timeout).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Sequence

import numpy as np

from . import __version__
from .client import Client
from .errors import (ClosedError, FrameprepError, InvalidRequestError,
                     RequestTimeoutError, TransportError)

# The C CLI's exit statuses (frameprep_cli.c); argparse exits with 2 too.
EXIT_SERVER, EXIT_USAGE, EXIT_IO = 1, 2, 3
_DTYPES = {"f32": "float32", "f16": "float16", "u8": "uint8"}


# The values the C CLI takes (tool_options.c); others are usage errors.
def _size(text: str) -> tuple[int, int]:
    w, sep, h = text.lower().partition("x")
    try:
        size = int(w), int(h)
    except ValueError:
        size = (0, 0)
    if not sep or not all(1 <= v <= 65535 for v in size):
        raise argparse.ArgumentTypeError(
            f"size {text!r} is not WxH, each 1..65535")
    return size


def _float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(text)
    return v


def _floats(text: str) -> tuple[float, ...]:
    v = tuple(_float(t) for t in text.split(","))
    if len(v) not in (1, 3):
        raise argparse.ArgumentTypeError(f"{text!r} is not A or A,B,C")
    return v


def _stds(text: str) -> tuple[float, ...]:
    v = _floats(text)
    if not all(x > 0 for x in v):
        raise argparse.ArgumentTypeError(f"std {text!r} must be > 0")
    return v


def _pad(text: str) -> float:
    v = _float(text)
    if not 0 <= v <= 255:
        raise argparse.ArgumentTypeError(f"pad {text!r} is not 0..255")
    return v


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m frameprep",
                                description="Talk to frameprepd.")
    p.add_argument("--version", action="version", version=__version__)
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--socket", metavar="URL", default=None,
                        help="daemon URL [the daemon's default]")
    common.add_argument("--timeout", metavar="MS", type=int, default=30000,
                        help="reply timeout, milliseconds [30000]")
    sub.add_parser("info", parents=[common], help="print what the daemon runs")
    s = sub.add_parser("send", parents=[common],
                       help="send an image, print the tensor")
    s.add_argument("image", help="image file (decoded with cv2) or .npy")
    s.add_argument("-o", "--output", metavar="FILE",
                   help="save the tensor as .npy")
    s.add_argument("--shm", action="store_true",
                   help="pass frame and tensor through shared memory")
    s.add_argument("--size", type=_size, default=(640, 640),
                   help="tensor WxH [640x640]")
    s.add_argument("--dtype", choices=sorted(_DTYPES), default="f32")
    s.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw")
    s.add_argument("--order", choices=["rgb", "bgr", "gray"], default="rgb")
    s.add_argument("--resize", choices=["letterbox", "stretch"],
                   default="letterbox")
    s.add_argument("--mean", type=_floats, default=(0.0,),
                   help="a,b,c or one value [0]")
    s.add_argument("--std", type=_stds, default=(1.0,),
                   help="a,b,c or one value [1]")
    s.add_argument("--scale", type=_float, default=1 / 255,
                   help="pixel multiplier [1/255]")
    s.add_argument("--pad", type=_pad, default=114, help="pad value [114]")
    s.add_argument("--rounding", choices=["float", "opencv"],
                   default="float",
                   help="float, or opencv: uint8 pixels as cv2.resize's "
                        "(exact) [float]")
    s.add_argument("--jpeg", action="store_true",
                   help="send the file's bytes as a JPEG, decoded by the "
                        "daemon")
    return p


def _load(path: str, gray: bool) -> np.ndarray[Any, Any]:
    """Decodes an image as the daemon takes it; raises OSError."""
    img: np.ndarray[Any, Any]
    if path.endswith(".npy"):
        img = np.load(path)
        return img
    _check_complete(path)
    try:
        import cv2
    except ImportError:
        raise OSError("decoding images needs OpenCV: install Debian's "
                      "python3-opencv or `pip install opencv-python-headless`"
                      ", or pass a .npy file of uint8 pixels") from None
    flags = cv2.IMREAD_GRAYSCALE if gray else cv2.IMREAD_UNCHANGED
    img = cv2.imread(path, flags)
    if img is None:
        raise OSError(f"{path}: cannot read or decode the image")
    if img.dtype != np.uint8:
        img = (img >> 8).astype(np.uint8) if img.dtype == np.uint16 else img
    if img.ndim == 3 and img.shape[2] == 4 and not gray:
        return img
    if img.ndim == 3 and img.shape[2] == 1:
        img = img[:, :, 0]
    return img


def _check_complete(path: str) -> None:
    """Refuses a truncated JPEG (decoders fill what is missing with grey
    and succeed): a file that starts with SOI (FF D8) must end with EOI
    (FF D9), within its last 32 bytes (padding after it is allowed).
    Raises OSError."""
    with open(path, "rb") as f:
        head = f.read(3)
        if head != b"\xff\xd8\xff":
            return
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 32))
        tail = f.read()
    if b"\xff\xd9" not in tail:
        raise OSError(f"{path}: truncated JPEG (no end-of-image marker)")


def _client(url: str | None, timeout_ms: int) -> Client:
    """Opens a client as the C CLI does; a failure is a _Refused with the
    C CLI's exit status (2 for a malformed URL, else 3) and words."""
    try:
        return Client(url, timeout=timeout_ms / 1000)
    except InvalidRequestError as exc:
        raise _Refused(EXIT_USAGE, str(exc)) from None
    except FrameprepError as exc:
        text = str(exc)
        if isinstance(exc, TransportError) and "frameprepd running" not in \
                text:
            text += " (is frameprepd running?)"
        raise _Refused(EXIT_IO, text) from None


class _Refused(Exception):
    """A failure with its exit status."""

    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status = status


def _triple(v: Sequence[float]) -> Any:
    return v[0] if len(v) == 1 else tuple(v)


def _print_result(r: Any) -> None:
    rep = r.reply
    print(f"request   {r.request_id} FRAME")
    print("status    OK")
    print(f"shape     {tuple(r.tensor.shape)}")
    print(f"dtype     {r.tensor.dtype} "
          f"{'NHWC' if rep.layout == 2 else 'NCHW'}")
    xf = r.transform
    print(f"transform scale {xf.scale_x:.6g} x {xf.scale_y:.6g}, pad "
          f"{xf.pad_x:g} x {xf.pad_y:g} (left x top)")
    t = r.timings
    print(f"timings   queue {t.queue_us} us, compute {t.compute_us} us, h2d "
          f"{t.h2d_us} us, kernel {t.kernel_us} us, d2h {t.d2h_us} us, "
          f"total {t.total_us} us")
    if rep.decoded_width:
        print(f"decoded   JPEG {rep.decoded_width}x{rep.decoded_height} in "
              f"{rep.t_decode_us} us")
    print(f"bytes     {rep.tensor_size}")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "info":
            with _client(args.socket, args.timeout) as client:
                for key, value in client.info().items():
                    print(f"{key}: {value}")
            return 0
        if args.jpeg:
            with open(args.image, "rb") as f:
                frame = np.frombuffer(f.read(), np.uint8)
        else:
            frame = _load(args.image, args.order == "gray")
        with _client(args.socket, args.timeout) as client:
            opts = dict(size=args.size, resize=args.resize, order=args.order,
                        dtype=_DTYPES[args.dtype], layout=args.layout,
                        scale=args.scale, mean=_triple(args.mean),
                        std=_triple(args.std), pad=args.pad,
                        rounding=args.rounding)
            if args.jpeg:
                print(f"source    {args.image} JPEG {frame.size} bytes, "
                      f"undecoded{' (shared memory)' if args.shm else ''}")
                if args.shm:
                    with client.ring(slots=1, frame=(1, max(frame.size, 1)),
                                     format="jpeg", **opts) as ring:
                        with ring.preprocess(frame) as rr:
                            tensor = rr.tensor.copy()
                            _print_result(rr)
                else:
                    r = client.preprocess(frame, format="jpeg", **opts)
                    tensor = r.tensor
                    _print_result(r)
            elif args.shm:
                print(f"source    {args.image} {frame.shape[1]}x"
                      f"{frame.shape[0]} (shared memory)")
                with client.ring(slots=1, frame=frame.shape, **opts) as ring:
                    with ring.preprocess(frame) as rr:
                        tensor = rr.tensor.copy()
                        _print_result(rr)
            else:
                print(f"source    {args.image} {frame.shape[1]}x"
                      f"{frame.shape[0]}")
                r = client.preprocess(frame, **opts)
                tensor = r.tensor
                _print_result(r)
            if args.output:
                np.save(args.output, tensor)
                print(f"wrote     {args.output}")
            return 0
    except _Refused as exc:
        print(f"frameprep: {exc}", file=sys.stderr)
        return exc.status
    except FrameprepError as exc:
        # The daemon's refusals, and what the client refuses for it (its
        # limits, invalid options), are 1 as in the C CLI; the transport's
        # failures 3.
        print(f"frameprep: {exc}", file=sys.stderr)
        local = (TransportError, RequestTimeoutError, ClosedError)
        return EXIT_IO if isinstance(exc, local) else EXIT_SERVER
    except OSError as exc:
        print(f"frameprep: {exc}", file=sys.stderr)
        return EXIT_IO

if __name__ == "__main__":
    sys.exit(main())
