#!/usr/bin/python3
"""metrics_test.py: frameprepd's Prometheus endpoint and several daemons
behind one client, against CPU daemons, with daemon_test.py's helpers.

  metrics   scrapes /metrics before, during and after load: promtool check
            metrics (or, without promtool, python3-prometheus-client's
            parser) passes on a scrape taken under load, and the counters
            equal what nngcat and frameprep-bench sent and received.
  health    /healthz (200; 503 while the event loop's thread is held
            stopped, by ptrace, for over 10 s), /readyz (200, then 503
            while draining), 405 with an
            Allow header for other methods, 404 naming the paths, the
            process_* series, through urllib and http.client.
  metrics_slow  16 connections that send a header byte a second do not
            keep a scraper out, and are closed once their request has taken
            10 s; 80 of them from one address leave room for another.
  metrics_reconnect  32, 64, then 128, slow connections from the scraper's
            address that connect again as soon as they are closed: 19 of
            20 scrapes of /metrics and /healthz get through (12 at 128).
  dashboard deploy/grafana-frameprep.json is valid JSON with the panels
            deploy/README.md names; every series its queries use is in a CPU
            daemon's scrape (the GPU-only ones aside) with the labels they
            group by, and promtool check rules parses each query.
  failover  two daemons behind one frameprep-bench (--socket A --socket B,
            and a third URL where nobody listens); one is killed mid-run:
            every request is answered, none twice. Shared memory is refused
            with several daemons.

Usage: metrics_test.py TEST --daemon PATH --cli PATH [--images DIR]
"""
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon_test as dt  # noqa: E402
import fpwire  # noqa: E402
from daemon_test import Daemon, Fail, Skip, ThreadStop, check  # noqa: E402


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


def client_check(text):
    """The exposition read by the Prometheus Python client's parser (it
    raises on a malformed line); each family once, histograms whole."""
    from prometheus_client.parser import text_string_to_metric_families
    seen = set()
    n = 0
    for fam in text_string_to_metric_families(text):
        check(fam.name not in seen, f"family {fam.name} twice")
        seen.add(fam.name)
        n += len(fam.samples)
        if fam.type != "histogram":
            continue
        series = {}
        for s in fam.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items()
                               if k != "le"))
            series.setdefault(key, {})[s.name[len(fam.name):] +
                                       s.labels.get("le", "")] = s.value
        for key, v in series.items():
            check(v.get("_bucket+Inf") == v.get("_count"),
                  f"{fam.name}{dict(key)}: +Inf bucket != count")
    return f"prometheus_client parser: {len(seen)} families, {n} samples ok"


def exposition_check(text, tmp):
    if shutil.which("promtool") is not None:
        return promtool_check(text, tmp).strip() or "promtool ok"
    return client_check(text)


def have_checker():
    if shutil.which("promtool") is not None:
        return True
    try:
        import prometheus_client.parser  # noqa: F401
        return True
    except ImportError:
        return False


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
DOORBELLS = "frameprep_doorbells"
DOORBELLS_LIMIT = "frameprep_doorbells_limit"
HIST_FRAME = ('frameprep_request_duration_seconds_count{device="cpu",'
              'kind="frame"}')
HIST_QUEUE = ('frameprep_stage_duration_seconds_count{device="cpu",'
              'lane="0",stage="queue"}')


