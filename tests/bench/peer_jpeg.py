#!/usr/bin/env python3
"""peer_jpeg: what users do today with JPEG frames, measured beside frameprep.

Each peer turns the same JPEG files (real photos scaled to --size and encoded
at --quality by OpenCV, written to --out-dir/jpeg/ so that frameprep-bench
--format jpeg --image-dir can be sent the very same bytes) into a letterboxed
float32 NCHW tensor in CUDA memory (Ultralytics convention: pad 114, BGR->RGB,
/255):

  opencv       cv2.imdecode + cv2.resize + copyMakeBorder on --threads CPU
               threads, then torch .cuda() of the tensor
  opencv_cpu   the same without .cuda(): the tensor stays a numpy array in
               host memory (what frameprep's CPU backend is compared with:
               its tensor goes to host memory too); needs no torch
  torchvision  torchvision.io.decode_jpeg(device="cuda") on a batch, then
               F.interpolate (bilinear, half-pixel centres as OpenCV) + pad
  nvimgcodec   nvImageCodec's decoder (hardware JPEG engine where the GPU has
               one, else its CUDA decoder) on a batch, then the same torch ops
  nvimgcodec_cuda  the same on nvImageCodec's CUDA decoder (nvJPEG's hybrid
               one: Huffman on the CPU, the rest on the SMs) even where
               there is an engine
  frameprep    with --frameprep URL: the daemon there, through the frameprep
               package (Client.preprocess(jpeg, format="jpeg", out=a CUDA
               tensor of this process): the tensor lands in CUDA memory as
               the peers' do), one image at a time and with each of
               --frameprep-threads threads, a Client and a tensor each

For each peer it prints frames/s over --iters frames (batched peers at each
--batches size) and the p50 of one image alone (batch 1, one thread), and the
decode's difference from cv2.imdecode (max and mean, in levels), because a
decoder's chroma upsampling differs (libjpeg's "fancy" upsampling vs others).
A peer whose module is missing is reported as such; no torch or no GPU: the
GPU peers are skipped (exit 77 when nothing ran). --json appends one line per
measurement.
"""
import argparse
import concurrent.futures
import json
import os
import sys
import time

SKIP = 77
DEFAULT_PHOTOS = ("astronaut.png,chelsea.png,coffee.png,motorcycle_left.png,"
                  "rocket.jpg,hubble_deep_field.jpg,ihc.png,"
                  "retina.jpg")


def letterbox_geometry(w, h, ow, oh):
    """As peer_common.letterbox_geometry (Ultralytics LetterBox)."""
    r = min(ow / w, oh / h)
    nw, nh = round(w * r), round(h * r)
    nw, nh = max(1, min(ow, nw)), max(1, min(oh, nh))
    top, left = round((oh - nh) / 2 - 0.1), round((ow - nw) / 2 - 0.1)
    return nw, nh, left, top


def make_jpegs(args):
    """Encode the photos as JPEG files of --size and --quality; return
    their bytes."""
    import cv2

    sw, sh = args.size
    out = os.path.join(args.out_dir, "jpeg")
    os.makedirs(out, exist_ok=True)
    blobs = []
    for name in args.photos.split(","):
        path = os.path.join(args.image_dir, name)
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            continue
        img = cv2.resize(img, (sw, sh), interpolation=cv2.INTER_LINEAR)
        ok, buf = cv2.imencode(".jpg", img,
                               [cv2.IMWRITE_JPEG_QUALITY, args.quality])
        if not ok:
            continue
        stem = os.path.splitext(name)[0]
        with open(os.path.join(out, f"{stem}.jpg"), "wb") as f:
            f.write(buf.tobytes())
        blobs.append(buf.tobytes())
    if not blobs:
        sys.exit(f"no photo of --photos found in {args.image_dir}")
    return blobs


def record(args, peer, what, frames_per_s=None, p50_ms=None, extra=None):
    line = f"{peer:12s} {what:18s}"
    if frames_per_s is not None:
        line += f" {frames_per_s:9.1f} frames/s"
    if p50_ms is not None:
        line += f"  p50 {p50_ms:7.3f} ms"
    if extra:
        line += f"  {extra}"
    print(line, flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({"peer": peer, "what": what,
                                "frames_per_s": frames_per_s,
                                "p50_ms": p50_ms, "extra": extra}) + "\n")


