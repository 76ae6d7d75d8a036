#!/usr/bin/python3
"""test_alerts.py: deploy/frameprep-alerts.yml and deploy/grafana-frameprep.json
against what a CPU frameprepd really exports, with promtool.

  promtool check rules   the rules parse (PromQL, templates, durations);
  promtool test rules    tests/deploy/frameprep-alerts.test.yml: each alert
                         fires on the series that should raise it, with its
                         labels and rendered annotations, and none fires on
                         a healthy daemon's series; every alert of the file
                         has a case that fires;
  series                 every frameprep_* and process_* name in the rules
                         and in the dashboard's queries is in the /metrics
                         scrape of a CPU daemon (after one good FRAME and one
                         refused), but for the GPU-only ones, which must be
                         names that the daemon's sources write;
  failed timing          the refused FRAME's reply carries t_total_us, and
                         the failed-request histogram counted it;
  INFO health            `frameprep info` prints live, ready, draining and
                         health as /healthz and /readyz decide; `frameprep
                         info --health` prints only them and exits 0 when
                         ready, 1 when draining (a daemon that answers INFO
                         with ESHUTDOWN: served here by nngcat) and 3 when
                         no daemon answers.

promtool comes from PATH or $FPREP_PROMTOOL (tests/run-all.sh extracts it
from Debian's prometheus package without installing the server). Without
it the test skips (exit 77), but fails under CI (CI set in the environment).

Usage: test_alerts.py --daemon PATH --cli PATH
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import daemon_test as dt  # noqa: E402
import fpwire  # noqa: E402
from daemon_test import Daemon, Fail, Skip, check  # noqa: E402

RULES = os.path.join(ROOT, "deploy", "frameprep-alerts.yml")
RULE_TESTS = os.path.join(HERE, "frameprep-alerts.test.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana-frameprep.json")
# Series a CPU daemon does not have: those of GPU lanes and devices.
GPU_ONLY = {"frameprep_gpu_memory_used_bytes",
            "frameprep_gpu_memory_total_bytes", "frameprep_gpu_lanes",
            "frameprep_gpu_lanes_in_service",
            "frameprep_nvml_gpu_utilization_ratio",
            "frameprep_nvml_memory_utilization_ratio",
            "frameprep_nvml_memory_used_bytes",
            "frameprep_nvml_memory_total_bytes"}
NAME = re.compile(r"\b((?:frameprep|process)_[a-z0-9_]+)\b")


def promtool():
    path = os.environ.get("FPREP_PROMTOOL") or shutil.which("promtool")
    if path and os.access(path, os.X_OK):
        return path
    why = ("promtool not found (PATH, $FPREP_PROMTOOL): the alert rules "
           "are not checked; tests/run-all.sh fetches it from Debian's "
           "prometheus package (apt-get download, no server installed)")
    if os.environ.get("CI"):
        raise Fail(why)
    raise Skip(why)


def run(argv):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=60)
    return r.returncode, r.stdout.decode()


def check_rules(tool):
    rc, out = run([tool, "check", "rules", RULES])
    check(rc == 0, f"promtool check rules {RULES}:\n{out}")
    print(f"ok promtool check rules: {out.strip().splitlines()[-1]}")
    rc, out = run([tool, "test", "rules", RULE_TESTS])
    check(rc == 0, f"promtool test rules {RULE_TESTS}:\n{out}")
    print("ok promtool test rules: SUCCESS")
    with open(RULES) as f:
        alerts = re.findall(r"^\s*- alert: (\w+)", f.read(), re.M)
    with open(RULE_TESTS) as f:
        cases = f.read()
    firing = set(re.findall(r"alertname: (\w+)\n\s*exp_alerts:\n\s*- ",
                            cases))
    missing = [a for a in alerts if a not in firing]
    check(not missing, f"alerts with no firing case in {RULE_TESTS}: "
                       f"{missing}")
    print(f"ok {len(alerts)} alerts, each with a case that fires")


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=10) as r:
        return r.read().decode()


def samples(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


def sources_text():
    text = ""
    for path in glob.glob(os.path.join(ROOT, "service", "*.c")):
        with open(path) as f:
            text += f.read()
    return text


def check_series(tmp, cli):
    d = Daemon(tmp, "--metrics-listen", "127.0.0.1:0")
    try:
        port = None
        for _ in range(100):
            m = re.search(r"metrics: http://\S+ \(port (\d+)\)",
                          d.log_text())
            if m:
                port = int(m.group(1))
                break
            dt.time.sleep(0.1)
        check(port is not None, "no metrics port in the log")
        ok = fpwire.reply(dt.nngcat(d.url, fpwire.request(request_id=5)))
        check(ok["status"] == 0, f"FRAME: {ok['status_name']}")
        bad = fpwire.reply(dt.nngcat(
            d.url, fpwire.request(request_id=6, out_width=0)))
        check(bad["status_name"] == "EINVAL",
              f"FRAME out_width 0: {bad['status_name']}")
        check(bad["t_total_us"] > 0,
              f"the error reply carries no t_total_us: {bad}")
        print(f"ok the refused FRAME's reply: t_total_us "
              f"{bad['t_total_us']}")
        text = scrape(port)
        info = subprocess.run([cli, "info", "--socket", d.url],
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=30)
        health = subprocess.run([cli, "info", "--health", "--socket",
                                 d.url], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=30)
    finally:
        d.stop()
    gone = subprocess.run([cli, "info", "--health", "--timeout", "2000",
                           "--socket", d.url], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=30)
    have = samples(text)
    failed = ('frameprep_request_failed_duration_seconds_count{device="cpu",'
              'kind="frame"}')
    check(have.get(failed) == 1, f"{failed} = {have.get(failed)}, not 1")
    names = {re.split(r"[{ ]", k)[0] for k in have}

    with open(RULES) as f:
        rules = f.read()
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    used = {"rules": set(NAME.findall(rules)),
            "dashboard": set(NAME.findall("\n".join(exprs)))}
    src = sources_text()
    for where, found in used.items():
        check(found, f"no series named in the {where}")
        for name in sorted(found):
            if name in GPU_ONLY:
                check(f'"{name}' in src,
                      f"{name} (GPU-only, in the {where}) is written by no "
                      f"source in service/")
                continue
            check(name in names, f"{name} (in the {where}) is not in a CPU "
                                 f"daemon's scrape")
        print(f"ok {len(found)} series named in the {where}, "
              f"{len(found - GPU_ONLY)} of them in the CPU scrape, the "
              f"rest GPU-only and written by service/")

    out = info.stdout.decode()
    check(info.returncode == 0, f"frameprep info exited {info.returncode}:"
                                f"\n{out}")
    for line in ("live: true", "ready: true", "draining: false",
                 "health: ready"):
        check(f"\n{line}\n" in out, f"no '{line}' in frameprep info:\n{out}")
    print("ok frameprep info: live: true, ready: true, draining: false, "
          "health: ready")
    want = "live: true\nready: true\ndraining: false\nhealth: ready\n"
    check(health.returncode == 0 and health.stdout.decode() == want,
          f"frameprep info --health exited {health.returncode}:\n"
          f"{health.stdout.decode()}")
    check(gone.returncode == 3, f"frameprep info --health without a "
                                f"daemon exited {gone.returncode}")
    print("ok frameprep info --health: the four lines and 0; without a "
          "daemon 3")
    check_draining(tmp, cli)


def check_draining(tmp, cli):
    """frameprep info --health against a server that answers INFO with
    ESHUTDOWN, as a draining frameprepd does (nngcat serving that reply to
    the client's first request, id 1)."""
    msg = b"server shutting down: SIGTERM"
    head = struct.pack("<IHHQI", fpwire.REPLY_MAGIC, fpwire.VERSION,
                       fpwire.KIND["INFO"], 1, fpwire.ERRNO["ESHUTDOWN"])
    head += bytes(104 - len(head)) + msg
    path = os.path.join(tmp, "eshutdown.bin")
    with open(path, "wb") as f:
        f.write(head + bytes(fpwire.REP_HDR - len(head)))
    url = f"ipc://{tmp}/draining.sock"
    srv = subprocess.Popen(["nngcat", "--rep0", "--listen", url, "--file",
                            path, "--raw"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(url[len("ipc://"):]):
                break
            dt.time.sleep(0.05)
        r = subprocess.run([cli, "info", "--health", "--timeout", "5000",
                            "--socket", url], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=30)
    finally:
        srv.kill()
        srv.wait()
    want = ("live: true\nready: false\ndraining: true\nhealth: not ready: "
            "server shutting down: SIGTERM\n")
    check(r.returncode == 1 and r.stdout.decode() == want,
          f"frameprep info --health against ESHUTDOWN exited "
          f"{r.returncode}:\n{r.stdout.decode()}")
    print("ok frameprep info --health against a draining daemon: "
          "draining: true, exit 1")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--cli", required=True)
    args = ap.parse_args()
    dt.ARGS = argparse.Namespace(daemon=args.daemon, cli=args.cli,
                                 images=None)
    tmp = tempfile.mkdtemp(prefix="fprep-alerts-")
    try:
        check_rules(promtool())
        check_series(tmp, args.cli)
    except Skip as e:
        print(f"SKIP: {e}")
        return 77
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS deploy_alerts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
