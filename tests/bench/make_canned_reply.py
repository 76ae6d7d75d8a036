#!/usr/bin/env python3
"""Write one frameprep reply message (protocol v1) to a file.

The fake-server test serves it with
    nngcat --rep0 --listen URL --file canned.bin --raw
so every request gets this same reply: its request id (2^63 + 1 unless given)
matches no request a client sends, and its shape (1, 3, 2, 2) matches no
real frame. frameprep-bench must count such replies as wrong and exit 1.
"""
import argparse
import struct

MAGIC = 0x50525046  # "FPRP"
HEADER_SIZE = 256


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="file to write")
    ap.add_argument("--request-id", type=int, default=(1 << 63) + 1)
    ap.add_argument("--status", type=int, default=0,
                    help="enum fprep_err of the reply (default 0 = OK)")
    args = ap.parse_args()

    shape = (1, 3, 2, 2)
    tensor = bytes(4 * 3 * 2 * 2)  # float32 zeros
    head = struct.pack(
        "<IHHQIBBBB4I4f6IQQII",
        MAGIC, 1, 1, args.request_id, args.status,
        1, 1, 4, 0,  # dtype f32, layout NCHW, ndim 4, inline
        *shape,
        1.0, 1.0, 0.0, 0.0,  # scale_x, scale_y, pad_x, pad_y
        0, 0, 0, 0, 0, 0,  # timings
        len(tensor), len(tensor),  # payload_size, tensor_size
        0, 0)  # region_id, flags
    assert len(head) == 104, len(head)
    message = b"canned reply of the fake-server test"
    head += message + bytes(HEADER_SIZE - len(head) - len(message))
    assert len(head) == HEADER_SIZE
    with open(args.out, "wb") as f:
        f.write(head + tensor)


if __name__ == "__main__":
    main()
