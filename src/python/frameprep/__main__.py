"""python -m frameprep info|send IMAGE: the C CLI's info and send, in
Python.

``send`` decodes the image with OpenCV (``cv2``, when installed) as the
daemon expects it (BGR, BGRA or gray), or reads a ``.npy`` uint8 array
without OpenCV, sends it (inline, or through a shared-memory ring with
``--shm``), prints what came back and can save the tensor as ``.npy``.
Exit status: 0 success, 1 usage, 2 input or transport error, 3 the daemon
refused the request.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

import numpy as np

from . import __version__
from .client import Client
from .errors import (ClosedError, FrameprepError, RequestTimeoutError,
                     TransportError)

EXIT_USAGE, EXIT_IO, EXIT_SERVER = 1, 2, 3
_DTYPES = {"f32": "float32", "f16": "float16", "u8": "uint8"}


def _size(text: str) -> tuple[int, int]:
    w, sep, h = text.lower().partition("x")
    if not sep:
        raise argparse.ArgumentTypeError(f"size {text!r} is not WxH")
    return int(w), int(h)


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


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
    s.add_argument("--std", type=_floats, default=(1.0,),
                   help="a,b,c or one value [1]")
    s.add_argument("--scale", type=float, default=1 / 255,
                   help="pixel multiplier [1/255]")
    s.add_argument("--pad", type=float, default=114, help="pad value [114]")
    return p


def _load(path: str, gray: bool) -> np.ndarray[Any, Any]:
    """Decodes an image as the daemon takes it; raises OSError."""
    img: np.ndarray[Any, Any]
    if path.endswith(".npy"):
        img = np.load(path)
        return img
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
    print(f"bytes     {rep.tensor_size}")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "info":
            with Client(args.socket, timeout=args.timeout / 1000) as client:
                for key, value in client.info().items():
                    print(f"{key}: {value}")
            return 0
        frame = _load(args.image, args.order == "gray")
        with Client(args.socket, timeout=args.timeout / 1000) as client:
            opts = dict(size=args.size, resize=args.resize, order=args.order,
                        dtype=_DTYPES[args.dtype], layout=args.layout,
                        scale=args.scale, mean=_triple(args.mean),
                        std=_triple(args.std), pad=args.pad)
            print(f"source    {args.image} {frame.shape[1]}x{frame.shape[0]}"
                  f"{' (shared memory)' if args.shm else ''}")
            if args.shm:
                with client.ring(slots=1, frame=frame.shape, **opts) as ring:
                    with ring.preprocess(frame) as rr:
                        tensor = rr.tensor.copy()
                        _print_result(rr)
            else:
                r = client.preprocess(frame, **opts)
                tensor = r.tensor
                _print_result(r)
            if args.output:
                np.save(args.output, tensor)
                print(f"wrote     {args.output}")
            return 0
    except FrameprepError as exc:
        print(f"frameprep: {exc}", file=sys.stderr)
        local = (TransportError, RequestTimeoutError, ClosedError)
        return EXIT_IO if isinstance(exc, local) else EXIT_SERVER
    except OSError as exc:
        print(f"frameprep: {exc}", file=sys.stderr)
        return EXIT_IO

if __name__ == "__main__":
    sys.exit(main())
