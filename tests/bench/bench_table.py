#!/usr/bin/env python3
"""bench_table: print frameprep-bench --json results as Markdown tables.

    bench_table.py RESULT.json [--server]

Prints one row per run (point of a sweep): load, frames/s, input and output
GB/s, p50/p90/p99/p99.9/max latency in ms, the ECHO ceiling and the ratio
achieved/ceiling; with --server also the server's time breakdown (means, us)
and the transport share. This is how the tables of BENCHMARKS.md are made.
"""
import argparse
import json


def load(run):
    if run["mode"] == "open":
        return f"{run['rate']:g}/s (pool {run['concurrency']})"
    return str(run["concurrency"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("--server", action="store_true",
                    help="also the server time breakdown")
    args = ap.parse_args()
    with open(args.json) as f:
        d = json.load(f)
    print(f"<!-- {d['backend']} {d['device']}: {d['input']}; "
          f"{d['request']} -->")
    print("| load | frames/s | in GB/s | out GB/s | p50 ms | p90 ms | "
          "p99 ms | p99.9 ms | max ms | ECHO ceiling frames/s | "
          "achieved / ceiling |")
    print("| --- " * 11 + "|")
    for r in d["runs"]:
        lat = r["latency_us"]
        ceil = (f"{r['ceiling_fps']:.1f} | {100 * r['ceiling_ratio']:.1f} %"
                if r["ceiling_fps"] > 0 else "- | -")
        print(f"| {load(r)} | {r['frames_per_s']:.1f} | {r['in_gbps']:.3f} "
              f"| {r['out_gbps']:.3f} | "
              + " | ".join(f"{lat[k] / 1000:.2f}"
                           for k in ("p50", "p90", "p99", "p99.9", "max"))
              + f" | {ceil} |")
    if args.server:
        keys = ("queue", "compute", "h2d", "kernel", "d2h", "total",
                "transport")
        print()
        print("| load | " + " | ".join(keys) + " |")
        print("| --- " * (len(keys) + 1) + "|")
        for r in d["runs"]:
            print(f"| {load(r)} | "
                  + " | ".join(f"{r['server_us'][k]:.0f}" for k in keys)
                  + " |")


if __name__ == "__main__":
    main()