def test_metrics(tmp):
    if not have_checker():
        raise Skip("neither promtool nor python3-prometheus-client is "
                   "installed (deploy/setup.sh installs the latter)")
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
        # Buckets fine enough for a few hundred microseconds; only the
        # stages the CPU backend has; the failed-request histogram.
        text1 = scrape_text(port)
        for le in ("0.0002", "0.0003", "0.0005", "0.00075", "0.001",
                   "0.0015", "10"):
            check(f'{HIST_FRAME[:-len("}")].replace("_count{", "_bucket{")}'
                  f',le="{le}"}}' in s1, f"no le={le} bucket")
        for stage in ("h2d", "kernel", "d2h"):
            check(f'stage="{stage}"' not in text1,
                  f"a {stage} series on the CPU backend")
        check('frameprep_request_failed_duration_seconds_count{device="cpu",'
              'kind="frame"}' in s1, "no failed-request histogram")
        check("frameprep_shm_region_bytes" in s1, "no shm bytes gauge")

        # Under load: frameprep-bench for two seconds (long enough for
        # many scrapes whatever the machine's speed), scraped while it
        # runs. --no-stage: its frames go through the socket, so the byte
        # counters can be checked to the byte (the library would stage
        # them through shared memory).
        out_json = os.path.join(tmp, "bench.json")
        w, h, tw, th = 320, 240, 160, 160
        bench = subprocess.Popen(
            [dt.bench_path(), "--socket", d.url, "--synthetic", f"{w}x{h}",
             "--size", f"{tw}x{th}", "-c", "4", "-d", "2", "--warmup",
             "0", "--no-ceiling", "--no-stage", "--verify", "none", "--json",
             out_json, "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        under_load = None
        busiest = -1
        while bench.poll() is None:
            text = scrape_text(port)
            cur = parse(text)
            if cur[INFLIGHT] > busiest:
                busiest, under_load = cur[INFLIGHT], text
            time.sleep(0.01)
        bout = bench.stdout.read().decode()
        check(bench.returncode == 0, f"frameprep-bench exited "
                                     f"{bench.returncode}:\n{bout}")
        check(under_load is not None and busiest > 0,
              f"no scrape saw a request in flight (max {busiest})")
        print(f"scrape under load ({busiest:.0f} in flight): "
              f"{exposition_check(under_load, tmp)}")
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

        # Doorbells: none while idle, against the default --max-doorbells;
        # frameprep-bench --doorbell holds one a stream while it runs,
        # and they go with its connections.
        check(s2[DOORBELLS] == 0 and s2[DOORBELLS_LIMIT] == 64,
              f"doorbells {s2[DOORBELLS]} of {s2[DOORBELLS_LIMIT]} when "
              f"idle, want 0 of 64")
        bench = subprocess.Popen(
            [dt.bench_path(), "--socket", d.url, "--synthetic", "64x48",
             "--size", "32x32", "-c", "2", "-d", "1", "--warmup", "0",
             "--shm", "both", "--doorbell", "--no-ceiling", "--verify",
             "none", "-q"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)
        most = 0.0
        while bench.poll() is None:
            most = max(most, parse(scrape_text(port))[DOORBELLS])
            time.sleep(0.01)
        bout = bench.stdout.read().decode()
        check(bench.returncode == 0, f"frameprep-bench --doorbell exited "
                                     f"{bench.returncode}:\n{bout}")
        check(most == 2, f"{most:.0f} doorbells seen while 2 streams ran "
                         f"through theirs")
        deadline = time.monotonic() + 10
        while parse(scrape_text(port))[DOORBELLS] != 0:
            check(time.monotonic() < deadline,
                  "doorbells left 10 s after their connections closed")
            time.sleep(0.05)
        print(f"doorbells: {most:.0f} while frameprep-bench --doorbell "
              f"-c 2 ran, 0 after, limit 64")
        print("ok metrics")
    finally:
        d.stop()


def http_get(port, path, method="GET", host="127.0.0.1", source=None,
             timeout=5):
    """(status, headers, body) of one request through http.client."""
    conn = http.client.HTTPConnection(
        host, port, timeout=timeout,
        source_address=(source, 0) if source else None)
    try:
        conn.request(method, path, body=b"x=1" if method == "POST" else None)
        r = conn.getresponse()
        return r.status, r.headers, r.read().decode()
    finally:
        conn.close()


def proc_start_time(pid):
    """The process's start, seconds since the epoch, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        btime = int(next(ln for ln in f if ln.startswith("btime")).split()[1])
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def test_health(tmp):
    d = Daemon(tmp, "--metrics-listen", "127.0.0.1:0")
    try:
        port = metrics_port(d)
        for path, want in (("/healthz", "ok\n"), ("/readyz", "ready\n"),
                           ("/ready", "ready\n")):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                        timeout=5) as r:
                body = r.read().decode()
                check(r.status == 200 and body == want,
                      f"GET {path}: {r.status} {body!r}")
        st, hd, body = http_get(port, "/metrics", "HEAD")
        check(st == 200 and body == "", f"HEAD /metrics: {st} {body!r}")
        for method, path in (("POST", "/metrics"), ("PUT", "/healthz"),
                             ("DELETE", "/readyz")):
            try:
                urllib.request.urlopen(urllib.request.Request(
                    f"http://127.0.0.1:{port}{path}", method=method,
                    data=b"x=1" if method != "DELETE" else None), timeout=5)
                raise Fail(f"{method} {path}: not refused")
            except urllib.error.HTTPError as e:
                check(e.code == 405 and e.headers.get("Allow") == "GET, HEAD",
                      f"{method} {path}: {e.code}, Allow "
                      f"{e.headers.get('Allow')!r}")
        for path in ("/", "/metricsx", "/v2/health/live"):
            st, hd, body = http_get(port, path)
            check(st == 404 and all(p in body for p in
                                    ("/metrics", "/healthz", "/readyz")),
                  f"GET {path}: {st} {body!r}")
        print("ok /healthz 200, /readyz 200, HEAD 200, POST/PUT/DELETE 405 "
              "with Allow: GET, HEAD, unknown paths 404 naming the paths")

        # Liveness follows the event loop (the main thread): held stopped,
        # /healthz fails once the loop's last heartbeat (one a second) is
        # 10 s old; let go, it passes again. No wall-clock window: the
        # daemon's 503 says how old the beat is (to the millisecond), which
        # must be at least 10 s and at least the time the test has held
        # the loop (t0 is taken after the thread has stopped, each request's
        # time before it is sent, so a correct daemon cannot say less). The
        # lower bound of 5 s on the time held only catches a 503 that
        # comes without a stall (a heartbeat every second; measured: 9.0 to
        # 10.0 s here, idle or beside stress-ng --cpu 2).
        held = ThreadStop(d.proc.pid)
        try:
            t0 = time.monotonic()
            while True:
                sent = time.monotonic() - t0
                st, _, body = http_get(port, "/healthz")
                if st != 200:
                    break
                check(sent < 60,
                      "/healthz still 200 with the loop stopped 60 s")
                time.sleep(0.25)
            stalled = sent
            ready = http_get(port, "/metrics")[0]
        finally:
            held.release()
        t1 = time.monotonic()
        while http_get(port, "/healthz")[0] != 200:
            check(time.monotonic() - t1 < 30, "/healthz not 200 again")
            time.sleep(0.1)
        m = re.match(r"not live: the event loop has not turned for "
                     r"(\d+\.\d{3}) s\n$", body)
        age = float(m.group(1)) if m else -1.0
        print(f"loop held stopped: /healthz {st} after {stalled:.1f} s "
              f"({body.strip()!r}), /metrics {ready} meanwhile; 200 again "
              f"{time.monotonic() - t1:.1f} s after the release")
        check(st == 503 and m is not None and age >= 10.0 and
              age >= stalled and stalled >= 5 and ready == 200,
              f"/healthz with the loop stopped: {st} {body!r} when held "
              f"{stalled:.1f} s (wanted 503, a beat >= 10 s and >= the "
              f"time held, held >= 5 s)")
        good = fpwire.reply(dt.nngcat(d.url, fpwire.request(request_id=3)))
        check(good["status"] == 0, "a request after the release")

        s = parse(scrape_text(port))
        fds = len(os.listdir(f"/proc/{d.proc.pid}/fd"))
        start = proc_start_time(d.proc.pid)
        with open(f"/proc/{d.proc.pid}/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        print(f"process_*: cpu {s['process_cpu_seconds_total']:.3f} s, rss "
              f"{s['process_resident_memory_bytes']:.0f} B (/proc: {rss}), "
              f"fds {s['process_open_fds']:.0f} (/proc: {fds}), start "
              f"{s['process_start_time_seconds']:.2f} (/proc: {start:.2f}), "
              f"max fds {s['process_max_fds']:.0f}")
        check(0 < s["process_cpu_seconds_total"] < 600, "process_cpu")
        check(abs(s["process_resident_memory_bytes"] - rss) < 64 << 20,
              "process_resident_memory_bytes far from /proc's")
        check(abs(s["process_open_fds"] - fds) <= 4,
              "process_open_fds far from /proc's")
        check(abs(s["process_start_time_seconds"] - start) < 1.0,
              "process_start_time_seconds far from /proc's")
        check(s["process_max_fds"] >= s["process_open_fds"], "max fds")

        # Draining: a large frame in flight holds the shutdown; /readyz
        # says 503 from the SIGTERM on, /healthz still 200.
        rq = fpwire.request(request_id=9, width=4096, height=3072,
                            out_width=2048, out_height=2048,
                            payload=bytes(4096 * 3072 * 3))
        big = threading.Thread(target=dt.nngcat, args=(d.url, rq),
                               kwargs={"quiet": True})
        big.start()
        deadline = time.monotonic() + 30
        while parse(scrape_text(port))[INFLIGHT] < 1:
            check(time.monotonic() < deadline and big.is_alive(),
                  "the large frame was never in flight")
            time.sleep(0.002)
        d.proc.send_signal(signal.SIGTERM)
        seen = []
        while d.alive():
            try:
                st, _, body = http_get(port, "/readyz", timeout=1)
                live = http_get(port, "/healthz", timeout=1)[0]
            except OSError:
                break
            seen.append((st, body.strip(), live))
            time.sleep(0.005)
        big.join(60)
        rc = d.proc.wait(30)
        check(rc == 0, f"frameprepd exited {rc} after SIGTERM")
        print(f"after SIGTERM: {len(seen)} /readyz answers "
              f"{sorted(set(seen))}")
        # The first answers may come before the loop has taken the signal.
        draining = [i for i, s in enumerate(seen) if s[0] != 200]
        check(draining and all(s == (503, "not ready: shutting down", 200)
                               for s in seen[draining[0]:]),
              f"/readyz while draining: {seen[:8]}")
        print("ok health")
    finally:
        d.kill()


SLOW_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200


class SlowClient(threading.Thread):
    """A connection to the endpoint that sends a header byte a second and
    never ends it; closed_at: when the server closed it (monotonic)."""

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.stop = stop
        self.opened_at = time.monotonic()
        self.closed_at = None

    def run(self):
        i = 0
        while not self.stop.is_set() and self.closed_at is None:
            try:
                r, _, _ = select.select([self.sock], [], [], 1.0)
                if r and self.sock.recv(4096) == b"":
                    self.closed_at = time.monotonic()
                    break
                self.sock.send(SLOW_HEAD[i % len(SLOW_HEAD):][:1])
                i += 1
            except OSError:
                self.closed_at = time.monotonic()
        self.sock.close()


def timed_scrape(port, source=None):
    t0 = time.monotonic()
    st, _, body = http_get(port, "/metrics", source=source, timeout=5)
    check(st == 200 and "frameprep_build_info" in body,
          f"scrape from {source or '127.0.0.1'}: {st}")
    return time.monotonic() - t0


def test_metrics_slow(tmp):
    d = Daemon(tmp, "--metrics-listen", "127.0.0.1:0")
    stop = threading.Event()
    slow = []
    try:
        port = metrics_port(d)
        slow = [SlowClient(port, stop) for _ in range(16)]
        for c in slow:
            c.start()
        worst = 0.0
        scrapes = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 13:
            worst = max(worst, timed_scrape(port))
            scrapes += 1
            time.sleep(0.25)
        ages = [round(c.closed_at - c.opened_at, 1) if c.closed_at else None
                for c in slow]
        print(f"16 slow connections: {scrapes} scrapes, slowest "
              f"{worst * 1000:.0f} ms; the slow ones closed after {ages} s")
        check(worst < 2.0, f"a scrape took {worst:.1f} s")
        check(all(a is not None and 9 <= a <= 12.5 for a in ages),
              f"slow connections not closed 10 s after they began: {ages}")
        check("metrics: closed" in d.log_text(),
              "no log line for the closed connections")

        # 80 from 127.0.0.1 (its share is 64 connections): a scraper on
        # another address still gets in; 127.0.0.1 again once they go.
        more = [SlowClient(port, stop) for _ in range(80)]
        for c in more:
            c.start()
        time.sleep(1.5)
        refused = sum(1 for c in more if c.closed_at is not None)
        other = timed_scrape(port, source="127.0.0.2")
        print(f"80 more: {refused} cut at once (per-address share "
              f"64); a scrape from 127.0.0.2 took {other * 1000:.0f} ms")
        check(refused >= 16, f"only {refused} of 80 refused")
        check(other < 2.0, "the scrape from 127.0.0.2 was slow")
        deadline = time.monotonic() + 15
        while any(c.closed_at is None for c in more):
            check(time.monotonic() < deadline, "slow connections left open")
            time.sleep(0.2)
        timed_scrape(port)
        # Some 25 s with the nng side idle: the loop's heartbeat kept
        # /healthz up.
        st, _, body = http_get(port, "/healthz")
        check(st == 200, f"/healthz {st} {body!r} on an idle daemon")
        print("ok metrics_slow")
    finally:
        stop.set()
        for c in slow:
            c.join(5)
        d.stop()


class ReconnectingSlow(threading.Thread):
    """Slow connections from 127.0.0.1 (one header byte, then nothing)
    that connect again as soon as the server closes them, until stop;
    connects counts them (issue 35, item 4)."""

    def __init__(self, port, stop):
        super().__init__(daemon=True)
        self.port = port
        self.stop = stop
        self.connects = 0

    def run(self):
        while not self.stop.is_set():
            try:
                s = socket.create_connection(("127.0.0.1", self.port),
                                             timeout=2)
            except OSError:
                time.sleep(0.01)
                continue
            self.connects += 1
            try:
                s.send(SLOW_HEAD[:1])
                while not self.stop.is_set():
                    r, _, _ = select.select([s], [], [], 0.5)
                    if r and s.recv(4096) == b"":
                        break
            except OSError:
                pass
            s.close()


def test_metrics_reconnect(tmp):
    """32, 64, then 128 slow connections from the scraper's own address
    that connect again at once when closed: scrapes of /metrics and
    /healthz get through (1 and 0 of 20 did at 32 and 64, when the
    per-address and total limits refused the newcomer; 16 to 18 of 20 in
    CI's runs at 64 while a request not yet read could be cut). 32 and 64
    fit in the address's share (64): at least 19 of 20, whatever the
    load. 128 cut one another thousands of times a second, and a scrape
    is lost when they cut it before its request was sent (39-40 of 40 on
    two cores at load 20): at least 12 of 20 there."""
    d = Daemon(tmp, "--metrics-listen", "127.0.0.1:0")
    try:
        port = metrics_port(d)
        for n, bound in ((32, 19), (64, 19), (128, 12)):
            stop = threading.Event()
            slow = [ReconnectingSlow(port, stop) for _ in range(n)]
            for c in slow:
                c.start()
            time.sleep(1.0)
            ok = 0
            worst = 0.0
            for i in range(20):
                path = "/metrics" if i % 2 == 0 else "/healthz"
                t0 = time.monotonic()
                try:
                    st, _, _ = http_get(port, path, timeout=2)
                    ok += st == 200
                except OSError:
                    pass
                worst = max(worst, time.monotonic() - t0)
                time.sleep(0.1)
            stop.set()
            for c in slow:
                c.join(5)
            print(f"{n} reconnecting slow connections "
                  f"({sum(c.connects for c in slow)} connects): {ok} of 20 "
                  f"scrapes answered, slowest {worst * 1000:.0f} ms")
            check(ok >= bound,
                  f"{n} slow connections: {ok} of 20 scrapes (bound {bound})")
        check(d.alive(), "the daemon died")
        print("ok metrics_reconnect")
    finally:
        d.stop()


DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                         "..", "deploy", "grafana-frameprep.json")
DASHBOARD_GPU_ONLY = {"frameprep_gpu_memory_used_bytes",
                      "frameprep_gpu_memory_total_bytes",
                      "frameprep_gpu_lanes", "frameprep_gpu_lanes_in_service"}


def test_dashboard(tmp):
    with open(DASHBOARD) as f:
        dash = json.load(f)  # raises on anything that is not JSON
    panels = dash["panels"]
    titles = {p["title"] for p in panels}
    for want in ("Health", "Requests in flight",
                 "Requests/s by kind and status",
                 "Latency p50 / p99 (answered ok)",
                 "Failed-request latency p50 / p99", "Shared memory",
                 "Process CPU", "Process RSS", "Open file descriptors"):
        check(want in titles, f"no panel {want!r} in {sorted(titles)}")
    ids = [p["id"] for p in panels]
    check(len(ids) == len(set(ids)), f"panel ids repeat: {ids}")
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    check(all(exprs), "a panel target without a query")

    # The series the queries use, in a CPU daemon's scrape.
    d = Daemon(tmp, "--metrics-listen", "127.0.0.1:0")
    try:
        port = metrics_port(d)
        rep = dt.nngcat(d.url, fpwire.request(request_id=5))
        check(fpwire.reply(rep)["status"] == 0, "FRAME not OK")
        text = scrape_text(port)
    finally:
        d.stop()
    samples = parse(text)
    names = {re.split(r"[{ ]", k)[0] for k in samples}
    labels = {}
    for k in samples:
        name, _, rest = k.partition("{")
        labels.setdefault(name, set()).update(
            re.findall(r'([a-z_]+)="', rest))
    used = 0
    for expr in exprs:
        for name in re.findall(r"\b((?:frameprep|process)_[a-z_]+)\b", expr):
            used += 1
            if name in DASHBOARD_GPU_ONLY:
                continue
            check(name in names, f"{name} (in {expr!r}) is not in the "
                                 f"scrape")
            by = re.search(r"sum by \(([^)]*)\)", expr)
            for lab in (by.group(1).split(",") if by else []):
                lab = lab.strip()
                check(lab in labels[name] or lab == "instance",
                      f"{expr!r} groups by {lab}, which {name} has not "
                      f"({sorted(labels[name])})")
    print(f"ok {len(panels)} panels, {len(exprs)} queries, {used} series "
          f"references, all in the scrape but the GPU-only ones")

    if shutil.which("promtool") is None:
        print("promtool not installed: the queries' syntax is not checked")
        return
    rules = os.path.join(tmp, "dashboard_rules.yml")
    with open(rules, "w") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, expr in enumerate(exprs):
            e = expr.replace("$__rate_interval", "5m").replace(
                "$instance", ".*")
            f.write(f"      - record: dashboard:q{i}\n"
                    f"        expr: {json.dumps(e)}\n")
    r = subprocess.run(["promtool", "check", "rules", rules],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60)
    out = r.stdout.decode()
    check(r.returncode == 0, f"promtool check rules: {out}")
    print(f"ok promtool: {out.strip().splitlines()[-1]}")


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


if __name__ == "__main__":
    # daemon_test's driver: arguments, scratch directory, logs on failure.
    sys.exit(dt.run(globals()))
