#!/usr/bin/env python3
"""bench_cuda: a 1920x1080 BGR8 frame in a producer -> a 1x3x640x640 f32
tensor in the consumer's GPU memory, four ways (five with --nv12), on one
GPU machine:

  (a) shm_cuda   frame in shared memory -> frameprepd writes the tensor
                 straight into the consumer's batch (CUDA region)
  (b) shm_shm    frame in shared memory -> tensor into shared memory
                 (pinned with cudaHostRegister) -> batch[k].copy_(...,
                 non_blocking=True) on the consumer's stream: today's best
  (c) torch      in-process PyTorch peer: pinned frame -> .cuda(non_blocking)
                 -> F.interpolate letterbox into batch[k], one stream per
                 slot
  (d) cuda_cuda  frame in the producer's GPU memory -> tensor into the
                 consumer's (both CUDA regions)
  (a') shm_cuda_nv12  with --nv12: (a) with the same frame as NV12 (the
                 Y plane, then the interleaved UV plane, unpadded: 1.5
                 bytes a pixel, half of BGR8's), BT.601 limited

For each: p50 latency at concurrency 1 (one frame at a time) and the
saturated rate (--procs processes x --threads threads for the frameprep
ways, --streams streams for the peer; (a') --nv12-procs processes). Also
the H2D bound: frames/s if the link did nothing but carry 1080p frames
(pinned cudaMemcpy, CUDA events), of BGR8 and with --nv12 of NV12. Every
way's output is checked against the frameprep CPU reference once (with
--cpu-socket; (a') against the CPU daemon's tensor of the same NV12 bytes).
Ends with a table and one PASS/FAIL line on the issue's bars: (a) >= 1.6x
(b) saturated, (a) >= 90% of the BGR8 H2D bound, (a) p50 <= 0.75x (b) p50.
With --nv12 also issue 11's bar on its own line, (a') >= 90% of the NV12
H2D bound, and (a')'s rate against (a)'s, printed, not judged: issue 11
asked for 1.6x, when both frames crossed PCIe whole; a lane now copies
only the rows the resize reads (a third of a 1080p frame for 640x640,
luma and chroma alike), so neither way is bound by the link and the two
rates are the daemon's. Exit status 0 when every check and every bar
printed is met.

Usage: bench_cuda.py --socket URL --image PNG [--cpu-socket URL]
                     [--duration S] [--nv12 [--nv12-procs N]]
Needs torch, cuda-python and the frameprep package; exit 77 without
a GPU.
"""
import argparse
import multiprocessing as mp
import os
import sys
import threading
import time

W, H, OW, OH = 1920, 1080, 640, 640
FRAME = W * H * 3
NV12 = W * H * 3 // 2  # the Y plane, then H / 2 rows of W bytes U V
TENSOR = 3 * OW * OH * 4


def _frame(image):
    import cv2
    img = cv2.imread(image, cv2.IMREAD_COLOR)
    if img is None:
        sys.exit(f"cannot read {image}")
    return cv2.resize(img, (W, H), interpolation=cv2.INTER_LINEAR)