def torch_letterbox(torch, F, hwc_rgb_list, dw, dh):
    """Letterbox a list of HWC uint8 RGB CUDA tensors of one size into one
    (N, 3, dh, dw) float32 tensor."""
    x = torch.stack(hwc_rgb_list).permute(0, 3, 1, 2).float()
    n, _, h, w = x.shape
    nw, nh, left, top = letterbox_geometry(w, h, dw, dh)
    out = torch.full((n, 3, dh, dw), 114.0 / 255.0, device=x.device)
    y = F.interpolate(x, size=(nh, nw), mode="bilinear",
                      align_corners=False, antialias=False)
    out[:, :, top:top + nh, left:left + nw] = y.mul_(1.0 / 255.0)
    return out


def decode_diff(np, ref_bgr_list, rgb_list):
    """Max and mean |difference| in levels of decoded RGB images against
    cv2.imdecode's BGR."""
    mx, total, count = 0, 0.0, 0
    for ref, got in zip(ref_bgr_list, rgb_list):
        d = np.abs(ref[:, :, ::-1].astype(np.int16) - got.astype(np.int16))
        mx = max(mx, int(d.max()))
        total += float(d.sum())
        count += d.size
    return mx, total / count


def time_batches(torch, args, peer, run_batch, blobs):
    """frames/s of run_batch over --iters frames at each batch size."""
    for b in args.batches:
        batch = [blobs[i % len(blobs)] for i in range(b)]
        for _ in range(3):
            run_batch(batch)
        torch.cuda.synchronize()
        n = max(1, args.iters // b)
        t0 = time.perf_counter()
        for _ in range(n):
            run_batch(batch)
        torch.cuda.synchronize()
        record(args, peer, f"batch {b}", frames_per_s=n * b /
               (time.perf_counter() - t0))


def p50_one(torch, np, run_batch, blobs, iters):
    lat = []
    for i in range(iters):
        t0 = time.perf_counter()
        run_batch([blobs[i % len(blobs)]])
        torch.cuda.synchronize()
        lat.append(time.perf_counter() - t0)
    return float(np.percentile(np.asarray(lat[3:]) * 1e3, 50))


def opencv_one(np, dw, dh):
    """One JPEG's tensor as OpenCV users make it: imdecode, letterbox,
    BGR->RGB, /255, (1, 3, H, W) float32 numpy."""
    import cv2

    def one(blob):
        img = cv2.imdecode(np.frombuffer(blob, np.uint8), cv2.IMREAD_COLOR)
        h, w = img.shape[:2]
        nw, nh, left, top = letterbox_geometry(w, h, dw, dh)
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
        img = cv2.copyMakeBorder(img, top, dh - nh - top, left,
                                 dw - nw - left, cv2.BORDER_CONSTANT,
                                 value=(114, 114, 114))
        t = np.ascontiguousarray(img[:, :, ::-1].transpose(2, 0, 1),
                                 dtype=np.float32) / 255.0
        return t[None]
    return one


def peer_opencv_cpu(args, np, blobs):
    """OpenCV on --threads CPU threads, the tensor left in host memory."""
    import cv2

    cv2.setNumThreads(1)
    one = opencv_one(np, *args.dst)
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(one, blobs))
        t0 = time.perf_counter()
        futs = [pool.submit(one, blobs[i % len(blobs)])
                for i in range(args.iters)]
        for f in futs:
            f.result()
        fps = args.iters / (time.perf_counter() - t0)
    record(args, "opencv_cpu", f"{args.threads} threads", frames_per_s=fps)
    lat = []
    for i in range(50):
        t0 = time.perf_counter()
        one(blobs[i % len(blobs)])
        lat.append(time.perf_counter() - t0)
    record(args, "opencv_cpu", "one image",
           p50_ms=float(np.percentile(np.asarray(lat[3:]) * 1e3, 50)),
           extra="exact decode, tensor in host memory")


def peer_opencv(args, torch, np, blobs):
    import cv2

    cv2.setNumThreads(1)
    tensor = opencv_one(np, *args.dst)

    def one(blob):
        return torch.from_numpy(tensor(blob)).cuda()

    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(one, blobs))
        t0 = time.perf_counter()
        n = 0
        futs = [pool.submit(one, blobs[i % len(blobs)])
                for i in range(args.iters)]
        for f in futs:
            f.result()
            n += 1
        torch.cuda.synchronize()
        fps = n / (time.perf_counter() - t0)
    record(args, "opencv", f"{args.threads} threads", frames_per_s=fps)
    p50 = p50_one(torch, np, lambda b: one(b[0]), blobs, 50)
    record(args, "opencv", "one image", p50_ms=p50, extra="exact decode")


