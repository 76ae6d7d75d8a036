#!/usr/bin/env python3
"""peer_video: what users do today with camera streams, measured beside
frameprep's video streams (test_video_gpu rate, frameprep-bench --video).

N threads each open their own PyNvVideoCodec demuxer and NVDEC decoder on
the same file (H.264 or HEVC, Annex-B or a container libavformat reads) and
decode it flat out, from its start again at its end, for --seconds, the
clock started once every thread has made its decoder and decoded its first
WARM packets (as test_video_gpu rate does for frameprep's streams):

  decode     frames decoded into CUDA memory (NV12), nothing else: the
             engines' rate as PyNvVideoCodec drives them
  letterbox  each frame then made a model's input in torch, as a user
             writes it: NV12 -> RGB (BT.601 limited range, as libavcodec's
             default and frameprep's NV12 conversion), bilinear resize into
             --size keeping the aspect ratio (F.interpolate, half-pixel
             centres as OpenCV's INTER_LINEAR), pad 114, /255, float32
             NCHW, on the thread's own CUDA stream, synchronized per frame

For each mode and each --streams count it prints one line: frames/s over
all threads and, per frame, the latency from the Decode call that gave it
to its tensor ready (p50, p99): the peer's side of "from its last packet to
its tensor". Exit status 77 when PyNvVideoCodec or a GPU is missing.
"""
import argparse
import sys
import threading
import time

SKIP = 77
# Packets each stream decodes before the clock starts (test_video_gpu
# rate's warm-up: 8 packets and a flush).
WARM = 8


def letterbox_geometry(w, h, ow, oh):
    """(new_w, new_h, left, top) of the Ultralytics letterbox
    (round-half-even, as the protocol says)."""
    r = min(ow / w, oh / h)
    nw, nh = round(w * r), round(h * r)
    return nw, nh, round((ow - nw) / 2 - 0.1), round((oh - nh) / 2 - 0.1)


def make_letterbox(torch, w, h, ow, oh):
    """A function turning an NV12 frame (a (h*3/2, w) uint8 CUDA tensor)
    into a (1, 3, oh, ow) float32 tensor, as a torch user writes it."""
    import torch.nn.functional as F

    nw, nh, left, top = letterbox_geometry(w, h, ow, oh)

    def run(nv12):
        y = nv12[:h].float()
        uv = nv12[h:h + h // 2].view(h // 2, w // 2, 2).float()
        uv = uv.repeat_interleave(2, 0).repeat_interleave(2, 1)
        c = (y - 16.0) * 1.164
        u = uv[..., 0] - 128.0
        v = uv[..., 1] - 128.0
        rgb = torch.stack((c + 1.596 * v, c - 0.392 * u - 0.813 * v,
                           c + 2.017 * u)).clamp_(0, 255)
        small = F.interpolate(rgb[None], size=(nh, nw), mode="bilinear",
                              align_corners=False, antialias=False)
        out = torch.full((1, 3, oh, ow), 114.0, device=nv12.device)
        out[:, :, top:top + nh, left:left + nw] = small
        return out.div_(255.0)

    return run


def stream(nvc, torch, path, mode, size, sync, res, gpu):
    """One stream: its own demuxer and decoder, warmed up (the decoder made
    and WARM packets through it, not counted), then at the barriers
    (sync: warm, go, and a list the main thread puts the deadline in once
    every stream is warm), flat out until the deadline."""
    warm, go, until = sync
    s = torch.cuda.Stream() if mode == "letterbox" else None
    lb = None

    def frame(f):
        nonlocal lb
        if mode == "letterbox":
            with torch.cuda.stream(s):
                nv12 = torch.from_dlpack(f)
                if lb is None:
                    h = nv12.shape[0] * 2 // 3
                    lb = make_letterbox(torch, nv12.shape[1], h, size, size)
                lb(nv12)
            s.synchronize()

    dec = None
    try:
        dmx = nvc.CreateDemuxer(filename=path)
        dec = nvc.CreateDecoder(gpuid=gpu, codec=dmx.GetNvCodecId(),
                                usedevicememory=True)
        for k, packet in enumerate(dmx):
            for f in dec.Decode(packet):
                frame(f)
            if k + 1 == WARM:
                break
    finally:
        warm.wait()
        go.wait()
    frames, lat = 0, []
    while dec is not None and time.perf_counter() < until[0]:
        dmx = nvc.CreateDemuxer(filename=path)
        for packet in dmx:
            t0 = time.perf_counter()
            for f in dec.Decode(packet):
                frame(f)
                lat.append(time.perf_counter() - t0)
                frames += 1
            if time.perf_counter() >= until[0]:
                break
    res.append((frames, lat))


def run(nvc, torch, path, mode, n, seconds, size, gpu):
    res = []
    warm, go, until = (threading.Barrier(n + 1), threading.Barrier(n + 1),
                       [0.0])
    th = [threading.Thread(target=stream,
                           args=(nvc, torch, path, mode, size,
                                 (warm, go, until), res, gpu))
          for _ in range(n)]
    for t in th:
        t.start()
    warm.wait()  # every stream's decoder made
    t0 = time.perf_counter()
    until[0] = t0 + seconds
    go.wait()
    for t in th:
        t.join()
    wall = time.perf_counter() - t0
    frames = sum(r[0] for r in res)
    lat = sorted(x for r in res for x in r[1])
    p = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3
         if lat else float("nan"))
    return frames / wall, p(0.5), p(0.99)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", action="append", required=True,
                    help="a stream (repeat for several)")
    ap.add_argument("--streams", default="1,8,32")
    ap.add_argument("--modes", default="decode,letterbox")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--gpu", type=int, default=0)
    a = ap.parse_args()
    try:
        import PyNvVideoCodec as nvc
        import torch
    except ImportError as e:
        print(f"peer_video: skipped: {e}")
        return SKIP
    if not torch.cuda.is_available():
        print("peer_video: skipped: no GPU")
        return SKIP
    print(f"PyNvVideoCodec {getattr(nvc, '__version__', '?')}, "
          f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    for path in a.file:
        for mode in a.modes.split(","):
            for n in (int(x) for x in a.streams.split(",")):
                fps, p50, p99 = run(nvc, torch, path, mode, n, a.seconds,
                                    a.size, a.gpu)
                print(f"peer_video {path.rsplit('/', 1)[-1]} {mode} "
                      f"streams {n}: {fps:,.1f} frames/s, per frame "
                      f"p50 {p50:.2f} ms p99 {p99:.2f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
