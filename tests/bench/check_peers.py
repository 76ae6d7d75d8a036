#!/usr/bin/env python3
"""check_peers: compare the peers' tensors with frameprep's.

For each case, frameprep's tensor comes from the CLI
    frameprep send frame_SWxSH.png --size DWxDH -o frameprep_....npy
(run here when --frameprep is given; else the file must already be in --dir),
sent the very frame the peers used. Every peer tensor found in --dir is then
compared with it: shape, and the largest absolute difference, printed in f32
units and in 8-bit levels (LSB, x255).

Tolerances (float32 tensors, pixel/255):
  peer_opencv_cpu            1 LSB (1/255 + 1e-6): frameprep's letterbox is
                             specified to be within 1 level of cv2.resize +
                             cv2.copyMakeBorder, which round to uint8.
  peer_torch_naive, _tuned   2 LSB (2/255 + 1e-6): torch interpolates in
                             float and does not round to uint8 (up to 0.5
                             level from OpenCV's rounded result) and
                             OpenCV's 11-bit fixed-point weights add up to
                             about one more; frameprep sits within 1 level
                             of OpenCV, so 2 levels bound the sum.
Exit 1 when any comparison exceeds its tolerance or shapes differ, 0
otherwise (77 when there is nothing to compare).
"""
import argparse
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402

TOL_LSB = {"peer_opencv_cpu": 1.0, "peer_torch_naive": 2.0,
           "peer_torch_tuned": 2.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True,
                    help="the peers' --out-dir (frames and tensors)")
    ap.add_argument("--cases", default=peer_common.DEFAULT_CASES)
    ap.add_argument("--frameprep", help="the frameprep CLI, to run send")
    ap.add_argument("--socket", help="daemon URL for the CLI")
    args = ap.parse_args()
    import numpy as np

    bad = compared = 0
    for sw, sh, dw, dh in peer_common.parse_cases(args.cases):
        frame = os.path.join(args.dir, f"frame_{sw}x{sh}.png")
        fp = peer_common.tensor_path(args.dir, "frameprep", sw, sh, dw, dh)
        if args.frameprep:
            if not os.path.exists(frame):
                print(f"{frame}: missing (run a peer first)")
                return 1
            cmd = [args.frameprep, "send", frame, "--size", f"{dw}x{dh}",
                   "-o", fp]
            if args.socket:
                cmd += ["--socket", args.socket]
            r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
            if r.returncode != 0:
                print(f"{' '.join(cmd)}: exit {r.returncode}")
                return 1
        if not os.path.exists(fp):
            print(f"{fp}: missing (give --frameprep)")
            return 1
        ref = np.load(fp)
        pattern = f"peer_*_{sw}x{sh}_{dw}x{dh}.npy"
        for path in sorted(glob.glob(os.path.join(args.dir, pattern))):
            peer = os.path.basename(path)[:-len(f"_{sw}x{sh}_{dw}x{dh}.npy")]
            got = np.load(path)
            tol = TOL_LSB.get(peer, 1.0)
            compared += 1
            if got.shape != ref.shape:
                print(f"{peer} {sw}x{sh}->{dw}x{dh}: shape {got.shape}, "
                      f"frameprep {ref.shape}: FAIL")
                bad += 1
                continue
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            worst = float(diff.max())
            lsb = worst * 255.0
            share = float((diff * 255.0 > 0.5).mean()) * 100.0
            ok = worst <= tol / 255.0 + 1e-6
            bad += not ok
            print(f"{peer} vs frameprep {sw}x{sh}->{dw}x{dh}: max abs diff "
                  f"{worst:.6g} ({lsb:.3f} LSB, tolerance {tol:g} LSB), "
                  f"{share:.3f}% of elements differ by > 0.5 LSB: "
                  f"{'ok' if ok else 'FAIL'}")
    if compared == 0:
        print("nothing to compare: no peer tensors in", args.dir)
        return 77
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
