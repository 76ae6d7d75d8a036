#!/usr/bin/env python3
"""bench_plot: render frameprep-bench --json results as plots (gnuplot).

    bench_plot.py OUT_DIR RESULT.json [RESULT.json ...] [--format png,svg]
                  [--label NAME ...] [--title TEXT]

Writes, for the files together,
  OUT_DIR/throughput.{png,svg}   frames/s against concurrency (closed-loop
                                 sweeps), one line per file, and its ECHO
                                 transport ceiling dashed where measured;
and for each file NAME (its --label, else the file name without .json)
  OUT_DIR/NAME-latency.{png,svg} p50, p90, p99 and p99.9 latency (ms, log
                                 scale) against concurrency, or against the
                                 offered rate for an open-loop run.
One command renders a whole set, e.g. the GPU machine's JSON files from
tests/gpu/run-on-gpu.sh (gpu-logs.tgz). Needs gnuplot (Debian gnuplot-nox).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

PERCENTILES = ("p50", "p90", "p99", "p99.9")
TERMINALS = {"png": "pngcairo size 900,560 noenhanced font ',11'",
             "svg": "svg size 900,560 dynamic noenhanced font ',11'"}


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def write_data(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(" ".join(f"{v:.6g}" for v in row) + "\n")


def closed_runs(d):
    return sorted((r for r in d["runs"] if r["mode"] == "closed"),
                  key=lambda r: r["concurrency"])


def open_runs(d):
    return sorted((r for r in d["runs"] if r["mode"] == "open"),
                  key=lambda r: r["rate"])


def describe(d):
    """A short subtitle: the device and the request."""
    req = re.sub(r", scale .*?(?=, \d+ bytes in|$)", "", d.get("request", ""))
    return f"{d.get('device', '?')} ({d.get('backend', '?')}): {req}"


def plot_throughput(sets, tmp, out_base, fmts, title):
    lines = []
    for i, (name, d) in enumerate(sets):
        runs = closed_runs(d)
        if not runs:
            continue
        data = os.path.join(tmp, f"tp{i}.dat")
        write_data(data, [(r["concurrency"], r["frames_per_s"],
                           r.get("ceiling_fps", 0)) for r in runs])
        lines.append(f"{quote(data)} using 1:2 with linespoints lw 2 "
                     f"pt 7 lc {i + 1} title {quote(name)}")
        if any(r.get("ceiling_fps", 0) > 0 for r in runs):
            lines.append(f"{quote(data)} using 1:($3 > 0 ? $3 : NaN) with "
                         f"lines dt 2 lc {i + 1} "
                         f"title {quote(name + ' ECHO ceiling')}")
    if not lines:
        return []
    return render(tmp, out_base, fmts, [
        f"set title {quote(title or 'Throughput against concurrency')}",
        "set xlabel 'concurrent streams (closed loop)'",
        "set ylabel 'frames/s'", "set logscale x 2", "set yrange [0:*]",
        "set key outside right top", "set grid",
        "plot " + ", ".join(lines)])


def plot_latency(name, d, tmp, out_base, fmts, title):
    runs, xlabel, logx = closed_runs(d), "concurrent streams (closed loop)", 2
    if not runs:
        runs, xlabel, logx = open_runs(d), "offered rate, frames/s (open " \
                                           "loop)", 10
    if not runs:
        return []
    data = os.path.join(tmp, f"lat-{len(os.listdir(tmp))}.dat")
    write_data(data, [(r["concurrency"] if r["mode"] == "closed"
                       else r["rate"],
                       *(r["latency_us"][p] / 1000 for p in PERCENTILES))
                      for r in runs])
    lines = [f"{quote(data)} using 1:{i + 2} with linespoints lw 2 pt 7 "
             f"title {quote(p)}" for i, p in enumerate(PERCENTILES)]
    return render(tmp, out_base, fmts, [
        f"set title {quote((title or name) + ': latency percentiles')}"
        f" . \"\\n\" . {quote(describe(d))}",
        f"set xlabel {quote(xlabel)}", "set ylabel 'latency, ms'",
        f"set logscale x {logx}", "set logscale y",
        "set key left top", "set grid", "plot " + ", ".join(lines)])


def render(tmp, out_base, fmts, body):
    outs = []
    script = []
    for fmt in fmts:
        out = f"{out_base}.{fmt}"
        script += [f"set terminal {TERMINALS[fmt]}",
                   f"set output {quote(out)}", *body, "unset output"]
        outs.append(out)
    path = os.path.join(tmp, "plot.gp")
    with open(path, "w") as f:
        f.write("\n".join(script) + "\n")
    r = subprocess.run(["gnuplot", path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit(f"bench_plot: gnuplot failed:\n{r.stdout.decode()}")
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("json", nargs="+")
    ap.add_argument("--format", default="png,svg",
                    help="comma list of png and svg (default both)")
    ap.add_argument("--label", action="append", default=[],
                    help="name of each file in the legends, in order")
    ap.add_argument("--title", help="title of the throughput plot")
    args = ap.parse_args()
    fmts = [f for f in args.format.split(",") if f]
    if not fmts or any(f not in TERMINALS for f in fmts):
        ap.error("--format takes png and/or svg")
    if shutil.which("gnuplot") is None:
        sys.exit("bench_plot: gnuplot is not installed (Debian gnuplot-nox)")
    sets = []
    for i, path in enumerate(args.json):
        with open(path) as f:
            d = json.load(f)
        if d.get("tool") != "frameprep-bench" or not d.get("runs"):
            sys.exit(f"bench_plot: {path}: not frameprep-bench --json "
                     f"output with runs")
        name = (args.label[i] if i < len(args.label)
                else os.path.basename(path).removesuffix(".json"))
        sets.append((name, d))
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        written += plot_throughput(sets, tmp,
                                   os.path.join(args.out_dir, "throughput"),
                                   fmts, args.title)
        for name, d in sets:
            safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
            written += plot_latency(name, d, tmp,
                                    os.path.join(args.out_dir,
                                                 f"{safe}-latency"),
                                    fmts, None)
    for w in written:
        print(w)
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
