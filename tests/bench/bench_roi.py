#!/usr/bin/env python3
"""bench_roi: 64 boxes of one 1080p frame into a (64, 3, 224, 224) f32 tensor
in CUDA memory: frameprep against torchvision roi_align and a CV-CUDA loop,
in one run (issue 27's ROI bar).

  frameprep    Client.crops(ring_frame, boxes, resize="stretch",
               out=<torch CUDA tensor>) on the daemon at --socket: the
               frame written once into a ring slot of each client (shared
               memory, read where it lies, never resent), the tensor
               written by the daemon straight into the caller's CUDA
               memory (a CUDA region); -c concurrencies, 1 and 4 by
               default (threads, each with its own client, ring and out
               tensor). The daemon copies the rows the boxes read (H2D)
               and replies once the tensor is complete.
  torchvision  torchvision.ops.roi_align(aligned=True, sampling_ratio=2)
               of the whole batch of boxes (one launch; a 2x2-sample box
               filter, so not bilinear: checked within a looser bound).
  cvcuda       a per-box loop of CV-CUDA's fused op
               (resize_crop_convert_reformat_into: resize INTER_LINEAR,
               u8 -> f32 * 1/255, BGR -> RGB, NHWC -> NCHW) from a view of
               the box into row k of the tensor; one stream shared with
               torch. Skipped with a line where cvcuda does not import.

Each peer gets the frame in pinned host memory and copies it to the GPU in
every request (counted). The peers run at --peer-threads concurrencies, 1
and 4 by default, as frameprep does: N Python threads, each with its own
CUDA stream, its own pinned copy of the frame, device frame and output
tensor (torchvision's roi_align allocates its output on the thread's
stream), and each thread waits for its own stream only. All paths stretch each box to 224x224 (RGB, /255,
NCHW). Each path's tensor is checked once against the CPU reference
(OpenCV per box: cv2.resize(frame[y:y+h, x:x+w], INTER_LINEAR), /255):
frameprep and CV-CUDA within 1 LSB (1/255), torchvision (another filter:
2x2 bilinear samples averaged per output pixel) mean |d| within 2 LSB (on
astronaut.png an emulation of that filter is 0.3 LSB off on average; BGR
for RGB would be 27, every box 3 pixels off 4.8).

Prints a table (requests/s, boxes/s, p50, p99 per path and concurrency)
and the bar, judged best against best: frameprep's best rate at any
concurrency >= 1.5x CV-CUDA's best and >= 1.0x torchvision's best, PASS
or FAIL (the ratios at equal concurrency are shown, not judged), and the
client process's CPU per request of each path. Exit 0 when every check and bar
passed, 1 otherwise, 77 without torch, torchvision or a GPU.
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_roi import SKIP, setup  # noqa: E402  (the same boxes)

LSB = 1.0 / 255


def reference(cv2, np, frame, boxes, dw, dh):
    """OpenCV per box: (N, 3, dh, dw) f32, RGB, /255."""
    rows = []
    for x, y, w, h in boxes:
        r = cv2.resize(frame[y:y + h, x:x + w], (dw, dh),
                       interpolation=cv2.INTER_LINEAR)
        rows.append(r[:, :, ::-1].transpose(2, 0, 1))
    return np.stack(rows).astype(np.float32) / np.float32(255)


class Point:
    """One measured point: path, concurrency, requests, seconds,
    latencies (s) and this process's CPU seconds meanwhile (all its
    threads: Python, the C client's, the peers' libraries')."""

    def __init__(self, path, c, got, np):
        n, secs, lat, cpu = got
        self.path, self.c, self.n, self.secs = path, c, n, secs
        self.cpu_us = cpu / n * 1e6 if n else 0.0
        a = np.asarray(lat) * 1e3
        self.rps = n / secs if secs > 0 else 0.0
        self.p50 = float(np.percentile(a, 50)) if len(a) else 0.0
        self.p99 = float(np.percentile(a, 99)) if len(a) else 0.0


def run_threads(np, steps, duration, warmup):
    """Runs each step (one per thread) in a loop for warmup, then duration
    seconds; returns (requests, seconds, latencies, process CPU
    seconds)."""
    lats = [[] for _ in steps]
    counts = [0] * len(steps)
    errors = []
    start = threading.Barrier(len(steps) + 1)
    state = {"measure": False, "stop": False}

    def loop(i):
        step = steps[i]
        try:
            start.wait()
            while not state["stop"]:
                t = time.perf_counter()
                step()
                dt = time.perf_counter() - t
                if state["measure"]:
                    lats[i].append(dt)
                    counts[i] += 1
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
            state["stop"] = True

    threads = [threading.Thread(target=loop, args=(i,), daemon=True)
               for i in range(len(steps))]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(warmup)
    state["measure"] = True
    t0, cpu0 = time.perf_counter(), time.process_time()
    time.sleep(duration)
    state["measure"] = False
    secs, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    state["stop"] = True
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sum(counts), secs, [x for lat in lats for x in lat], cpu


