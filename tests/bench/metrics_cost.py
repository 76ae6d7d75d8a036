#!/usr/bin/env python3
"""metrics_cost: what the Prometheus endpoint costs, metrics on against off.

    metrics_cost.py --daemon FRAMEPREPD --bench FRAMEPREP-BENCH
                    [--rounds N] [--daemon-arg ARG ...] [--out DIR]
                    -- BENCH ARGS...

Starts two daemons with the same settings (--daemon-arg, repeatable; e.g.
--daemon-arg=--device --daemon-arg=0), one with --metrics-listen
127.0.0.1:0 and one without, and runs frameprep-bench with BENCH ARGS
against each in turn, N rounds (default 3), alternating which goes first,
so drift in the machine hits both alike. Only one daemon works at a time.
Prints frames/s and p50 per load point, off and on (mean of the rounds),
and the change; then, from scrapes of the metrics daemon taken before and
after each of its runs, the stage means of its histograms beside the
bench's own per-stage means (server_us), which should agree. Pass
--no-ceiling in BENCH ARGS, or the ECHO runs enter the histograms too.
The JSON of every run and the last scrape go to --out (default: a
temporary directory, printed). Exit status 0 when every bench run passed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

STAGES = ("queue", "compute", "h2d", "kernel", "d2h")


class Daemon:
    def __init__(self, path, tmp, name, args, metrics):
        self.url = f"ipc://{tmp}/{name}.sock"
        self.log_path = os.path.join(tmp, f"{name}.log")
        argv = [path, "--listen", self.url, *args]
        if metrics:
            argv += ["--metrics-listen", "127.0.0.1:0"]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"metrics_cost: {name} daemon exited "
                         f"{self.proc.returncode}:\n{self.text()}")
            m = re.search(r"metrics: http://\S+ \(port (\d+)\)", self.text())
            if m:
                self.port = int(m.group(1))
            if os.path.exists(self.url[6:]) and (self.port or not metrics):
                return
            time.sleep(0.1)
        sys.exit(f"metrics_cost: {name} daemon not ready:\n{self.text()}")

    def text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def scrape(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics",
                                    timeout=10) as r:
            return r.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def stage_sums(text):
    """{stage: (sum_s, count)} of the stage histograms, with 'total' from
    the FRAME request histogram."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'frameprep_stage_duration_seconds_(sum|count)\{.*'
                     r'stage="(\w+)"\} (\S+)', line)
        if not m:
            m = re.match(r'frameprep_request_duration_seconds_(sum|count)'
                         r'\{.*kind="frame"\} (\S+)', line)
            if m:
                m = (m.group(1), "total", m.group(2))
        else:
            m = m.groups()
        if m:
            s, c = out.get(m[1], (0.0, 0.0))
            out[m[1]] = (s + float(m[2]), c) if m[0] == "sum" \
                else (s, c + float(m[2]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--daemon-arg", action="append", default=[])
    ap.add_argument("--out")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    bench_args = [a for a in args.bench_args if a != "--"]
    out = args.out or tempfile.mkdtemp(prefix="fprep-metrics-cost-")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="fprep-mc-")
    daemons = {}
    failed = False
    try:
        daemons["off"] = Daemon(args.daemon, tmp, "off", args.daemon_arg,
                                False)
        daemons["on"] = Daemon(args.daemon, tmp, "on", args.daemon_arg, True)
        results = {"off": [], "on": []}
        scraped = {}
        for rnd in range(args.rounds):
            order = ("off", "on") if rnd % 2 == 0 else ("on", "off")
            for which in order:
                d = daemons[which]
                before = stage_sums(d.scrape()) if which == "on" else None
                path = os.path.join(out, f"{which}-{rnd}.json")
                r = subprocess.run([args.bench, "--socket", d.url, "-q",
                                    "--json", path, *bench_args],
                                   stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
                if r.returncode != 0:
                    failed = True
                    print(f"metrics_cost: bench against {which} exited "
                          f"{r.returncode}:\n{r.stdout.decode()}")
                    continue
                with open(path) as f:
                    results[which].append(json.load(f))
                if which == "on":
                    text = d.scrape()
                    after = stage_sums(text)
                    for k, (s, c) in after.items():
                        s0, c0 = before.get(k, (0.0, 0.0))
                        ps, pc = scraped.get(k, (0.0, 0.0))
                        scraped[k] = (ps + s - s0, pc + c - c0)
                    with open(os.path.join(out, "scrape.txt"), "w") as f:
                        f.write(text)
                print(f"round {rnd + 1}/{args.rounds}: {which} done")
        report(results, scraped)
        if results["on"] and scraped.get("total", (0, 0))[1] == 0:
            print("metrics_cost: the metrics daemon's request histogram "
                  "stayed empty")
            failed = True
        if shutil.which("promtool"):
            with open(os.path.join(out, "scrape.txt")) as f:
                r = subprocess.run(["promtool", "check", "metrics"], stdin=f,
                                   stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
            print(f"promtool check metrics: exit {r.returncode} "
                  f"{r.stdout.decode().strip()}")
            failed |= r.returncode != 0
        print(f"JSON and scrape in {out}")
    finally:
        for d in daemons.values():
            d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


def point(run):
    return (f"c={run['concurrency']}" if run["mode"] == "closed"
            else f"{run['rate']:g}/s")


def report(results, scraped):
    if not results["off"] or not results["on"]:
        return
    npoints = len(results["off"][0]["runs"])
    print("\n| load | frames/s off | frames/s on | change | p50 ms off | "
          "p50 ms on |")
    print("| --- | --- | --- | --- | --- | --- |")
    for i in range(npoints):
        fps = {w: [d["runs"][i]["frames_per_s"] for d in results[w]]
               for w in results}
        p50 = {w: [d["runs"][i]["latency_us"]["p50"] for d in results[w]]
               for w in results}
        off = sum(fps["off"]) / len(fps["off"])
        on = sum(fps["on"]) / len(fps["on"])
        print(f"| {point(results['off'][0]['runs'][i])} | {off:.1f} | "
              f"{on:.1f} | {100 * (on / off - 1):+.2f} % | "
              f"{sum(p50['off']) / len(p50['off']) / 1000:.3f} | "
              f"{sum(p50['on']) / len(p50['on']) / 1000:.3f} |")
    # The bench's per-stage means, weighted by each point's replies.
    ok = sum(r["ok"] for d in results["on"] for r in d["runs"])
    print("\nmetrics-on daemon, mean per FRAME, us: bench (server_us of the "
          "replies) against /metrics (histogram sum / count)")
    print("| stage | bench | metrics | histogram count |")
    print("| --- | --- | --- | --- |")
    for k in (*STAGES, "total"):
        b = sum(r["server_us"][k] * r["ok"] for d in results["on"]
                for r in d["runs"]) / max(ok, 1)
        s, c = scraped.get(k, (0.0, 0.0))
        m = f"{1e6 * s / c:.1f}" if c else "-"
        print(f"| {k} | {b:.1f} | {m} | {c:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
