"""Shared parts of the preprocessing peers that frameprep is compared with.

Each peer preprocesses the same frames the way users do today, prints
frames/s, p50 and p99 for each case and writes its output tensor as .npy so
check_peers.py can compare it with frameprep's. The frames are real photos
resized *up* to the case's source size (not zeros, not noise), written next
to the tensors as PNG so that frameprep can be sent the very same pixels.

Cases: 1920x1080 BGR8 -> 640x640 and 3840x2160 BGR8 -> 1280x1280, letterbox
(Ultralytics convention: pad 114, BGR->RGB, /255, NCHW float32).
"""
import argparse
import json
import os
import sys
import time

DEFAULT_CASES = "1920x1080:640x640,3840x2160:1280x1280"
SKIP = 77  # ctest's SKIP_RETURN_CODE


def parse_cases(text):
    cases = []
    for item in text.split(","):
        src, dst = item.split(":")
        sw, sh = (int(v) for v in src.split("x"))
        dw, dh = (int(v) for v in dst.split("x"))
        cases.append((sw, sh, dw, dh))
    return cases


def arg_parser(description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--image", required=True,
                    help="a real photo, resized up to each source size")
    ap.add_argument("--cases", default=DEFAULT_CASES,
                    help="SRCWxH:DSTWxH,... (default %(default)s)")
    ap.add_argument("--iters", type=int, default=200,
                    help="measured frames per case (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=10,
                    help="unmeasured frames per case (default %(default)s)")
    ap.add_argument("--out-dir", default=".",
                    help="where frame_*.png and <peer>_*.npy go")
    ap.add_argument("--json", help="append one JSON line per case here")
    return ap


def make_frame(path, w, h):
    """The photo at path as a BGR8 frame of w x h (bilinear resize)."""
    import cv2

    img = cv2.imread(path, cv2.IMREAD_COLOR)
    if img is None:
        sys.exit(f"cannot read {path}")
    return cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)


def letterbox_geometry(w, h, ow, oh):
    """(new_w, new_h, left, top, right, bottom) of the Ultralytics
    LetterBox; Python's round() is round-half-even, as the protocol says."""
    r = min(ow / w, oh / h)
    nw, nh = round(w * r), round(h * r)
    nw, nh = max(1, min(ow, nw)), max(1, min(oh, nh))
    dw, dh = (ow - nw) / 2, (oh - nh) / 2
    top, left = round(dh - 0.1), round(dw - 0.1)
    return nw, nh, left, top, ow - nw - left, oh - nh - top


def save_inputs(out_dir, frame, sw, sh):
    """Write the frame as PNG once, for check_peers.py / frameprep."""
    import cv2

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"frame_{sw}x{sh}.png")
    if not os.path.exists(path):
        cv2.imwrite(path, frame)
    return path


def tensor_path(out_dir, peer, sw, sh, dw, dh):
    return os.path.join(out_dir, f"{peer}_{sw}x{sh}_{dw}x{dh}.npy")


def report(peer, args, case, latencies, total_s, extra=""):
    """Print and optionally record frames/s, p50 and p99 of one case."""
    import numpy as np

    sw, sh, dw, dh = case
    lat = np.asarray(latencies) * 1e3
    fps = len(latencies) / total_s if total_s > 0 else 0.0
    p50, p99 = np.percentile(lat, 50), np.percentile(lat, 99)
    print(f"{peer} {sw}x{sh} -> {dw}x{dh}: {fps:.1f} frames/s, "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms ({len(latencies)} frames"
          f"{extra})", flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({
                "peer": peer, "src": f"{sw}x{sh}", "dst": f"{dw}x{dh}",
                "frames": len(latencies), "frames_per_s": fps,
                "p50_ms": p50, "p99_ms": p99}) + "\n")


def run_sync(peer, args, prepare, process):
    """Time process(frame) -> numpy tensor one frame at a time, per case:
    prepare(case) is called once (allocations), then warmup + iters calls.
    The last output is saved as .npy."""
    import numpy as np

    for case in parse_cases(args.cases):
        sw, sh, dw, dh = case
        frame = make_frame(args.image, sw, sh)
        save_inputs(args.out_dir, frame, sw, sh)
        state = prepare(case)
        out = None
        for _ in range(args.warmup):
            out = process(state, frame)
        lat = []
        t_start = time.perf_counter()
        for _ in range(args.iters):
            t0 = time.perf_counter()
            out = process(state, frame)
            lat.append(time.perf_counter() - t0)
        total = time.perf_counter() - t_start
        np.save(tensor_path(args.out_dir, peer, *case), out)
        report(peer, args, case, lat, total)