def check(name, np, got, ref, bound, mean_bound=None):
    """Prints and returns whether got is within bound (max |d|) or, with
    mean_bound, within mean_bound on average of ref."""
    d = np.abs(np.asarray(got, np.float32) - ref)
    mx, mean = float(d.max()), float(d.mean())
    if mean_bound is None:
        ok = mx <= bound + 1e-6
        rule = f"max |d| <= {bound / LSB:.0f} LSB"
    else:
        ok = mean <= mean_bound + 1e-6
        rule = f"mean |d| <= {mean_bound / LSB:.0f} LSB (another filter)"
    print(f"check {name:11s} against OpenCV per box: max |d| "
          f"{mx / LSB:.3f} LSB, mean {mean / LSB:.4f} LSB; {rule}: "
          f"{'OK' if ok else 'WRONG'}", flush=True)
    return ok


def frameprep_points(args, np, torch, frame, boxes, ref, points):
    """The frameprep rows; returns whether the tensor checked out."""
    import frameprep
    dw, dh = args.dst
    arr = np.asarray(boxes, np.float32)
    cs = [int(v) for v in args.c.split(",")]
    clients, rings, outs, bufs = [], [], [], []
    ok = True
    try:
        for _ in range(max(cs)):
            c = frameprep.Client(args.socket, timeout=args.timeout)
            clients.append(c)
            # One slot for the frame; the ring's own tensor area is
            # unused (8x8 u8) since crops write the CUDA out.
            ring = c.ring(slots=1, frame=frame.shape, doorbell=False,
                          size=(8, 8), dtype="uint8")
            rings.append(ring)
            buf = ring.next_frame()
            buf[:] = frame
            bufs.append(buf)
            out = torch.full((len(boxes), 3, dh, dw), float("nan"),
                             device="cuda")
            outs.append(out)
            c.register_cuda(out)  # the first open costs the daemon ~0.2 s

        def step_of(i):
            c, buf, out = clients[i], bufs[i], outs[i]

            def step():
                c.crops(buf, arr, size=(dw, dh), resize="stretch",
                        out=out)
            return step

        r = clients[0].crops(bufs[0], arr, size=(dw, dh), resize="stretch",
                             out=outs[0])
        assert r.reply.output_loc == 2, r.reply
        got = outs[0].cpu().numpy()
        ok = check("frameprep", np, got, ref, LSB)
        info = clients[0].info()
        print(f"frameprep    daemon {info.get('version', '?')}, backend "
              f"{info.get('backend', '?')}, device {info.get('device', '?')}"
              f"; request: {r.reply.t_h2d_us} us H2D, "
              f"{r.reply.t_kernel_us} us kernel, {r.reply.t_d2h_us} us D2H, "
              f"{r.reply.t_total_us} us in the daemon", flush=True)
        for c in cs:
            points.append(Point("frameprep", c, run_threads(
                np, [step_of(i) for i in range(c)], args.duration,
                args.warmup), np))
            print_point(args, points[-1])
            # The daemon's stage times of one request after the run.
            t = clients[0].crops(bufs[0], arr, size=(dw, dh),
                                 resize="stretch", out=outs[0]).reply
            print(f"    one request after it: queue {t.t_queue_us} us, H2D "
                  f"{t.t_h2d_us} us, kernel {t.t_kernel_us} us, D2H "
                  f"{t.t_d2h_us} us, daemon total {t.t_total_us} us",
                  flush=True)
    finally:
        for buf in bufs:
            buf.cancel()
        for ring in rings:
            ring.close()
        for c in clients:
            try:
                c.release_cuda()
            finally:
                c.close()
    return ok


def peer_points(args, np, torch, name, make, ref, bound, mean_bound,
                points):
    """Measures a peer at each of --peer-threads: make(i) builds thread
    i's state (own stream, pinned frame, device frame, output) and
    returns its step, which returns the (N, 3, h, w) tensor. Thread 0's
    tensor is checked against ref; every other thread's must equal it.
    Returns whether the checks passed."""
    cs = peer_threads(args)
    steps = [make(i) for i in range(max(cs))]
    first = steps[0]().cpu().numpy()
    ok = check(name, np, first, ref, bound, mean_bound)
    for i, step in enumerate(steps[1:], 1):
        got = step().cpu().numpy()
        if not np.array_equal(got, first):
            d = float(np.abs(got - first).max()) / LSB
            print(f"check {name:11s} thread {i}'s tensor differs from "
                  f"thread 0's by up to {d:.3f} LSB: WRONG", flush=True)
            ok = False
    for c in cs:
        points.append(Point(name, c, run_threads(
            np, steps[:c], args.duration, args.warmup), np))
        print_point(args, points[-1])
    return ok


