#!/usr/bin/env python3
"""bench_cuda_out: the PyTorch consumer's call, a numpy frame in and the
tensor in a torch CUDA tensor, three ways on one daemon and one frame
(a 1920x1080 BGR8 photograph -> 1x3x640x640 float32, letterbox):

  host       ``client.preprocess(frame)``: the tensor in host memory (the
             simple call: frame staged in shared memory, the tensor
             written back there)
  host_cuda  the same, then ``torch.from_numpy(r.tensor).cuda()``: what a
             user does without ``out=``
  cuda       ``client.preprocess(frame, out=t)``: the daemon writes the
             tensor into t (a CUDA region of the client), the frame staged
             as in host

For each: p50 latency at c=1 (one call at a time, one thread) and
frames/s from --threads threads (each with a Client and an output tensor
of its own), --duration seconds each after a warm-up. The cuda tensor is
checked against the host tensor first (max |diff| 0: the same daemon
and kernel). Ends with the two bars, PASS or FAIL each:
cuda c=1 p50 <= host c=1 p50, and cuda frames/s >= 1.5x host_cuda's.

Usage: bench_cuda_out.py --socket URL --image PNG [--duration S]
                         [--threads N]
Needs torch (with CUDA) and the frameprep package; exit 77 without a GPU.
Exit status 0 when the check and both bars pass.
"""
import argparse
import sys
import threading
import time

W, H, SIZE = 1920, 1080, (640, 640)


def _frame(image):
    import cv2
    img = cv2.imread(image, cv2.IMREAD_COLOR)
    if img is None:
        sys.exit(f"cannot read {image}")
    return cv2.resize(img, (W, H), interpolation=cv2.INTER_LINEAR)


def _call(way, client, frame, out):
    """One call of way; returns the latency in seconds."""
    import torch
    t0 = time.perf_counter()
    if way == "cuda":
        client.preprocess(frame, size=SIZE, out=out)
    else:
        r = client.preprocess(frame, size=SIZE)
        if way == "host_cuda":
            torch.from_numpy(r.tensor).cuda()
        del r
    return time.perf_counter() - t0


def _run(way, url, frame, threads, duration, warmup):
    """(p50 seconds, frames/s) of way from threads threads."""
    import numpy as np
    import torch
    from frameprep import Client
    lat = [[] for _ in range(threads)]
    state = {"measure": False, "stop": False}
    ready = threading.Barrier(threads + 1)
    failures = []

    def loop(k):
        try:
            with Client(url, timeout=30) as client:
                out = torch.empty((1, 3) + SIZE, dtype=torch.float32,
                                  device="cuda")
                _call(way, client, frame, out)
                ready.wait()
                while not state["stop"]:
                    dt = _call(way, client, frame, out)
                    if state["measure"]:
                        lat[k].append(dt)
        except Exception as exc:  # reported below
            failures.append(repr(exc))
            if not ready.broken:
                ready.abort()

    ts = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    try:
        ready.wait()
    except threading.BrokenBarrierError:
        pass
    time.sleep(warmup)
    state["measure"] = True
    t0 = time.perf_counter()
    time.sleep(duration)
    state["measure"] = False
    elapsed = time.perf_counter() - t0
    state["stop"] = True
    for t in ts:
        t.join()
    if failures:
        raise RuntimeError(f"{way}: " + "; ".join(failures))
    all_lat = np.concatenate([np.asarray(v) for v in lat])
    return float(np.percentile(all_lat, 50)), len(all_lat) / elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_cuda_out: skipped, no torch here")
        return 77
    if not torch.cuda.is_available():
        print("bench_cuda_out: skipped, no CUDA device")
        return 77
    from frameprep import Client
    frame = _frame(args.image)

    with Client(args.socket) as client:
        host = client.preprocess(frame, size=SIZE).tensor.copy()
        out = torch.empty((1, 3) + SIZE, dtype=torch.float32, device="cuda")
        client.preprocess(frame, size=SIZE, out=out)
        diff = float((out.cpu() - torch.from_numpy(host)).abs().max())
    print(f"check: cuda out against host out, max |diff| {diff}")

    rows = {}
    for way in ("host", "host_cuda", "cuda"):
        p50, _ = _run(way, args.socket, frame, 1, args.duration, args.warmup)
        _, fps = _run(way, args.socket, frame, args.threads, args.duration,
                      args.warmup)
        rows[way] = (p50, fps)
    print(f"\n{'way':10} {'c=1 p50 us':>11} {f'{args.threads} threads f/s':>16}")
    for way, (p50, fps) in rows.items():
        print(f"{way:10} {p50 * 1e6:11.0f} {fps:16.1f}")
    bars = [
        ("check: cuda out == host out", diff == 0.0, f"max |diff| {diff}"),
        ("cuda c=1 p50 <= host c=1 p50",
         rows["cuda"][0] <= rows["host"][0],
         f"{rows['cuda'][0] * 1e6:.0f} / {rows['host'][0] * 1e6:.0f} us = "
         f"{rows['cuda'][0] / rows['host'][0]:.2f}"),
        (f"cuda {args.threads} threads >= 1.5x host_cuda",
         rows["cuda"][1] >= 1.5 * rows["host_cuda"][1],
         f"{rows['cuda'][1]:.0f} / {rows['host_cuda'][1]:.0f} f/s = "
         f"{rows['cuda'][1] / rows['host_cuda'][1]:.2f}x"),
    ]
    print()
    for name, good, val in bars:
        print(f"{'PASS' if good else 'FAIL'}  {name}: {val}")
    return 0 if all(g for _, g, _ in bars) else 1


if __name__ == "__main__":
    sys.exit(main())
