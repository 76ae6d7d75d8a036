#!/usr/bin/python3
"""metrics_test.py: frameprepd's Prometheus endpoint and several daemons
behind one client, against CPU daemons, with daemon_test.py's helpers.

  metrics   scrapes /metrics before, during and after load: promtool check
            metrics passes on a scrape taken under load, and the counters
            equal what nngcat and frameprep-bench sent and received.
  failover  two daemons behind one frameprep-bench (--socket A --socket B,
            and a third URL where nobody listens); one is killed mid-run:
            every request is answered, none twice. Shared memory is refused
            with several daemons.

Usage: metrics_test.py TEST --daemon PATH --cli PATH [--images DIR]
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_test as dt  # noqa: E402
import fpwire  # noqa: E402
from daemon_test import Daemon, Fail, Skip, check  # noqa: E402


def metrics_port(d):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = re.search(r"metrics: http://\S+ \(port (\d+)\)", d.log_text())
        if m:
            return int(m.group(1))
        time.sleep(0.1)
    raise Fail(f"no metrics port in the log:\n{d.log_text()}")


def scrape_text(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=10) as r:
        check(r.status == 200, f"GET /metrics: HTTP {r.status}")
        ctype = r.headers.get("Content-Type", "")
        check(ctype.startswith("text/plain; version=0.0.4"),
              f"Content-Type {ctype!r}")
        return r.read().decode()


def parse(text):
    """{'name{labels}': value} of every sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        out[series] = float(value)
    return out


def delta(a, b, series):
    return b.get(series, 0.0) - a.get(series, 0.0)


def promtool_check(text, tmp):
    path = os.path.join(tmp, "scrape.txt")
    with open(path, "w") as f:
        f.write(text)
    with open(path) as f:
        r = subprocess.run(["promtool", "check", "metrics"], stdin=f,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=60)
    out = r.stdout.decode()
    check(r.returncode == 0, f"promtool check metrics exited "
                             f"{r.returncode}:\n{out}")
    return out


FRAME = 'frameprep_requests_total{kind="frame",status="ok"}'
INFO = 'frameprep_requests_total{kind="info",status="ok"}'
EINVAL = 'frameprep_requests_total{kind="frame",status="einval"}'
BYTES_IN = "frameprep_received_bytes_total"
BYTES_OUT = "frameprep_sent_bytes_total"
RECEIVED = "frameprep_requests_received_total"
INFLIGHT = "frameprep_requests_in_flight"
OPENED = "frameprep_connections_opened_total"
HIST_FRAME = ('frameprep_request_duration_seconds_count{device="cpu",'
              'kind="frame"}')
HIST_QUEUE = ('frameprep_stage_duration_seconds_count{device="cpu",'
              'lane="0",stage="queue"}')


