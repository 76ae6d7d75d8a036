#!/usr/bin/env python3
"""cuda_batch: client-side batching in place, with no copy through the host.

Two processes. The consumer (this one) owns a (N, 3, 640, 640) float32
batch in its GPU memory and a torchvision ResNet-18 with random weights
(nothing is downloaded). It exports the batch (frameprep.cuda.export: the
allocation's CUDA IPC handle, offset and device UUID) to the producer, a
second process that reads real photographs and sends each one to
frameprepd with ``out=exported[k]``: the daemon letterboxes it and writes
the normalised tensor straight into element k of the consumer's batch.
When the producer has N replies the batch is complete (the daemon replies
only after its GPU work finished); the consumer runs the network on it and
hands the batch back.

Usage: cuda_batch.py [--socket URL] [--images DIR] [--batch N]
                     [--rounds R]
Needs a frameprepd on a GPU (ipc://), torch, torchvision, cuda-python and
OpenCV. Prints one line per batch and a final PASS/FAIL line.
"""
from __future__ import annotations

import argparse
import glob
import multiprocessing as mp
import os
import sys
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from frameprep.cuda import Exported

# ImageNet normalisation, done by frameprep: (pixel / 255 - mean) / std.
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 640


def producer(url: str, paths: Sequence[str], exported: Exported,
             rounds: int, conn: Connection) -> None:
    """Sends photographs into the consumer's batch, one element each."""
    import cv2

    import frameprep
    n = exported.shape[0]
    with frameprep.Client(url) as client:
        i = 0
        for _ in range(rounds):
            for k in range(n):
                path = paths[i % len(paths)]
                i += 1
                img = cv2.imread(path, cv2.IMREAD_COLOR)  # BGR, (H, W, 3)
                t0 = time.perf_counter()
                res = client.preprocess(img, size=(SIZE, SIZE), mean=MEAN,
                                        std=STD, out=exported[k])
                ms = (time.perf_counter() - t0) * 1e3
                xf = res.transform
                conn.send((k, os.path.basename(path), ms,
                           (xf.scale_x, xf.pad_x, xf.pad_y)))
            if conn.recv() != "next":  # the consumer is done with the batch
                break
        # The daemon must stop touching the consumer's memory before it
        # is freed: release, and say so.
        client.release_cuda()
    conn.send("released")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", default=None,
                    help="frameprepd URL (default: the daemon's own)")
    ap.add_argument("--images", default=None,
                    help="directory of photographs (default: skimage's)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    import torch
    import torchvision

    import frameprep
    from frameprep import cuda
    if args.images is None:
        try:
            import skimage.data
            args.images = os.path.dirname(skimage.data.__file__)
        except ImportError:
            sys.exit("--images DIR is needed (no skimage here)")
    paths = sorted(p for ext in ("png", "jpg")
                   for p in glob.glob(os.path.join(args.images, f"*.{ext}")))
    if not paths:
        sys.exit(f"no photographs in {args.images}")
    if not torch.cuda.is_available():
        print("cuda_batch: SKIP (no GPU)")
        return 77

    n = args.batch
    batch = torch.empty((n, 3, SIZE, SIZE), device="cuda")
    model = torchvision.models.resnet18(weights=None).cuda().eval()
    exported = cuda.export(batch)
    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe()
    url = args.socket or frameprep.default_address()
    proc = ctx.Process(target=producer,
                       args=(url, paths, exported, args.rounds, child))
    proc.start()
    ok = True
    for r in range(args.rounds):
        got = [conn.recv() for _ in range(n)]
        # Every element was written by the daemon before its reply: the
        # batch is ready, no synchronisation with the daemon is needed.
        t0 = time.perf_counter()
        with torch.no_grad():
            logits = model(batch)
        top = logits.argmax(1).tolist()
        torch.cuda.synchronize()
        infer_ms = (time.perf_counter() - t0) * 1e3
        finite = bool(torch.isfinite(batch).all())
        spread = float(batch.std())
        ok &= finite and spread > 0.05 and sorted(k for k, *_ in got) == \
            list(range(n))
        names = ", ".join(f"{name}->{top[k]}" for k, name, _, _ in got[:4])
        mean_ms = sum(ms for _, _, ms, _ in got) / n
        print(f"batch {r}: {n} frames in place ({mean_ms:.2f} ms each), "
              f"resnet18 {infer_ms:.1f} ms, classes {names}, ...; "
              f"finite {finite}, std {spread:.3f}", flush=True)
        conn.send("next")
    msg = conn.recv()
    proc.join(60)
    ok &= msg == "released" and proc.exitcode == 0
    del batch  # only now: the daemon released it
    print(f"cuda_batch example: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
