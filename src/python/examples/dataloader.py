#!/usr/bin/env python3
"""dataloader: a PyTorch DataLoader fed by frameprep from JPEG files.

The loader forks its workers (num_workers=4, the default start method);
each worker opens a frameprep Client of its own on its first item, sends
the file's bytes (the daemon decodes and letterboxes them) and hands the
tensor on as a numpy array, which the DataLoader's collate turns into a
torch tensor and its pin thread into pinned memory; the batches then go
to the GPU when there is one (``non_blocking``: a copy from pinned
memory). The per-worker work is :func:`preprocess_file`, which needs no
torch (tests/python/test_dataloader.py runs it in a fork pool without
torch); :func:`load` builds the DataLoader.

Usage: dataloader.py [--socket URL] [--images DIR] [--batch N]
                     [--workers N] [--size W H] [--epochs N]
Needs a frameprepd (CPU or GPU backend) and torch. Prints one line per
batch and the frames per second.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import numpy.typing as npt

import frameprep

if TYPE_CHECKING:
    import torch
    from torch.utils.data import DataLoader

SIZE = (640, 640)

# One client per process, opened on the process's first frame: a forked
# worker finds its parent's entries here under the parent's pid and never
# uses them (in a child, calls on the parent's client raise ForkedError).
_clients: dict[tuple[int, str | None], frameprep.Client] = {}


def worker_client(url: str | None = None) -> frameprep.Client:
    """This process's client of the daemon at url (the default address
    when None), opened on first use."""
    key = (os.getpid(), url)
    client = _clients.get(key)
    if client is None:
        client = _clients[key] = frameprep.Client(url)
    return client


def preprocess_file(path: str, url: str | None = None,
                    size: Sequence[int] = SIZE
                    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float64]]:
    """The per-worker work: the JPEG file at path, letterboxed to size
    (width, height) by the daemon at url, as (tensor, transform): the
    float32 (3, H, W) tensor and (scale_x, scale_y, pad_x, pad_y), which
    map the tensor's boxes back to the file's pixels. The tensor is a copy
    of the result's, so that the client's stage goes back at once: a
    DataLoader worker holds batch_size items until its collate, and a
    client has four stages (a call that finds them all held goes inline,
    through the socket)."""
    with open(path, "rb") as f:
        data = f.read()
    r = worker_client(url).preprocess(data, size=size, format="jpeg")
    t = r.transform
    tensor = r.tensor[0].copy()
    del r  # the stage goes back
    return tensor, np.array([t.scale_x, t.scale_y, t.pad_x, t.pad_y])


class JpegFiles:
    """A map-style dataset (what a DataLoader takes: ``__len__`` and
    ``__getitem__``) of JPEG files: item i is :func:`preprocess_file` of
    paths[i]."""

    def __init__(self, paths: Sequence[str], url: str | None = None,
                 size: Sequence[int] = SIZE) -> None:
        self.paths, self.url, self.size = list(paths), url, tuple(size)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int
                    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float64]]:
        return preprocess_file(self.paths[i], self.url, self.size)


def load(paths: Sequence[str], url: str | None = None,
         size: Sequence[int] = SIZE, batch_size: int = 16,
         num_workers: int = 4) -> DataLoader[Any]:
    """A DataLoader of paths' JPEG files in order, num_workers forked
    workers, batches of (tensor (B, 3, H, W) float32, transform (B, 4)
    float64) as torch tensors in pinned memory (pin_memory=True: where
    torch has no accelerator it warns and leaves them unpinned). The
    workers persist across epochs (persistent_workers), and so do their
    clients."""
    from torch.utils.data import DataLoader
    return DataLoader(JpegFiles(paths, url, size), batch_size=batch_size,
                      num_workers=num_workers, pin_memory=True,
                      persistent_workers=num_workers > 0)


def to_device(batch: torch.Tensor) -> torch.Tensor:
    """batch on the GPU when there is one (an asynchronous copy from
    pinned memory), else as it is."""
    import torch
    if torch.cuda.is_available():
        return batch.to("cuda", non_blocking=True)
    return batch


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--socket", default=None,
                    help="frameprepd URL (default: the daemon's own)")
    ap.add_argument("--images", default="build/images",
                    help="directory of JPEG files (default: build/images)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--size", type=int, nargs=2, default=list(SIZE),
                    metavar=("W", "H"))
    ap.add_argument("--epochs", type=int, default=1,
                    help="passes over the files (default 1); the first "
                    "pass's time includes forking the workers and their "
                    "clients' connections")
    args = ap.parse_args(argv)
    paths = sorted(glob.glob(os.path.join(args.images, "*.jpg")))
    if not paths:
        print(f"no JPEG files (*.jpg) in {args.images}", file=sys.stderr)
        return 2
    loader = load(paths, args.socket, args.size, args.batch, args.workers)
    for epoch in range(args.epochs):
        n = 0
        t0 = time.perf_counter()
        for k, (tensor, xf) in enumerate(loader):
            tensor = to_device(tensor)
            n += tensor.shape[0]
            if epoch == 0:
                print(f"batch {k}: {tuple(tensor.shape)} {tensor.dtype} on "
                      f"{tensor.device} (pinned before: "
                      f"{bool(xf.is_pinned())}), scale {float(xf[0, 0]):.3f}")
        took = time.perf_counter() - t0
        print(f"epoch {epoch}: {n} frames in {took:.2f} s "
              f"({n / took:.0f} frames/s, {args.workers} workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
