"""python -m frameprep.bench: the Python client's cost per request against
the C client's (``frameprep-bench``) on the same daemon, in one run.

For each path (inline: ``Client.preprocess(frame)``, the simple call,
which stages the frame and the tensor through the client's shared-memory
area on ipc://, against ``frameprep-bench --shm none``, which does the
same; copy: ``ring.preprocess(frame)`` of the same numpy array, which the
ring copies into a free slot each time, its request through the ring's
doorbell where the daemon polls one (Python only: the C bench has no such
mode); shm: frame and tensor in a shared-memory ring, the request over
the socket; door: the same with the request through the ring's doorbell,
``frameprep-bench --doorbell``, which takes the socket out while the
daemon polls; bare: a Python loop around the door path's bare C request,
``CRing.bare()``, which makes no object (no frame, result or timings): the
floor under any binding's client CPU per frame, against the same C run as
door) and each concurrency (closed loop, one connection and one
thread per stream, as ``frameprep-bench`` does), it runs
``frameprep-bench`` and then the Python client with the same frame
(synthetic 1920x1080 BGR by default) and tensor (640x640 float32 NCHW
letterbox), and prints frames/s, p50 latency, the client-side cost
(mean latency minus the daemon's own t_total: what the client and the
transport add) and the client's CPU time per frame (Python: this
process's time over the frames it sent, its set-up before the first one
not counted; C: frameprep-bench's rusage over the frames it sent, less
its start-up, measured once per point by a run of one request).
The shm and door paths write the frame into the slot once and then send
the slot as it lies, as ``frameprep-bench --shm both`` does; they and
copy wait for the reply in the slot (``--shm-reply``) where the platform
has futex(2). When inline and copy both ran at c=1, it prints the simple
call's p50 over the ring's (bar: at most 1.2) and its rate over the
ring's (bar: at least 0.8), and for each shm and door point the Python
client's CPU per frame over the C client's (bar: at most 1.2), each PASS
or FAIL (``--check``: exit status 1 when one fails). With ``--repeat N``
each point is run N times, C and Python in turn, and each figure is the
median of its N runs ("added" the median of the N differences), which
steadies the figures on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from math import nan
from typing import Any

import numpy as np

from .client import Client


def _python_run(url: str, frame: np.ndarray[Any, Any], size: tuple[int, int],
                path: str, streams: int, duration: float,
                warmup: float) -> dict[str, float]:
    """Closed loop with the Python client; returns fps, p50, the mean
    client-side cost (latency - server total) and the client's CPU time
    per frame (this process's, all threads, over every frame sent,
    warm-up included), microseconds; sys, that CPU time's system part,
    and flt, minor page faults per frame."""
    lat: list[list[int]] = [[] for _ in range(streams)]
    sent = [0] * streams
    counted = [0] * streams
    cost: list[list[int]] = [[] for _ in range(streams)]
    start = threading.Barrier(streams + 1)
    state = {"measure": False, "stop": False}
    failures: list[str] = []

    def stream(i: int) -> None:
        try:
            with Client(url, timeout=30) as client:
                ring = None
                if path != "inline":
                    ring = client.ring(slots=1, frame=frame.shape, size=size,
                                       doorbell=path != "shm")
                    buf = ring.next_frame()
                    buf[:] = frame
                    ring.preprocess(buf).release()
                    del buf
                copy = path == "copy"
                start.wait()
                if ring is not None and path == "bare":
                    bare = ring._c.bare
                    while not state["stop"]:
                        sent[i] += 1
                        bare()
                        if state["measure"]:
                            counted[i] += 1
                # Latencies in integer ns, the loop's names bound once:
                # the loop's own cost counts in the client's CPU.
                clock = time.perf_counter_ns
                lat_i, cost_i = lat[i], cost[i]
                if ring is not None:
                    send, take = ring.preprocess, ring.next_frame
                    while not state["stop"]:
                        sent[i] += 1
                        t0 = clock()
                        rr = send(frame if copy else take())
                        ns = clock() - t0
                        total = rr.timings.total_us
                        rr.release()
                        if state["measure"]:
                            lat_i.append(ns)
                            cost_i.append(ns - total * 1000)
                while ring is None and not state["stop"]:
                    sent[i] += 1
                    t0 = clock()
                    r = client.preprocess(frame, size=size)
                    ns = clock() - t0
                    if state["measure"]:
                        lat_i.append(ns)
                        cost_i.append(ns - r.timings.total_us * 1000)
                    # Let go before the next call, as frameprep-bench's
                    # fprep_result_fini does: a result kept across the
                    # call holds a second stage of the client's.
                    del r
                if ring is not None:
                    ring.close()
        except Exception as exc:  # reported by the caller
            failures.append(repr(exc))
            if not start.broken:
                start.abort()

    threads = [threading.Thread(target=stream, args=(i,))
               for i in range(streams)]
    for t in threads:
        t.start()
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass
    cpu0 = time.process_time()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(warmup)
    state["measure"] = True
    t0 = time.perf_counter()
    time.sleep(duration)
    state["measure"] = False
    elapsed = time.perf_counter() - t0
    state["stop"] = True
    for t in threads:
        t.join()
    cpu = time.process_time() - cpu0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    if failures:
        raise RuntimeError("; ".join(failures))
    all_lat = np.concatenate([np.asarray(v, np.float64) for v in lat]) / 1e3
    all_cost = np.concatenate([np.asarray(v, np.float64)
                               for v in cost]) / 1e3
    timed = len(all_lat) > 0
    return {"fps": (len(all_lat) if timed else sum(counted)) / elapsed,
            "p50": float(np.percentile(all_lat, 50)) if timed else nan,
            "cost": float(all_cost.mean()) if timed else nan,
            "cpu": cpu / max(1, sum(sent)) * 1e6,
            "sys": (ru1.ru_stime - ru0.ru_stime) / max(1, sum(sent)) * 1e6,
            "flt": (ru1.ru_minflt - ru0.ru_minflt) / max(1, sum(sent))}


def _c_bench(bench: str, url: str, frame_wh: tuple[int, int],
            size: tuple[int, int], path: str, streams: int,
            load: list[str]) -> tuple[dict[str, Any], float, int]:
    """Runs frameprep-bench with load's options (a duration or a count);
    returns its run's JSON, its CPU seconds (the child's getrusage) and
    the frames it sent, warm-up included."""
    shm = path != "inline"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/bench.json"
        subprocess.run(
            [bench, "-u", url, "-c", str(streams), *load,
             "--synthetic", "%dx%d" % frame_wh,
             "-s", "%dx%d" % size, "--shm", "both" if shm else "none",
             *(["--shm-reply"] if shm else []),
             *(["--doorbell"] if path in ("door", "bare") else []),
             "--no-ceiling", "--verify", "none", "-q", "--json", out],
            check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            run = json.load(f)["runs"][0]
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    frames = int(run.get("sent", 0)) + int(run.get("warmup_sent", 0))
    return run, cpu, frames


def _c_fixed(bench: str, url: str, frame_wh: tuple[int, int],
             size: tuple[int, int], path: str,
             streams: int) -> tuple[float, int]:
    """frameprep-bench's CPU seconds for one request (its start-up: the
    frame made, the connections and regions opened) and the frames it
    sent, which _c_run takes off."""
    _, cpu, frames = _c_bench(bench, url, frame_wh, size, path, streams,
                              ["-n", "1", "-w", "0"])
    return cpu, frames


def _c_run(bench: str, url: str, frame_wh: tuple[int, int],
           size: tuple[int, int], path: str, streams: int, duration: float,
           warmup: float, fixed: tuple[float, int]) -> dict[str, float]:
    """The same load with frameprep-bench; its CPU time per frame is the
    child's (getrusage) over every frame it sent, warm-up included, less
    the start-up that fixed measured (a run of one request)."""
    run, cpu, frames = _c_bench(bench, url, frame_wh, size, path, streams,
                                ["-d", str(duration), "-w", str(warmup)])
    server = run["server_us"]
    return {"fps": run["frames_per_s"], "p50": run["latency_us"]["p50"],
            "cost": run["latency_us"]["mean"] - server["total"],
            "cpu": max(0.0, cpu - fixed[0]) /
            max(1, frames - fixed[1]) * 1e6}


def _py_run_figures(run: dict[str, float]) -> str:
    """A Python run's rate, client CPU and its system part per frame (us)
    and minor page faults per frame, as fps/cpu/sys/faults."""
    return (f"{run['fps']:.0f}/{run['cpu']:.0f}/{run['sys']:.0f}/"
            f"{run['flt']:.1f}")


def _ratio(a: float, b: float) -> str:
    """a / b as a 5-wide column, or '-' where b is 0 (a CPU cost that the
    fixed cost, measured apart, fully accounts for on a loaded machine)."""
    return f"{a / b:5.2f}" if b else f"{'-':>5}"


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over runs."""
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def main(argv: list[str] | None = None) -> int:
    """Runs the comparison and prints the table; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m frameprep.bench",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("-u", "--socket", default=None,
                   help="daemon URL [the daemon's default]")
    p.add_argument("--c-bench", default=shutil.which("frameprep-bench"),
                   help="frameprep-bench to compare with [from PATH]")
    p.add_argument("-c", "--concurrency", default="1,16",
                   help="comma-separated streams [1,16]")
    p.add_argument("--paths", default="inline,copy,shm",
                   help="comma-separated: inline, copy, shm, door, bare "
                        "[inline,copy,shm]")
    p.add_argument("-d", "--duration", type=float, default=5.0,
                   help="measured seconds per point [5]")
    p.add_argument("-w", "--warmup", type=float, default=1.0,
                   help="unmeasured seconds before each point [1]")
    p.add_argument("--frame", default="1920x1080",
                   help="synthetic BGR frame WxH [1920x1080]")
    p.add_argument("-s", "--size", default="640x640",
                   help="tensor WxH [640x640]")
    p.add_argument("-r", "--repeat", type=int, default=1,
                   help="runs per point, C and Python in turn; medians [1]")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a bar (printed at the end) fails")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    fw, fh = (int(v) for v in args.frame.lower().split("x"))
    sw, sh = (int(v) for v in args.size.lower().split("x"))
    size = (sw, sh)
    frame = np.random.default_rng(1).integers(0, 256, (fh, fw, 3), np.uint8)
    with Client(args.socket) as c:
        url = c.address
        info = c.info()
    print(f"frameprep.bench: {url}, backend {info.get('backend')}, device "
          f"{info.get('device')}; frame {fw}x{fh} bgr8 -> "
          f"{size[0]}x{size[1]} f32 nchw letterbox")
    print(f"{'path':7} {'c':>3} {'C fps':>8} {'Py fps':>8} {'Py/C':>6} "
          f"{'C p50':>8} {'Py p50':>8} {'C cost':>7} {'Py cost':>7} "
          f"{'added':>6} {'C cpu':>6} {'Py cpu':>6} {'Py/C':>5}   "
          f"(latencies, costs and client CPU per frame in us)")
    rows: list[dict[str, Any]] = []
    paths = args.paths.split(",")
    for path in paths:
        if path not in ("inline", "copy", "shm", "door", "bare"):
            p.error(f"--paths: {path} is not inline, copy, shm, door or "
                    f"bare")
    for path in paths:
        for streams in (int(v) for v in args.concurrency.split(",")):
            c_runs: list[dict[str, float]] = []
            py_runs: list[dict[str, float]] = []
            fixed = (_c_fixed(args.c_bench, url, (fw, fh), size, path,
                              streams)
                     if args.c_bench and path != "copy" else (0.0, 0))
            for _ in range(args.repeat):
                if args.c_bench and path != "copy":
                    c_runs.append(_c_run(args.c_bench, url, (fw, fh), size,
                                         path, streams, args.duration,
                                         args.warmup, fixed))
                py_runs.append(_python_run(url, frame, size, path, streams,
                                           args.duration, args.warmup))
            c_res = _median(c_runs) if c_runs else None
            py = _median(py_runs)
            added = (statistics.median(p["cost"] - c["cost"]
                                       for p, c in zip(py_runs, c_runs))
                     if c_runs else None)
            rows.append({"path": path, "c": streams, "C": c_res, "py": py,
                         "py_runs": py_runs})
            if c_res is None:
                print(f"{path:7} {streams:3} {'-':>8} {py['fps']:8.1f} "
                      f"{'-':>6} {'-':>8} {py['p50']:8.0f} {'-':>7} "
                      f"{py['cost']:7.0f} {'-':>6} {'-':>6} "
                      f"{py['cpu']:6.1f} {'-':>5}")
                continue
            print(f"{path:7} {streams:3} {c_res['fps']:8.1f} "
                  f"{py['fps']:8.1f} {py['fps'] / c_res['fps']:6.2f} "
                  f"{c_res['p50']:8.0f} {py['p50']:8.0f} "
                  f"{c_res['cost']:7.0f} {py['cost']:7.0f} "
                  f"{added:6.0f} {c_res['cpu']:6.1f} {py['cpu']:6.1f} "
                  f"{_ratio(py['cpu'], c_res['cpu'])}", flush=True)
            if args.repeat > 1:
                diffs = [p["p50"] - c["p50"] for p, c in zip(py_runs, c_runs)]
                print(f"        p50 Python - C per run: "
                      f"{' '.join(f'{d:.0f}' for d in diffs)} (median "
                      f"{statistics.median(diffs):.0f}); Python fps/cpu/"
                      f"sys/faults per run: "
                      f"{' '.join(_py_run_figures(r) for r in py_runs)}",
                      flush=True)
    verdicts = [_simple_vs_ring(rows), *_ring_cpu(rows)]
    if not args.c_bench:
        print("frameprep-bench not found (--c-bench): Python figures only",
              file=sys.stderr)
    if args.check and False in verdicts:
        return 1
    return 0


# The simple call against the ring given the same array, at c=1: its p50
# at most 1.2x the ring's, its rate at least 0.8x; the Python ring's client
# CPU per frame at most 1.2x the C client's.
P50_BAR, RATE_BAR, CPU_BAR = 1.2, 0.8, 1.2


def _ring_cpu(rows: list[dict[str, Any]]) -> list[bool]:
    """Prints, for each ring point (shm, door) with a C run, the Python
    client's CPU per frame over the C client's with the bar and PASS or
    FAIL, and each bare point's the same way, without a bar; returns
    whether each bar held."""
    out = []
    for r in rows:
        if r["path"] == "bare" and r["C"] is not None:
            print(f"floor, a Python loop around the bare C request, door "
                  f"c={r['c']}: Python {r['py']['cpu']:.1f} / C "
                  f"{r['C']['cpu']:.1f} us = "
                  f"{_ratio(r['py']['cpu'], r['C']['cpu']).strip()}x "
                  f"(no bar)")
        if r["path"] not in ("shm", "door") or r["C"] is None:
            continue
        if r["C"]["cpu"] <= 0:
            print(f"ring client CPU per frame, {r['path']} c={r['c']}: the "
                  f"C client's is 0 us after its fixed cost (a loaded "
                  f"machine): not judged")
            continue
        ratio = round(float(r["py"]["cpu"] / r["C"]["cpu"]), 2)  # as printed
        ok = ratio <= CPU_BAR
        out.append(ok)
        print(f"ring client CPU per frame, {r['path']} c={r['c']}: Python "
              f"{r['py']['cpu']:.1f} / C {r['C']['cpu']:.1f} us = "
              f"{ratio:.2f}x (bar <= {CPU_BAR}x) "
              f"{'PASS' if ok else 'FAIL'}")
    return out


def _simple_vs_ring(rows: list[dict[str, Any]]) -> bool | None:
    """Prints the simple call's (inline) p50 and rate over the ring's
    (copy) at c=1 with the bars and PASS or FAIL; returns whether both
    held, None when the run lacks either point."""
    at = {r["path"]: r for r in rows if r["c"] == 1}
    if "inline" not in at or "copy" not in at:
        return None
    simple, ring = at["inline"], at["copy"]
    # Judged on the ratios as printed (two decimals), so that a verdict
    # never contradicts its figure (1.2004 printed as 1.20 and FAIL).
    p50 = round(float(simple["py"]["p50"] / ring["py"]["p50"]), 2)
    rate = round(float(simple["py"]["fps"] / ring["py"]["fps"]), 2)
    ok_p50, ok_rate = p50 <= P50_BAR, rate >= RATE_BAR
    print(f"simple call vs ring.preprocess(array), c=1: p50 "
          f"{simple['py']['p50']:.0f} / {ring['py']['p50']:.0f} us = "
          f"{p50:.2f}x (bar <= {P50_BAR}x) "
          f"{'PASS' if ok_p50 else 'FAIL'}; rate "
          f"{simple['py']['fps']:.1f} / {ring['py']['fps']:.1f} = "
          f"{rate:.2f}x (bar >= {RATE_BAR}x) "
          f"{'PASS' if ok_rate else 'FAIL'}")
    runs = list(zip(simple["py_runs"], ring["py_runs"]))
    if len(runs) > 1:
        print("        p50 simple/ring per run: " +
              " ".join(f"{s['p50'] / r['p50']:.2f}" for s, r in runs),
              flush=True)
    return ok_p50 and ok_rate


if __name__ == "__main__":
    sys.exit(main())