def peer_torchvision(args, torch, F, np, blobs, refs):
    try:
        import torchvision
        from torchvision.io import decode_jpeg
    except ImportError as e:
        record(args, "torchvision", "missing", extra=str(e))
        return
    dw, dh = args.dst
    datas = [torch.frombuffer(bytearray(b), dtype=torch.uint8)
             for b in blobs]
    index = {id(b): i for i, b in enumerate(blobs)}

    def run(batch):
        imgs = decode_jpeg([datas[index[id(b)]] for b in batch],
                           device="cuda")
        return torch_letterbox(torch, F, [i.permute(1, 2, 0) for i in imgs],
                               dw, dh)

    imgs = decode_jpeg(datas, device="cuda")
    mx, mean = decode_diff(np, refs, [i.permute(1, 2, 0).cpu().numpy()
                                      for i in imgs])
    time_batches(torch, args, "torchvision", run, blobs)
    record(args, "torchvision", "one image",
           p50_ms=p50_one(torch, np, run, blobs, 50),
           extra=f"decode vs cv2 max {mx} mean {mean:.3f} "
                 f"(torchvision {torchvision.__version__})")


def peer_nvimgcodec(args, torch, F, np, blobs, refs, cuda_only=False):
    """nvImageCodec on its hardware backend (else its CUDA decoder); with
    cuda_only (peer nvimgcodec_cuda) on its CUDA decoder wherever there is
    an engine, to compare the two decoders' one-image time and rate. That
    decoder is nvJPEG's hybrid one (backend kind HYBRID_CPU_GPU: Huffman
    decoding on the CPU, the rest on the SMs); nvImageCodec has no JPEG
    decoder of kind GPU_ONLY ("Could not create decoder")."""
    name = "nvimgcodec_cuda" if cuda_only else "nvimgcodec"
    try:
        from nvidia import nvimgcodec
    except ImportError as e:
        record(args, name, "missing", extra=str(e))
        return
    dw, dh = args.dst
    kind = "hardware"
    try:
        if cuda_only:
            raise RuntimeError("the CUDA decoder asked for")
        dec = nvimgcodec.Decoder(backends=[nvimgcodec.Backend(
            nvimgcodec.BackendKind.HW_GPU_ONLY)])
        if any(i is None for i in dec.decode(blobs[:1])):
            raise RuntimeError("hardware backend decoded nothing")
    except Exception:  # no hardware JPEG engine: the CUDA decoder
        kind = "hybrid CPU+GPU"
        dec = nvimgcodec.Decoder(backends=[nvimgcodec.Backend(
            nvimgcodec.BackendKind.HYBRID_CPU_GPU)])

    def run(batch):
        imgs = dec.decode(batch)
        return torch_letterbox(torch, F,
                               [torch.as_tensor(i, device="cuda")
                                for i in imgs], dw, dh)

    imgs = dec.decode(blobs)
    mx, mean = decode_diff(np, refs, [torch.as_tensor(i, device="cuda")
                                      .cpu().numpy() for i in imgs])
    time_batches(torch, args, name, run, blobs)
    record(args, name, "one image",
           p50_ms=p50_one(torch, np, run, blobs, 50),
           extra=f"{kind} backend; decode vs cv2 max {mx} mean {mean:.3f}")