def test_metrics(tmp):
    if shutil.which("promtool") is None:
        raise Skip("promtool (Debian prometheus) is not installed")
    for bad in ("9464", "127.0.0.1:http", "127.0.0.1:70000"):
        r = dt.run_daemon("--device", "cpu", "--metrics-listen", bad)
        check(r.returncode == 2 and b"metrics-listen" in r.stderr,
              f"--metrics-listen {bad}: exit {r.returncode}")
    d = Daemon(tmp, "--metrics-listen", "127.0.0.1:0")
    try:
        port = metrics_port(d)
        s0 = parse(scrape_text(port))

        # Exact part: every byte nngcat sent and received.
        sent = received = 0
        for i in range(8):
            rq = fpwire.request(request_id=100 + i)
            rep = dt.nngcat(d.url, rq)
            check(fpwire.reply(rep)["status"] == 0, "FRAME not OK")
            sent += len(rq)
            received += len(rep)
        for i in range(3):
            rq = fpwire.request(request_id=200 + i, out_width=0)
            rep = dt.nngcat(d.url, rq)
            check(fpwire.reply(rep)["status_name"] == "EINVAL",
                  "out_width 0 not EINVAL")
            sent += len(rq)
            received += len(rep)
        s1 = parse(scrape_text(port))
        got = {k: delta(s0, s1, k) for k in
               (FRAME, EINVAL, RECEIVED, BYTES_IN, BYTES_OUT, HIST_FRAME,
                HIST_QUEUE)}
        print(f"nngcat: sent {sent} B, received {received} B; metrics "
              f"deltas {got}")
        check(got[FRAME] == 8 and got[EINVAL] == 3 and got[RECEIVED] == 11,
              f"request counts {got}")
        check(got[BYTES_IN] == sent, f"received_bytes {got[BYTES_IN]} != "
                                     f"the {sent} bytes nngcat sent")
        check(got[BYTES_OUT] == received,
              f"sent_bytes {got[BYTES_OUT]} != the {received} bytes "
              f"nngcat received")
        check(got[HIST_FRAME] == 8 and got[HIST_QUEUE] == 8,
              f"histogram counts {got}")
        check(s1[INFLIGHT] == 0, f"in flight {s1[INFLIGHT]} when idle")

        # Under load: frameprep-bench for one second (long enough for
        # several scrapes whatever the machine's speed), scraped while it
        # runs.
        out_json = os.path.join(tmp, "bench.json")
        w, h, tw, th = 320, 240, 160, 160
        bench = subprocess.Popen(
            [dt.bench_path(), "--socket", d.url, "--synthetic", f"{w}x{h}",
             "--size", f"{tw}x{th}", "-c", "4", "-d", "1", "--warmup",
             "0", "--no-ceiling", "--verify", "none", "--json", out_json,
             "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        under_load = None
        busiest = -1
        while bench.poll() is None:
            text = scrape_text(port)
            cur = parse(text)
            if cur[INFLIGHT] > busiest:
                busiest, under_load = cur[INFLIGHT], text
            time.sleep(0.05)
        bout = bench.stdout.read().decode()
        check(bench.returncode == 0, f"frameprep-bench exited "
                                     f"{bench.returncode}:\n{bout}")
        check(under_load is not None and busiest > 0,
              f"no scrape saw a request in flight (max {busiest})")
        print(f"scrape under load ({busiest:.0f} in flight): "
              f"{promtool_check(under_load, tmp).strip() or 'promtool ok'}")
        s2 = parse(scrape_text(port))
        with open(out_json) as f:
            run = json.load(f)["runs"][0]
        frames = run["warmup_sent"] + run["sent"]
        infos = delta(s1, s2, INFO)
        want_in = frames * (128 + w * h * 3) + infos * 128
        tensor_reply = 256 + tw * th * 3 * 4
        got_out = delta(s1, s2, BYTES_OUT)
        print(f"bench: {frames} frames ({run['ok']} ok), {infos:.0f} INFO; "
              f"metrics: {delta(s1, s2, FRAME):.0f} frames ok, "
              f"{delta(s1, s2, BYTES_IN):.0f} B in (want {want_in}), "
              f"{got_out:.0f} B out")
        check(run["ok"] == run["sent"], f"bench run {run}")
        check(delta(s1, s2, FRAME) == frames,
              f"frames ok {delta(s1, s2, FRAME)} != bench's {frames}")
        check(delta(s1, s2, BYTES_IN) == want_in,
              f"received_bytes {delta(s1, s2, BYTES_IN)} != {want_in}")
        info_out = got_out - frames * tensor_reply
        check(infos * 256 <= info_out <= infos * 4352,
              f"sent_bytes {got_out}: {info_out} bytes besides the "
              f"{frames} tensor replies for {infos} INFO replies")
        check(delta(s1, s2, HIST_FRAME) == frames,
              f"request histogram count {delta(s1, s2, HIST_FRAME)}")
        check(s2[INFLIGHT] == 0, f"in flight {s2[INFLIGHT]} after the run")
        check(delta(s0, s2, OPENED) >= 11 + 4,
              f"connections opened {delta(s0, s2, OPENED)}")
        print("ok metrics")
    finally:
        d.stop()


def test_failover(tmp):
    a = Daemon(tmp, name="a.sock")
    b = Daemon(tmp, name="b.sock")
    try:
        out = dt.tool_run([dt.bench_path(), "--socket", f"{a.url},{b.url}",
                           "--synthetic", "64x48", "--size", "32x32", "-n",
                           "1", "--no-ceiling", "--shm", "in", "-q"], (2,))
        check("one daemon" in out, f"--shm with two daemons:\n{out}")
        out_json = os.path.join(tmp, "bench.json")
        bench = subprocess.Popen(
            [dt.bench_path(), "--socket", a.url, "--socket", b.url,
             "--socket", f"ipc://{tmp}/nobody.sock",
             "--synthetic", "160x120", "--size", "64x64", "-c", "4",
             "-d", "6", "--warmup", "0", "--no-ceiling", "--timeout",
             "20000", "--verify", "all", "--json", out_json, "-q"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        time.sleep(2.5)
        check(bench.poll() is None, "bench ended before the kill")
        served_a = a.log_text().count("tensor bytes")
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()
        try:
            bout = bench.communicate(timeout=120)[0].decode()
        except subprocess.TimeoutExpired:
            bench.kill()
            raise Fail("frameprep-bench did not finish after the kill")
        check(bench.returncode == 0,
              f"frameprep-bench exited {bench.returncode} after one of "
              f"its two daemons was killed:\n{bout}")
        with open(out_json) as f:
            run = json.load(f)["runs"][0]
        served_b = b.log_text().count("tensor bytes")
        print(f"daemon a served {served_a} frames before SIGKILL, b "
              f"{served_b}; bench: sent {run['sent']}, ok {run['ok']}, "
              f"lost {run['lost']}, dropped {run['dropped']}, timeouts "
              f"{run['timeouts']}, wrong {run['wrong']}, errors "
              f"{ {k: v for k, v in run['errors'].items() if v} }")
        check(served_a > 0 and served_b > 0, "a daemon served nothing")
        check(run["ok"] == run["sent"] and run["lost"] == 0 and
              run["timeouts"] == 0 and run["wrong"] == 0 and
              not any(run["errors"].values()), f"bench run {run}")
        print("ok failover")
    finally:
        a.kill()
        b.stop()


TESTS = {name[5:]: fn for name, fn in globals().items()
         if name.startswith("test_")}

if __name__ == "__main__":
    dt.TESTS = TESTS
    sys.exit(dt.main())