def torchvision_points(args, np, torch, frame, boxes, ref, points):
    """The torchvision rows; returns whether its tensor checked out (True
    when torchvision is missing: a line says so)."""
    try:
        import torchvision
        from torchvision.ops import roi_align
    except ImportError as exc:
        print(f"torchvision  missing ({exc}): not measured")
        return True
    dw, dh = args.dst
    print(f"torchvision  {torchvision.__version__}, torch "
          f"{torch.__version__}", flush=True)

    def make(i):
        stream = torch.cuda.Stream()
        pinned = torch.from_numpy(frame).pin_memory()
        with torch.cuda.stream(stream):
            dev = torch.empty_like(pinned, device="cuda")
            rb = torch.tensor([[0, x, y, x + w, y + h]
                               for x, y, w, h in boxes],
                              dtype=torch.float32, device="cuda")
        stream.synchronize()

        def step():
            with torch.cuda.stream(stream):
                dev.copy_(pinned, non_blocking=True)
                x = dev.permute(2, 0, 1)[None].flip(1).float()
                y = roi_align(x, rb, output_size=(dh, dw),
                              spatial_scale=1.0, sampling_ratio=2,
                              aligned=True)
                y.mul_(1.0 / 255.0)
            stream.synchronize()
            return y
        return step

    return peer_points(args, np, torch, "torchvision", make, ref, 0,
                       2 * LSB, points)


def cvcuda_points(args, np, torch, frame, boxes, ref, points):
    """The CV-CUDA rows; returns whether its tensor checked out (True when
    cvcuda does not import: a line says so)."""
    try:
        import cvcuda
    except ImportError as exc:
        print(f"cvcuda       missing ({exc}): not measured (the bar "
              f"against it is skipped)")
        return True
    dw, dh = args.dst
    how = []

    def make(i):
        cvs = cvcuda.Stream()
        ts = torch.cuda.ExternalStream(cvs.handle)
        pinned = torch.from_numpy(frame).pin_memory()
        with torch.cuda.stream(ts):
            dev = torch.empty_like(pinned, device="cuda")
            out = torch.empty((len(boxes), 3, dh, dw), dtype=torch.float32,
                              device="cuda")
        ts.synchronize()
        # The wrappers are made once, outside the timed loop (this
        # favours the peer: a pipeline whose boxes change wraps them
        # every frame).
        dsts = [cvcuda.as_tensor(out[k:k + 1], "NCHW")
                for k in range(len(boxes))]
        whole = cvcuda.as_tensor(dev[None], "NHWC")
        try:  # the box as a view of the frame (row pitch of the frame)
            views = [dev[y:y + h, x:x + w][None] for x, y, w, h in boxes]
            srcs = [cvcuda.as_tensor(v, "NHWC") for v in views]
            crops = None
            if not how:
                how.append("from a view of each box")
        except Exception as exc:  # copied out first: one more launch a box
            if not how:
                print(f"cvcuda       a strided view is refused ({exc}): "
                      f"each box copied by customcrop_into first")
                how.append("after customcrop_into of each box")
            with torch.cuda.stream(ts):
                views = [torch.empty((1, h, w, 3), dtype=torch.uint8,
                                     device="cuda")
                         for x, y, w, h in boxes]
            ts.synchronize()
            srcs = [cvcuda.as_tensor(v, "NHWC") for v in views]
            crops = [cvcuda.RectI(x, y, w, h) for x, y, w, h in boxes]

        def step():
            with cvs, torch.cuda.stream(ts):
                dev.copy_(pinned, non_blocking=True)
                for k, (s, d) in enumerate(zip(srcs, dsts)):
                    if crops is not None:
                        cvcuda.customcrop_into(s, whole, crops[k],
                                               stream=cvs)
                    cvcuda.resize_crop_convert_reformat_into(
                        d, s, (dw, dh), cvcuda.Interp.LINEAR, (0, 0),
                        manip=cvcuda.ChannelManip.REVERSE, scale=1.0 / 255,
                        offset=0.0, stream=cvs)
                ts.synchronize()
            return out
        return step

    steps0 = make(0)  # the first thread's state says how boxes are read
    print(f"cvcuda       {getattr(cvcuda, '__version__', '?')}: per-box "
          f"resize_crop_convert_reformat_into {how[0]}", flush=True)
    return peer_points(args, np, torch, "cvcuda",
                       lambda i: steps0 if i == 0 else make(i), ref, LSB,
                       None, points)


