#!/usr/bin/env python3
"""peer_roi: N boxes of one frame into an (N, 3, h, w) tensor, in process.

What a second-stage pipeline does today with a decoded frame in pinned host
memory: copy it to the GPU (counted), then crop and resize every box into one
float32 NCHW batch (RGB, /255) in CUDA memory.

  torchvision  torchvision.ops.roi_align(aligned=True, sampling_ratio=2) on
               the whole batch of boxes: one launch (its bilinear samples
               are averaged, so it is a stretch, not a letterbox)
  cvcuda       a CV-CUDA loop, per box: custom_crop, resize (INTER_LINEAR),
               then one convertto of the stacked batch (skipped, with a
               line saying so, where cvcuda is not importable)

The boxes are frameprep-bench --rois's pattern (src/tools/bench_elements.c),
clipped to the frame, so both sides do the same work. Prints boxes/s and
requests/s (one request = one frame's N boxes) and the p50 of one request.
No torch or no GPU: exit 77.
"""
import argparse
import json
import sys
import time

SKIP = 77


def bench_boxes(n, w, h):
    """frameprep-bench --rois's boxes (x, y, w, h), clipped to the frame."""
    out = []
    for k in range(n):
        bw = w / 8.0 + ((k * 37) % 97) / 97.0 * w / 5.0
        bh = h / 8.0 + ((k * 53) % 89) / 89.0 * h / 5.0
        x = ((k * 131) % 101) / 100.0 * (w - bw)
        y = ((k * 71) % 103) / 102.0 * (h - bh)
        if k % 7 == 3:
            x = w - bw * 0.5
        x, y, bw, bh = int(x), int(y), int(bw), int(bh)
        bw = min(bw, w - x)
        out.append((x, y, bw, bh))
    return out


def setup(args, name):
    """Parses args.size and args.dst into (w, h) pairs, imports cv2,
    numpy and torch and reads the photo, resized to args.size; returns
    (cv2, numpy, torch, frame, boxes), or SKIP (a line says why) without
    them or a GPU."""
    args.size = tuple(int(v) for v in args.size.split("x"))
    args.dst = tuple(int(v) for v in args.dst.split("x"))
    try:
        import cv2
        import numpy as np
        import torch
    except ImportError as e:
        print(f"SKIP: {name} needs numpy, cv2 and PyTorch ({e})")
        return SKIP
    if not torch.cuda.is_available():
        print(f"SKIP: {name} needs a CUDA GPU (none visible)")
        return SKIP
    img = cv2.imread(args.image, cv2.IMREAD_COLOR)
    if img is None:
        sys.exit(f"cannot read {args.image}")
    frame = cv2.resize(img, args.size, interpolation=cv2.INTER_LINEAR)
    return cv2, np, torch, frame, bench_boxes(args.rois, *args.size)


def timed(torch, np, step, iters):
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    lat = []
    t0 = time.perf_counter()
    for _ in range(iters):
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        lat.append(time.perf_counter() - t)
    total = time.perf_counter() - t0
    return iters / total, float(np.percentile(np.asarray(lat) * 1e3, 50))


def record(args, peer, rps, p50, extra=""):
    print(f"{peer:12s} {args.rois} boxes -> {args.dst[0]}x{args.dst[1]}: "
          f"{rps:8.1f} requests/s ({rps * args.rois:9.0f} boxes/s), "
          f"p50 {p50:.3f} ms {extra}", flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"peer": peer, "rois": args.rois,
                                "requests_per_s": rps, "p50_ms": p50}) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", required=True, help="a real photo")
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--dst", default="224x224")
    ap.add_argument("--rois", type=int, default=64)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--json")
    args = ap.parse_args()
    got = setup(args, "peer_roi")
    if got == SKIP:
        return SKIP
    cv2, np, torch, frame, boxes = got
    sw, sh = args.size
    dw, dh = args.dst
    pinned = torch.from_numpy(frame).pin_memory()
    dev = torch.empty_like(pinned, device="cuda")
    print(f"{args.rois} boxes of a {sw}x{sh} BGR8 frame in pinned host "
          f"memory -> ({args.rois}, 3, {dh}, {dw}) f32 RGB /255 in CUDA "
          f"memory, H2D counted", flush=True)

    try:
        import torchvision
        from torchvision.ops import roi_align
        rb = torch.tensor([[0, x, y, x + w, y + h] for x, y, w, h in boxes],
                          dtype=torch.float32, device="cuda")

        def tv_step():
            dev.copy_(pinned, non_blocking=True)
            x = dev.permute(2, 0, 1)[None].flip(1).float()
            y = roi_align(x, rb, output_size=(dh, dw), spatial_scale=1.0,
                          sampling_ratio=2, aligned=True)
            return y.mul_(1.0 / 255.0)

        rps, p50 = timed(torch, np, tv_step, args.iters)
        record(args, "torchvision", rps, p50,
               f"(roi_align, torchvision {torchvision.__version__})")
    except ImportError as e:
        print(f"torchvision  missing ({e})")

    try:
        import cvcuda
    except ImportError as e:
        print(f"cvcuda       missing ({e}): not measured")
        return 0
    src = cvcuda.as_tensor(dev[None], "NHWC")
    crops = [cvcuda.RectI(x, y, w, h) for x, y, w, h in boxes]
    resized = torch.empty((args.rois, dh, dw, 3), dtype=torch.uint8,
                          device="cuda")
    outs = [cvcuda.as_tensor(resized[k:k + 1], "NHWC")
            for k in range(args.rois)]
    whole = cvcuda.as_tensor(resized, "NHWC")

    def cv_step():
        dev.copy_(pinned, non_blocking=True)
        for k, r in enumerate(crops):
            c = cvcuda.customcrop(src, r)
            cvcuda.resize_into(outs[k], c, cvcuda.Interp.LINEAR)
        f = cvcuda.convertto(whole, np.float32, scale=1.0 / 255.0)
        return torch.as_tensor(f.cuda()).permute(0, 3, 1, 2).flip(1)

    rps, p50 = timed(torch, np, cv_step, args.iters)
    record(args, "cvcuda", rps, p50, f"(per-box loop, cvcuda "
           f"{getattr(cvcuda, '__version__', '?')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