def _nv12(bgr):
    """A BGR frame as NV12 (BT.601 limited, OpenCV's conversion): one
    (H * 3 / 2, W) uint8 array, the Y rows and then the UV rows, as
    cvtColor's COLOR_YUV2BGR_NV12 and frameprep's format="nv12" take it."""
    import cv2
    import numpy as np
    h, w = bgr.shape[:2]
    i420 = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420).reshape(-1)
    y, q = w * h, w * h // 4
    u = i420[y:y + q].reshape(h // 2, w // 2)
    v = i420[y + q:y + 2 * q].reshape(h // 2, w // 2)
    return np.concatenate([i420[:y].reshape(h, w),
                           np.stack([u, v], 2).reshape(h // 2, w)])


def _pct(lat, q):
    import numpy as np
    return float(np.percentile(np.asarray(lat) * 1e3, q)) if lat else 0.0


class Rig:
    """One connection with a shared-memory ring (frames pre-written into
    every slot: the producer decoded into shared memory; BGR8, or with
    nv12 the same frame as NV12 for the way shm_cuda_nv12), a CUDA batch
    of the consumer and a CUDA frame (BGR8) of the producer."""

    def __init__(self, url, image, slots, nv12=False):
        import torch

        import frameprep
        from frameprep.protocol import Location
        self.torch, self.Location = torch, Location
        self.client = frameprep.Client(url, timeout=60)
        self.ring = self.client.ring(slots=slots, frame=(H, W, 3))
        frame = _frame(image)
        shm = (_nv12(frame) if nv12 else frame).reshape(-1)
        for k in range(slots):
            at = self.ring._slot_bytes * k + self.ring._frame_off
            self.ring._map.buf[at:at + shm.size] = shm
        self.batch = torch.empty((slots, 3, OH, OW), device="cuda")
        self.dframe = torch.from_numpy(frame).cuda()
        torch.cuda.synchronize()
        self.batch_region, self.batch_off = self.client.register_cuda(
            self.batch)
        self.frame_region, self.frame_off = self.client.register_cuda(
            self.dframe)
        # (b): the ring's tensors are pinned for the consumer's copies.
        rt = torch.cuda.cudart()
        self.pinned = int(rt.cudaHostRegister(self.ring._map.base,
                                              self.ring.size, 0)) == 0
        self.streams = [torch.cuda.Stream() for _ in range(slots)]

    def request(self, way, k):
        import numpy as np

        from frameprep.protocol import PixelFormat, Request, YuvMatrix, \
            YuvRange
        L = self.Location
        if way == "shm_cuda_nv12":  # the ring's frames are NV12 (nv12=True)
            req = Request(src_format=PixelFormat.NV12,
                          yuv_matrix=YuvMatrix.BT601,
                          yuv_range=YuvRange.LIMITED, src_width=W,
                          src_height=H, src_stride=W, uv_stride=W,
                          u_offset=W * H, input_size=NV12)
        else:
            req = Request(src_width=W, src_height=H, src_stride=W * 3,
                          input_size=FRAME)
        slot = self.ring._slot_bytes * k
        if way == "cuda_cuda":
            req.input_loc, req.in_region = L.CUDA, self.frame_region
            req.in_offset = self.frame_off
        else:
            req.input_loc, req.in_region = L.SHM, self.ring.region_id
            req.in_offset = slot + self.ring._frame_off
        if way == "shm_shm":
            req.output_loc, req.out_region = L.SHM, self.ring.region_id
            req.out_offset, req.out_capacity = slot, TENSOR
        else:
            req.output_loc, req.out_region = L.CUDA, self.batch_region
            req.out_offset = self.batch_off + k * TENSOR
            req.out_capacity = TENSOR
        self.client.request(req)
        if way == "shm_shm":
            torch = self.torch
            view = self.ring._map.buf[slot:slot + TENSOR].view(np.float32)
            src = torch.from_numpy(view).view(3, OH, OW)
            s = self.streams[k]
            with torch.cuda.stream(s):
                self.batch[k].copy_(src if self.pinned else src.pin_memory(),
                                    non_blocking=True)
            s.synchronize()

    def close(self):
        if self.pinned:
            self.torch.cuda.cudart().cudaHostUnregister(self.ring._map.base)
        self.client.release_cuda()
        self.ring.close()
        self.client.close()


def _worker(url, image, way, threads, duration, q, start):
    """One process: threads loops of requests for duration seconds, from
    when every process has finished its set-up (start, a barrier), so that
    the processes' windows coincide and their counts add up."""
    rig = Rig(url, image, threads, nv12=way == "shm_cuda_nv12")
    for k in range(threads):
        rig.request(way, k)  # warm-up
    lat = [[] for _ in range(threads)]
    start.wait()
    stop = time.perf_counter() + duration

    def loop(k):
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            rig.request(way, k)
            lat[k].append(time.perf_counter() - t0)

    ts = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    q.put((sum(len(x) for x in lat), time.perf_counter() - t0,
           [v for x in lat for v in x]))
    rig.close()


def run_way(url, image, way, procs, threads, duration, iters):
    """(p50 ms at concurrency 1, saturated frames/s, p50 ms saturated)."""
    rig = Rig(url, image, 1, nv12=way == "shm_cuda_nv12")
    for _ in range(20):
        rig.request(way, 0)
    lat = []
    for _ in range(iters):
        t0 = time.perf_counter()
        rig.request(way, 0)
        lat.append(time.perf_counter() - t0)
    rig.close()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start = ctx.Barrier(procs)
    ps = [ctx.Process(target=_worker,
                      args=(url, image, way, threads, duration, q, start))
          for _ in range(procs)]
    for p in ps:
        p.start()
    got = [q.get(timeout=duration + 120) for _ in ps]
    for p in ps:
        p.join()
    n = sum(g[0] for g in got)
    secs = max(g[1] for g in got)
    sat = [v for g in got for v in g[2]]
    return _pct(lat, 50), n / secs if secs > 0 else 0.0, _pct(sat, 50)


def run_torch(image, streams, duration, iters):
    """The in-process PyTorch peer: c=1 p50 and the pipelined rate."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import peer_common
    nw, nh, left, top, _, _ = peer_common.letterbox_geometry(W, H, OW, OH)
    frame = _frame(image)
    k = streams
    ss = [torch.cuda.Stream() for _ in range(k)]
    pin = [torch.empty((H, W, 3), dtype=torch.uint8, pin_memory=True)
           for _ in range(k)]
    for p in pin:
        p.numpy()[...] = frame  # the producer's frame, pinned
    dev = [torch.empty((H, W, 3), dtype=torch.uint8, device="cuda")
           for _ in range(k)]
    batch = torch.full((k, 3, OH, OW), 114.0 / 255.0, device="cuda")
    ev = [torch.cuda.Event() for _ in range(k)]

    def submit(s):
        with torch.cuda.stream(ss[s]):
            dev[s].copy_(pin[s], non_blocking=True)
            x = dev[s].permute(2, 0, 1)[None].float()
            y = F.interpolate(x, size=(nh, nw), mode="bilinear",
                              align_corners=False, antialias=False)
            torch.mul(y.flip(1), 1.0 / 255.0, out=y)
            batch[s:s + 1, :, top:top + nh, left:left + nw].copy_(y)
            ev[s].record(ss[s])

    for _ in range(20):
        submit(0)
        ev[0].synchronize()
    lat = []
    for _ in range(iters):
        t0 = time.perf_counter()
        submit(0)
        ev[0].synchronize()
        lat.append(time.perf_counter() - t0)
    n, t_sub, sat = 0, [None] * k, []
    stop = time.perf_counter() + duration
    t0 = time.perf_counter()
    i = 0
    while time.perf_counter() < stop:
        s = i % k
        if t_sub[s] is not None:
            ev[s].synchronize()
            sat.append(time.perf_counter() - t_sub[s])
            n += 1
        t_sub[s] = time.perf_counter()
        submit(s)
        i += 1
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    return _pct(lat, 50), n / secs, _pct(sat, 50), batch[0].cpu().numpy()


def h2d_bound(nbytes):
    """Frames of nbytes (FRAME: 1080p BGR8, NV12: 1080p NV12) a second the
    H2D link carries, pinned, CUDA events."""
    import torch
    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    src.numpy()[...] = 7
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    for _ in range(10):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), \
        torch.cuda.Event(enable_timing=True)
    n = 200
    a.record()
    for _ in range(n):
        dst.copy_(src, non_blocking=True)
    b.record()
    b.synchronize()
    return n / (a.elapsed_time(b) / 1e3)


def check_outputs(url, cpu_url, image, nv12=False):
    """Each frameprep way and the peer against the CPU daemon's tensor;
    returns (way, worst difference) pairs. With nv12 also shm_cuda_nv12,
    against the CPU daemon's tensor of the same NV12 bytes."""
    import numpy as np
    import torch

    import frameprep

    def worst(rig, way, want):
        rig.batch.fill_(float("nan"))
        torch.cuda.synchronize()
        rig.request(way, 0)
        got = rig.batch[0].cpu().numpy()
        return (way, float(np.nanmax(np.abs(got - want)))
                if not np.isnan(got).any() else float("inf"))

    frame = _frame(image)
    with frameprep.Client(cpu_url) as c:
        ref = c.preprocess(frame).tensor[0].copy()
        if nv12:
            ref_nv12 = c.preprocess(_nv12(frame),
                                    format="nv12").tensor[0].copy()
    rig = Rig(url, image, 1)
    out = [worst(rig, way, ref) for way in ("shm_cuda", "shm_shm",
                                            "cuda_cuda")]
    rig.close()
    if nv12:
        rig = Rig(url, image, 1, nv12=True)
        out.append(worst(rig, "shm_cuda_nv12", ref_nv12))
        rig.close()
    return out, ref


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", required=True, help="GPU frameprepd URL")
    ap.add_argument("--cpu-socket", help="CPU frameprepd URL (reference)")
    ap.add_argument("--image", required=True)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--nv12", action="store_true",
                    help="also run shm_cuda_nv12 (the frame as NV12 in "
                    "shared memory -> CUDA out), its NV12 H2D bound and "
                    "check, and judge issue 11's bars (its own PASS/FAIL "
                    "line; a bar not met makes the exit status 1)")
    ap.add_argument("--nv12-procs", type=int, default=6,
                    help="processes (of --threads threads) for the "
                    "saturated run of shm_cuda_nv12 only (default 6: its "
                    "rate, about 2x BGR8's, needs more Python clients "
                    "than --procs)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_cuda: SKIP (no torch)")
        return 77
    if not torch.cuda.is_available():
        print("bench_cuda: SKIP (no GPU)")
        return 77
    bound = h2d_bound(FRAME)
    print(f"H2D bound: {bound:.0f} frames/s of 1080p BGR8", flush=True)
    if args.nv12:
        bound_nv12 = h2d_bound(NV12)
        print(f"H2D bound: {bound_nv12:.0f} frames/s of 1080p NV12",
              flush=True)
    ok = True
    if args.cpu_socket:
        worst, ref = check_outputs(args.socket, args.cpu_socket, args.image,
                                   args.nv12)
        for way, d in worst:
            good = d <= 1.0001 / 255
            ok &= good
            print(f"check {way}: max |diff| vs CPU {d:.2e} "
                  f"{'ok' if good else 'TOO LARGE'}", flush=True)
    ways = ["shm_cuda", "shm_shm", "cuda_cuda"]
    if args.nv12:
        ways.insert(1, "shm_cuda_nv12")
    rows = {}
    for way in ways:
        procs = args.nv12_procs if way == "shm_cuda_nv12" else args.procs
        rows[way] = run_way(args.socket, args.image, way, procs,
                            args.threads, args.duration, args.iters)
        p50, rate, sp50 = rows[way]
        print(f"{way}: c=1 p50 {p50:.3f} ms; saturated {rate:.0f} frames/s "
              f"(p50 {sp50:.3f} ms, {procs}x{args.threads})", flush=True)
    p50, rate, sp50, _ = run_torch(args.image, args.streams,
                                   args.duration, args.iters)
    rows["torch"] = (p50, rate, sp50)
    print(f"torch: c=1 p50 {p50:.3f} ms; saturated {rate:.0f} frames/s "
          f"(p50 {sp50:.3f} ms, {args.streams} streams)", flush=True)
    names = {"shm_cuda": "(a) shm in -> CUDA out",
             "shm_cuda_nv12": "(a') shm NV12 in -> CUDA out",
             "shm_shm": "(b) shm -> shm -> pinned .cuda()",
             "torch": "(c) in-process PyTorch peer",
             "cuda_cuda": "CUDA in -> CUDA out"}
    print()
    print(f"{'way':36s} {'c=1 p50 ms':>10s} {'frames/s':>9s} "
          f"{'sat p50 ms':>10s}")
    for way in ("shm_cuda", "shm_cuda_nv12", "shm_shm", "torch",
                "cuda_cuda"):
        if way not in rows:
            continue
        p50, rate, sp50 = rows[way]
        print(f"{names[way]:36s} {p50:10.3f} {rate:9.0f} {sp50:10.3f}")
    a, b = rows["shm_cuda"], rows["shm_shm"]
    bars = [("(a) rate >= 1.6x (b)", a[1] >= 1.6 * b[1],
             f"{a[1] / b[1]:.2f}x" if b[1] else "-"),
            ("(a) rate >= 90% of H2D bound", a[1] >= 0.9 * bound,
             f"{100 * a[1] / bound:.0f}%"),
            ("(a) p50 <= 0.75x (b) p50", a[0] <= 0.75 * b[0],
             f"{a[0] / b[0]:.2f}x" if b[0] else "-")]
    print()
    for name, good, val in bars:
        print(f"  {name:32s} {val:>8s} {'met' if good else 'NOT met'}")
        ok &= good
    print(f"bench_cuda: {'PASS' if ok else 'FAIL'}")
    if not args.nv12:
        return 0 if ok else 1
    # Issue 11: NV12 in shared memory -> CUDA out against BGR8 (a) of this
    # run and against its own bound; judged apart from the bars above, and,
    # as they do, a bar not met makes the exit status 1.
    rate_nv12 = rows["shm_cuda_nv12"][1]
    ratio = rate_nv12 / a[1] if a[1] else 0.0
    share = rate_nv12 / bound_nv12
    print(f"NV12/BGR8 (shm in -> CUDA out): {ratio:.2f}x; "
          f"NV12 at {100 * share:.0f}% of its H2D bound")
    share_ok = share >= 0.9
    print(f"bench_cuda issue 11: {'PASS' if share_ok else 'FAIL'}"
          f" (NV12 >= 90% of its H2D bound "
          f"{'met' if share_ok else 'NOT met'}; NV12/BGR8 {ratio:.2f}x, "
          f"both copying only the rows the resize reads)")
    return 0 if ok and share_ok else 1


if __name__ == "__main__":
    sys.exit(main())
