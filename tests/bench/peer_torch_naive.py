#!/usr/bin/env python3
"""peer_torch_naive: letterbox on the GPU with PyTorch, the obvious way.

numpy frame -> torch.from_numpy -> .cuda() (pageable memory, synchronous)
-> float NCHW -> F.interpolate(bilinear, align_corners=False,
antialias=False) -> F.pad(114) -> BGR->RGB -> /255 -> .cpu(), one frame at a
time on the default stream. Skips (exit 77) without torch or a GPU.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common  # noqa: E402


def main():
    args = peer_common.arg_parser(__doc__.splitlines()[0]).parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"SKIP: peer_torch_naive needs PyTorch ({e})")
        return peer_common.SKIP
    if not torch.cuda.is_available():
        print("SKIP: peer_torch_naive needs a CUDA GPU (none visible)")
        return peer_common.SKIP

    def prepare(case):
        sw, sh, dw, dh = case
        return peer_common.letterbox_geometry(sw, sh, dw, dh)

    def process(geom, frame):
        nw, nh, left, top, right, bottom = geom
        x = torch.from_numpy(frame).cuda()
        x = x.permute(2, 0, 1)[None].float()
        x = F.interpolate(x, size=(nh, nw), mode="bilinear",
                          align_corners=False, antialias=False)
        x = F.pad(x, (left, right, top, bottom), value=114.0)
        x = x[:, [2, 1, 0]] / 255.0
        return x.cpu().numpy()

    peer_common.run_sync("peer_torch_naive", args, prepare, process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