def peer_threads(args):
    """--peer-threads as a list of concurrencies."""
    return [int(v) for v in args.peer_threads.split(",")]


def print_point(args, p):
    print(f"  {p.path:11s} c={p.c:<2d} {p.rps:9.1f} requests/s "
          f"({p.rps * args.rois:10.0f} boxes/s), p50 {p.p50:.3f} ms, "
          f"p99 {p.p99:.3f} ms, client CPU {p.cpu_us:.0f} us/request "
          f"({p.n} requests)", flush=True)


def bar(name, ours, theirs, want, judged=True):
    """Prints one ratio line; returns True (pass), False (fail)."""
    r = ours.rps / theirs.rps if theirs.rps > 0 else 0.0
    ok = r >= want
    verdict = ("PASS" if ok else "FAIL") if judged else \
        f"({'above' if ok else 'below'}; shown, not judged)"
    print(f"{'bar' if judged else 'equal c'}: frameprep c={ours.c} "
          f"{ours.rps:.1f} / {name} c={theirs.c} {theirs.rps:.1f} "
          f"requests/s = {r:.2f}x (want >= {want:.1f}x): {verdict}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", required=True,
                    help="a GPU frameprepd's URL (ipc://...)")
    ap.add_argument("--image", required=True, help="a real photograph")
    ap.add_argument("--size", default="1920x1080", help="frame WxH")
    ap.add_argument("--dst", default="224x224", help="crop WxH")
    ap.add_argument("--rois", type=int, default=64)
    ap.add_argument("-c", default="1,4", help="frameprep concurrencies")
    ap.add_argument("--peer-threads", default="1,4",
                    help="the peers' concurrencies (threads, each with "
                    "its own stream, frame and output)")
    ap.add_argument("-d", "--duration", type=float, default=4.0,
                    help="seconds a point")
    ap.add_argument("-w", "--warmup", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()
    got = setup(args, "bench_roi")
    if got == SKIP:
        return SKIP
    cv2, np, torch, frame, boxes = got
    sw, sh = args.size
    dw, dh = args.dst
    ref = reference(cv2, np, frame, boxes, dw, dh)
    print(f"{args.rois} boxes of {args.image.split('/')[-1]} at {sw}x{sh} "
          f"BGR8 -> ({args.rois}, 3, {dh}, {dw}) f32 RGB /255 in CUDA "
          f"memory, each box stretched (INTER_LINEAR); {args.duration:g} s "
          f"a point after {args.warmup:g} s warm-up; GPU "
          f"{torch.cuda.get_device_name(0)}", flush=True)
    points, checks = [], []
    try:
        checks.append(frameprep_points(args, np, torch, frame, boxes, ref,
                                       points))
    except Exception:  # the peers are still measured
        import traceback
        traceback.print_exc()
        print("frameprep    failed: no rows, FAIL")
        checks.append(False)
    checks.append(torchvision_points(args, np, torch, frame, boxes, ref,
                                     points))
    try:
        checks.append(cvcuda_points(args, np, torch, frame, boxes, ref,
                                    points))
    except Exception as exc:  # an API difference: say so, keep the rest
        print(f"cvcuda       failed, not measured: {type(exc).__name__}: "
              f"{exc}")

    print()
    print("| path | c | requests/s | boxes/s | p50 ms | p99 ms | "
          "client CPU us/request |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for p in points:
        print(f"| {p.path} | {p.c} | {p.rps:.1f} | {p.rps * args.rois:.0f} "
              f"| {p.p50:.3f} | {p.p99:.3f} | {p.cpu_us:.0f} |")
    ours = [p for p in points if p.path == "frameprep"]

    def best_of(path):
        got = [p for p in points if p.path == path]
        return max(got, key=lambda p: p.rps) if got else None
    tv = best_of("torchvision")
    bars = []
    if ours:
        best = best_of("frameprep")
        for name, want in (("cvcuda", 1.5), ("torchvision", 1.0)):
            peer = best_of(name)
            if peer is None:
                print(f"bar against {name}: not measured")
                continue
            for p in ours:  # equal concurrencies: shown, not judged
                same = next((q for q in points
                             if q.path == name and q.c == p.c), None)
                if same is not None:
                    bar(name, p, same, want, judged=False)
            bars.append(bar(name, best, peer, want))
    passed = all(checks) and all(bars) and bool(ours)
    if passed and tv is None:
        print("roi_peers: SKIP (checks OK; no torchvision, so the bar "
              "against it was not judged)")
        return SKIP
    print(f"roi_peers: {'PASS' if passed else 'FAIL'} (checks "
          f"{'OK' if all(checks) else 'WRONG'}, bars judged best rate "
          f"against best rate, any concurrency)")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