def peer_frameprep(args, torch, np, blobs):
    """frameprepd at --frameprep through the Python package, the tensor
    written into this process's CUDA memory (a CUDA region)."""
    import threading
    try:
        import frameprep
    except ImportError as e:
        record(args, "frameprep", "missing", extra=str(e))
        return
    dw, dh = args.dst
    per_conn = 16  # frameprepd's max-inflight-per-conn default

    c = frameprep.Client(args.frameprep)
    out = torch.empty((1, 3, dh, dw), dtype=torch.float32, device="cuda")
    c.register_cuda(out)  # the first open (~0.2 s), not timed
    for b in blobs:
        c.preprocess(b, size=(dw, dh), format="jpeg", out=out)
    lat = []
    for i in range(200):
        t0 = time.perf_counter()
        c.preprocess(blobs[i % len(blobs)], size=(dw, dh), format="jpeg",
                     out=out)
        lat.append(time.perf_counter() - t0)
    record(args, "frameprep", "one image",
           p50_ms=float(np.percentile(np.asarray(lat[10:]) * 1e3, 50)),
           extra=f"tensor into CUDA memory, {args.frameprep}")
    c.release_cuda()
    c.close()
    for n in args.frameprep_threads:
        # A Client per 16 threads (the daemon's in-flight bound a
        # connection), one allocation of n tensors: few CUDA regions.
        big = torch.empty((n, 3, dh, dw), dtype=torch.float32,
                          device="cuda")
        clients = [frameprep.Client(args.frameprep)
                   for _ in range((n + per_conn - 1) // per_conn)]
        for ck in clients:
            ck.register_cuda(big)
        counts = [0] * n
        stop = threading.Event()

        def work(k):
            ck, ok = clients[k // per_conn], big[k:k + 1]
            i = k
            while not stop.is_set():
                ck.preprocess(blobs[i % len(blobs)], size=(dw, dh),
                              format="jpeg", out=ok)
                counts[k] += 1
                i += 1

        ts = [threading.Thread(target=work, args=(k,)) for k in range(n)]
        for t in ts:
            t.start()
        time.sleep(1.0)  # warm-up
        c0, t0 = sum(counts), time.perf_counter()
        time.sleep(args.frameprep_seconds)
        c1, t1 = sum(counts), time.perf_counter()
        stop.set()
        for t in ts:
            t.join()
        for ck in clients:
            ck.release_cuda()
            ck.close()
        record(args, "frameprep", f"{n} threads",
               frames_per_s=(c1 - c0) / (t1 - t0),
               extra="tensor into CUDA memory")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image-dir", required=True,
                    help="folder of real photos (the test images)")
    ap.add_argument("--photos", default=DEFAULT_PHOTOS,
                    help="comma-separated names in --image-dir")
    ap.add_argument("--size", default="1920x1080",
                    help="source frame size WxH (default %(default)s)")
    ap.add_argument("--dst", default="640x640",
                    help="tensor size WxH (default %(default)s)")
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--threads", type=int, default=16,
                    help="OpenCV peer's threads (default %(default)s)")
    ap.add_argument("--batches", default="1,8,32,64",
                    help="batch sizes of the GPU decoders")
    ap.add_argument("--iters", type=int, default=512,
                    help="frames per rate measurement")
    ap.add_argument("--peers", default="opencv,torchvision,nvimgcodec",
                    help="of opencv, opencv_cpu, torchvision, nvimgcodec, "
                    "nvimgcodec_cuda "
                    "(frameprep: with --frameprep)")
    ap.add_argument("--frameprep",
                    help="frameprepd URL: also measure it (peer frameprep)")
    ap.add_argument("--frameprep-threads", default="16,64",
                    help="peer frameprep's thread counts (a Client each)")
    ap.add_argument("--frameprep-seconds", type=float, default=3.0)
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.size = tuple(int(v) for v in args.size.split("x"))
    args.dst = tuple(int(v) for v in args.dst.split("x"))
    args.batches = [int(v) for v in args.batches.split(",")]
    args.frameprep_threads = [int(v) for v in
                              args.frameprep_threads.split(",")]
    peers = args.peers.split(",")
    if args.frameprep and "frameprep" not in peers:
        peers.append("frameprep")
    gpu_peers = [p for p in peers if p != "opencv_cpu"]
    try:
        import numpy as np
        import cv2
    except ImportError as e:
        print(f"SKIP: peer_jpeg needs numpy and OpenCV ({e})")
        return SKIP
    torch = F = None
    if gpu_peers:
        try:
            import torch
            import torch.nn.functional as F
        except ImportError as e:
            print(f"GPU peers skipped: no PyTorch ({e})")
            torch = None
        if torch is not None and not torch.cuda.is_available():
            print("GPU peers skipped: no CUDA GPU visible")
            torch = None
        if torch is None:
            gpu_peers = []
            if "opencv_cpu" not in peers:
                return SKIP

    blobs = make_jpegs(args)
    refs = [cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)
            for b in blobs]
    mean_kb = sum(len(b) for b in blobs) / len(blobs) / 1024
    print(f"{len(blobs)} photos, {args.size[0]}x{args.size[1]} q{args.quality}"
          f" (mean {mean_kb:.0f} KiB) -> {args.dst[0]}x{args.dst[1]} f32 "
          f"NCHW in CUDA memory (opencv_cpu: host memory); files in "
          f"{os.path.join(args.out_dir, 'jpeg')}", flush=True)
    if "opencv_cpu" in peers:
        peer_opencv_cpu(args, np, blobs)
    if "opencv" in gpu_peers:
        peer_opencv(args, torch, np, blobs)
    if "torchvision" in gpu_peers:
        peer_torchvision(args, torch, F, np, blobs, refs)
    if "nvimgcodec" in gpu_peers:
        peer_nvimgcodec(args, torch, F, np, blobs, refs)
    if "nvimgcodec_cuda" in gpu_peers:
        peer_nvimgcodec(args, torch, F, np, blobs, refs, cuda_only=True)
    if "frameprep" in gpu_peers and args.frameprep:
        try:
            peer_frameprep(args, torch, np, blobs)
        except Exception as e:  # no cuda-python, no daemon: say so
            record(args, "frameprep", "failed", extra=repr(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
