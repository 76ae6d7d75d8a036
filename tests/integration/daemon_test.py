#!/usr/bin/python3
"""daemon_test.py: integration tests of frameprepd with real clients.

Each test starts its own frameprepd (CPU backend) on a scratch ipc socket in
a temporary directory, talks to it with the frameprep CLI and with nngcat
(an independent nng client), stops it with SIGTERM and fails if the daemon
crashed, exited non-zero or took too long to stop.

Usage: daemon_test.py TEST --daemon PATH --cli PATH [--images DIR]
"""
import argparse
import os
import shutil
import signal
import socket
import struct
import stat
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpwire  # noqa: E402

ARGS = None
IMAGES = ["astronaut.png", "coffee.png", "chelsea.png", "camera.png"]


class Fail(Exception):
    pass


class Skip(Exception):
    """The test cannot run here (exit 77, which ctest reports as skipped)."""


def check(cond, what):
    if not cond:
        raise Fail(what)


class ThreadStop:
    """Holds one thread of a child process stopped (ptrace SEIZE +
    INTERRUPT stop that thread alone, the process's others run on) until
    release()."""
    SEIZE, INTERRUPT, DETACH = 0x4206, 0x4207, 17

    def __init__(self, tid):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long,
                                     ctypes.c_void_p, ctypes.c_void_p]
        self.tid = tid
        if self.libc.ptrace(self.SEIZE, tid, None, None) != 0:
            raise Skip(f"ptrace: {os.strerror(ctypes.get_errno())}")
        check(self.libc.ptrace(self.INTERRUPT, tid, None, None) == 0,
              "PTRACE_INTERRUPT")
        os.waitpid(tid, 0x40000000)  # __WALL: the thread has stopped

    def release(self):
        self.libc.ptrace(self.DETACH, self.tid, None, None)


def threads_named(pid, name):
    """The ids of process pid's threads whose name (comm) is name."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                if f.read().strip() == name:
                    out.append(int(tid))
        except FileNotFoundError:
            pass
    return out


class Daemon:
    """A frameprepd process on a scratch socket."""

    def __init__(self, tmp, *extra, name="d.sock", prefix=(),
                 preexec_fn=None, env=None):
        self.url = "ipc://" + os.path.join(tmp, name)
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "wb")
        argv = [*prefix, ARGS.daemon, "--device", "cpu", "--listen",
                self.url, "--workers", "2", "--log-level", "debug", *extra]
        self.proc = subprocess.Popen(argv, stdout=self.log,
                                     stderr=subprocess.STDOUT,
                                     preexec_fn=preexec_fn,
                                     env=None if env is None
                                     else {**os.environ, **env})
        self.wait_ready()

    def wait_ready(self):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Fail(f"frameprepd exited with {self.proc.returncode} "
                           f"at start:\n{self.log_text()}")
            rep = nngcat(self.url, fpwire.request(kind=2, request_id=7),
                         timeout=1, quiet=True)
            if rep:
                return
            time.sleep(0.1)
        raise Fail("frameprepd did not answer INFO within 20 s")

    def log_text(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def alive(self):
        return self.proc.poll() is None

    def stop(self, bound=15.0):
        """SIGTERM; the daemon must exit 0 within bound seconds."""
        check(self.alive(), f"frameprepd died (status {self.proc.returncode})"
                            f":\n{self.log_text()}")
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(bound)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail(f"frameprepd did not exit within {bound} s of "
                       f"SIGTERM:\n{self.log_text()}")
        check(rc == 0, f"frameprepd exited with {rc}:\n{self.log_text()}")
        return time.monotonic() - t0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def nngcat(url, data, timeout=30, quiet=False, tmp=None):
    """Sends one request with nngcat and returns the raw reply (b"" on
    timeout: nngcat then exits 0 with empty output)."""
    fd, path = tempfile.mkstemp(dir=tmp)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    try:
        r = subprocess.run(["nngcat", "--req0", "--dial", url, "--file", path,
                            "--raw", "--recv-timeout", str(timeout)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout + 30)
    finally:
        os.unlink(path)
    if r.returncode != 0 and not quiet:
        raise Fail(f"nngcat exited {r.returncode}: {r.stderr.decode()}")
    return r.stdout


def cli(*argv, ok=(0,)):
    r = subprocess.run([ARGS.cli, *argv], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    if r.returncode not in ok:
        raise Fail(f"frameprep {' '.join(argv)} exited {r.returncode}:\n"
                   f"{r.stdout.decode()}{r.stderr.decode()}")
    return r


def images():
    d = ARGS.images
    found = [os.path.join(d, n) for n in IMAGES
             if d and os.path.exists(os.path.join(d, n))]
    check(found, f"no test images ({', '.join(IMAGES)}) in {d}: run "
                 f"tests/data/fetch-images.sh (ctest fixture fetch_images)")
    return found


def letterbox_img(img, w_out, h_out):
    """The Ultralytics letterbox of img (H x W [x C] uint8) with OpenCV,
    padded with 114, before normalisation."""
    import cv2
    h, w = img.shape[:2]
    r = min(w_out / w, h_out / h)
    nw = max(1, min(w_out, round(w * r)))
    nh = max(1, min(h_out, round(h * r)))
    if (nw, nh) != (w, h):
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    dw, dh = (w_out - nw) / 2, (h_out - nh) / 2
    left, top = round(dw - 0.1), round(dh - 0.1)
    return cv2.copyMakeBorder(img, top, h_out - nh - top, left,
                              w_out - nw - left, cv2.BORDER_CONSTANT,
                              value=(114, 114, 114))


def letterbox_ref(path, w_out, h_out):
    """OpenCV letterbox (Ultralytics convention) of the image file at path
    as uint8 HWC RGB, before normalisation."""
    import cv2
    return letterbox_img(cv2.imread(path, cv2.IMREAD_COLOR), w_out,
                         h_out)[:, :, ::-1]


def compare_letterbox(npy, path, w, h):
    t = np.load(npy)
    check(t.shape == (1, 3, h, w) and t.dtype == np.float32,
          f"{npy}: shape {t.shape} dtype {t.dtype}, expected (1, 3, {h}, "
          f"{w}) float32")
    ref = letterbox_ref(path, w, h).transpose(2, 0, 1)[None]
    diff = np.abs(t.astype(np.float64) * 255.0 - ref.astype(np.float64))
    check(diff.max() <= 1.0 + 1e-3,
          f"{os.path.basename(path)}: {diff.max():.3f} LSB from OpenCV's "
          f"letterbox at {np.unravel_index(diff.argmax(), diff.shape)}")
    return diff.max()


# ---- the tests -----------------------------------------------------------

def test_send_images(tmp):
    """(1) Real photos through the CLI, compared with OpenCV."""
    d = Daemon(tmp)
    try:
        for path in images():
            for (w, h) in ((640, 640), (320, 256)):
                out = os.path.join(tmp, f"{os.path.basename(path)}.{w}.npy")
                cli("send", path, "--size", f"{w}x{h}", "--socket", d.url,
                    "-o", out)
                m = compare_letterbox(out, path, w, h)
                out2 = out + ".again.npy"
                cli("send", path, "--size", f"{w}x{h}", "--socket", d.url,
                    "-o", out2)
                check(np.array_equal(np.load(out), np.load(out2)),
                      f"{path}: two runs differ")
                print(f"ok {os.path.basename(path)} {w}x{h}: max "
                      f"{m:.3f} LSB from OpenCV")
    finally:
        d.stop()


def test_send_yuv(tmp):
    """The CLI's YUV conversion through the daemon: NV12, I420 and YUYV of
    each matrix and range, inline and through shared memory (bit-equal),
    give back the photograph: within the chroma subsampling's loss of the
    RGB8 tensor (mean under 1.5 LSB), and a wrong matrix is seen."""
    d = Daemon(tmp)
    try:
        path = next(p for p in images() if p.endswith("astronaut.png"))
        rgb = os.path.join(tmp, "rgb.npy")
        cli("send", path, "--socket", d.url, "-o", rgb)
        ref = np.load(rgb).astype(np.float64) * 255.0
        for fmt in ("nv12", "i420", "yuyv"):
            for matrix, rng in (("bt601", "limited"), ("bt709", "full"),
                                ("bt2020", "limited")):
                opts = ["--format", fmt, "--matrix", matrix, "--range", rng]
                out = os.path.join(tmp, f"{fmt}.npy")
                shm = os.path.join(tmp, f"{fmt}.shm.npy")
                r = cli("send", path, *opts, "--socket", d.url, "-o", out)
                check(fmt.upper().encode() in r.stdout,
                      f"{fmt}: the CLI does not say what it sent")
                cli("send", path, *opts, "--shm", "--socket", d.url,
                    "-o", shm)
                t = np.load(out)
                check(np.array_equal(t, np.load(shm)),
                      f"{fmt} {matrix} {rng}: shm differs from inline")
                mad = np.abs(t.astype(np.float64) * 255.0 - ref).mean()
                check(mad < 1.5, f"{fmt} {matrix} {rng}: {mad:.3f} LSB "
                                 f"mean from the RGB8 tensor")
                print(f"ok {fmt} {matrix} {rng}: mean {mad:.3f} LSB from "
                      f"the RGB8 tensor, shm == inline")
            # Sent as BT.709, read as BT.601: the colours move.
            out = os.path.join(tmp, "mismatch.npy")
            req = os.path.join(tmp, "req.bin")
            cli("request", path, "--format", fmt, "--matrix", "bt709",
                "-o", req)
            data = bytearray(open(req, "rb").read())
            data[18] = 1  # yuv_matrix: BT.601
            open(req, "wb").write(bytes(data))
            r = subprocess.run(["nngcat", "--req0", "--dial", d.url,
                                "--file", req, "--raw", "--recv-timeout",
                                "30"], stdout=subprocess.PIPE, timeout=60)
            check(r.returncode == 0 and len(r.stdout) > 256,
                  f"nngcat: no reply ({r.returncode})")
            t = np.frombuffer(r.stdout[256:], np.float32)
            mad = np.abs(t.astype(np.float64) * 255.0 -
                         ref.reshape(-1)).mean()
            check(mad > 2.0, f"{fmt}: a wrong matrix went unseen "
                             f"({mad:.3f} LSB)")
            print(f"ok {fmt}: read with the wrong matrix, mean {mad:.3f} "
                  f"LSB off")
    finally:
        d.stop()


def test_shm_service_user(tmp):
    """Shared memory with a daemon that runs as another user (as the packaged
    service does): the client's 0600 object gets an ACL entry for the
    daemon's uid alone, and its owner is still the client."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        raise Skip("needs root and setpriv to run the daemon as nobody")
    uid = 65534
    os.chmod(tmp, 0o755)
    run = os.path.join(tmp, "run")
    os.mkdir(run, 0o700)
    os.chown(run, uid, uid)
    d = Daemon(run, prefix=("setpriv", f"--reuid={uid}", f"--regid={uid}",
                            "--clear-groups"))
    try:
        path = images()[0]
        inline = os.path.join(tmp, "inline.npy")
        shm = os.path.join(tmp, "shm.npy")
        # A socket of another user is dialled only when named on purpose.
        trust = ("--trust-socket-owner", str(uid))
        cli("send", path, "--socket", d.url, *trust, "-o", inline)
        r = cli("send", path, "--shm", "--socket", d.url, *trust, "-o", shm,
                ok=(0, 1))
        check(r.returncode == 0,
              "shared memory with a daemon running as uid "
              f"{uid} failed:\n{r.stdout.decode()}{r.stderr.decode()}")
        check(np.array_equal(np.load(inline), np.load(shm)),
              "shared-memory tensor differs from the inline one")
        leftover = [n for n in os.listdir("/dev/shm")
                    if n.startswith("frameprep-")]
        check(not any(os.stat("/dev/shm/" + n).st_uid == uid
                      for n in leftover), "an object owned by the daemon")
        print(f"ok {os.path.basename(path)} through shared memory with the "
              f"daemon as uid {uid}, equal to inline")
    finally:
        d.stop()


def test_nngcat(tmp):
    """(2) nngcat as an independent client for a CLI-built request."""
    d = Daemon(tmp)
    try:
        for path in images()[:2]:
            req = os.path.join(tmp, "req.bin")
            rep = os.path.join(tmp, "reply.bin")
            npy = os.path.join(tmp, "reply.npy")
            cli("request", path, "-o", req)
            with open(req, "rb") as f:
                data = f.read()
            reply = nngcat(d.url, data, timeout=30)
            check(len(reply) > 0, "nngcat got no reply (timed out)")
            with open(rep, "wb") as f:
                f.write(reply)
            r = fpwire.reply(reply)
            check(r["status"] == 0, f"status {r['status_name']}: "
                                    f"{r['message']}")
            check(len(reply) == 256 + 3 * 640 * 640 * 4,
                  f"reply of {len(reply)} bytes, expected "
                  f"{256 + 3 * 640 * 640 * 4}")
            check(r["request_id"] == int.from_bytes(data[8:16], "little"),
                  "request id not echoed")
            check(r["shape"] == (1, 3, 640, 640), f"shape {r['shape']}")
            cli("reply", rep, "-o", npy)
            compare_letterbox(npy, path, 640, 640)
            print(f"ok {os.path.basename(path)}: {len(reply)} bytes")
    finally:
        d.stop()


def synthetic_requests(n):
    """n distinct small FRAME requests (random frames, various shapes)."""
    rng = np.random.default_rng(1234)
    reqs = []
    for i in range(n):
        w, h = int(rng.integers(16, 300)), int(rng.integers(16, 300))
        frame = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        reqs.append(fpwire.request(request_id=1000 + i, width=w, height=h,
                                   out_width=96, out_height=64,
                                   payload=frame.tobytes()))
    return reqs


def test_concurrent(tmp):
    """(3) 32 client processes x 4 requests at once, every reply checked
    against the same request answered alone."""
    d = Daemon(tmp, "--max-inflight", "16")
    try:
        reqs = synthetic_requests(8)
        refs = []
        for q in reqs:
            r = fpwire.reply(nngcat(d.url, q))
            check(r["status"] == 0, f"{r['status_name']}: {r['message']}")
            refs.append(r)
        script = os.path.join(tmp, "client.sh")
        paths = []
        for i, q in enumerate(reqs):
            p = os.path.join(tmp, f"q{i}.bin")
            with open(p, "wb") as f:
                f.write(q)
            paths.append(p)
        with open(script, "w") as f:
            f.write("#!/bin/sh\nset -e\nfor q in \"$@\"; do\n"
                    "  nngcat --req0 --dial " + d.url + " --file \"$q\" "
                    "--raw --recv-timeout 60 > \"$q.$$.out\"\n"
                    "  echo \"$q.$$.out\"\ndone\n")
        os.chmod(script, 0o755)
        procs = []
        for c in range(32):
            mine = [paths[(c + k) % len(paths)] for k in range(4)]
            procs.append((mine, subprocess.Popen(
                [script, *mine], stdout=subprocess.PIPE)))
        checked = 0
        for mine, p in procs:
            outs = p.communicate(timeout=120)[0].decode().split()
            check(p.returncode == 0, f"client exited {p.returncode}")
            check(len(outs) == 4, f"client produced {len(outs)} replies")
            for q, o in zip(mine, outs):
                with open(o, "rb") as f:
                    reply = f.read()
                check(reply, f"{o}: no reply (timed out)")
                r = fpwire.reply(reply)
                ref = refs[paths.index(q)]
                check(r["status"] == 0, f"{r['status_name']}: "
                                        f"{r['message']}")
                check(r["request_id"] == ref["request_id"],
                      f"request id {r['request_id']} != "
                      f"{ref['request_id']}")
                check(r["payload"] == ref["payload"],
                      f"request {ref['request_id']}: tensor differs from "
                      f"the same request answered alone")
                checked += 1
        print(f"ok {checked} concurrent replies checked")
    finally:
        d.stop()


def good_request_ok(d, rid=4242):
    r = fpwire.reply(nngcat(d.url, fpwire.request(request_id=rid)))
    check(r["status"] == 0 and r["request_id"] == rid,
          f"good request after a bad one: {r['status_name']} "
          f"{r['message']}")


def test_malformed(tmp):
    """(4) Malformed requests: an error reply naming the field, and the
    daemon keeps serving."""
    d = Daemon(tmp, "--max-width", "4096", "--max-frame-bytes", "1000000",
               "--max-tensor-bytes", "4000000")
    good = fpwire.request(request_id=77)
    cases = [
        ("truncated header", good[:60], "EPROTO", "header", 77),
        ("4 bytes", good[:4], "EPROTO", "header", 0),
        ("wrong magic", fpwire.request(magic=0x12345678), "EPROTO",
         "magic", 0),
        ("wrong version", fpwire.request(version=9, request_id=5),
         "EVERSION", "version", 5),
        ("unknown kind", fpwire.request(kind=99, request_id=6), "EINVAL",
         "kind", 6),
        ("absurd width", fpwire.request(width=100000, payload=b""),
         "ELIMIT", "src_width", 1),
        ("zero height", fpwire.request(height=0, payload=b""), "EINVAL",
         "src_height", 1),
        ("overflowing sizes", fpwire.request(width=4096, height=4000,
                                             stride=0xFFFFFFFF,
                                             input_size=(1 << 64) - 1,
                                             payload=b""),
         "ELIMIT", "stride", 1),
        ("huge input_size", fpwire.request(input_size=(1 << 63),
                                           payload=b""),
         "ELIMIT", "input_size", 1),
        ("stride too small", fpwire.request(stride=10), "EINVAL",
         "src_stride", 1),
        ("payload too short", good[:-1], "EPROTO", "payload", 77),
        ("payload too long", good + b"x", "EPROTO", "payload", 77),
        ("tensor over the limit", fpwire.request(out_width=2000,
                                                 out_height=2000),
         "ELIMIT", "max_tensor_bytes", 1),
        ("bad dtype", fpwire.request(dtype=9), "EINVAL", "dtype", 1),
        ("std zero", fpwire.request(std=(1, 0, 1)), "EINVAL", "std", 1),
        ("REGISTER with a frame header", fpwire.request(kind=4,
                                                        request_id=8),
         "EINVAL", "region name", 8),
    ]
    try:
        for name, data, status, field, rid in cases:
            reply = nngcat(d.url, data, timeout=10)
            check(reply, f"{name}: no reply")
            r = fpwire.reply(reply)
            check(r["status_name"] == status,
                  f"{name}: status {r['status_name']}, expected {status} "
                  f"({r['message']})")
            check(field in r["message"],
                  f"{name}: message '{r['message']}' does not name "
                  f"'{field}'")
            check(r["request_id"] == rid,
                  f"{name}: request id {r['request_id']}, expected {rid}")
            check(r["payload_size"] == 0, f"{name}: error with payload")
            good_request_ok(d)
            print(f"ok {name}: {status}: {r['message']}")
    finally:
        d.stop()


def test_oversized(tmp):
    """(5) A message over NNG_OPT_RECVMAXSZ: nng drops the connection, the
    daemon survives and serves others, even while that client retries."""
    d = Daemon(tmp, "--max-frame-bytes", "100000")
    try:
        big = fpwire.request(width=400, height=300, request_id=9)
        check(len(big) > 100000 + 128, "test message not oversized")
        path = os.path.join(tmp, "big.bin")
        with open(path, "wb") as f:
            f.write(big)
        bg = subprocess.Popen(["nngcat", "--req0", "--dial", d.url, "--file",
                               path, "--raw", "--recv-timeout", "3"],
                              stdout=subprocess.PIPE)
        for i in range(5):
            time.sleep(0.2)
            good_request_ok(d, 5000 + i)
        out = bg.communicate(timeout=30)[0]
        check(out == b"", f"oversized request got {len(out)} bytes back")
        check(d.alive(), "daemon died")
        good_request_ok(d)
        print("ok oversized message refused, daemon still serving")
        lines = [ln for ln in d.log_text().splitlines()
                 if f"(pid {bg.pid}, uid {os.getuid()})" in ln]
        why = f"larger than {100000 + 128} bytes (--max-frame-bytes 100000"
        check(lines and all(why in ln for ln in lines),
              f"no log line naming the dropped connection of pid {bg.pid} "
              f"and the limit ('{why}'):\n{d.log_text()}")
        print(f"ok the daemon logged the dropped connection: {lines[0]}")
    finally:
        d.stop()


def ipc_path(d):
    return d.url[len("ipc://"):]


def raw_connect(path, send=b""):
    """Connects to the daemon's socket file, sends send, and closes."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    if send:
        s.sendall(send)
    s.close()


class RawReq:
    """A REQ peer written by hand on the daemon's socket file, so that the
    test knows which connection a request travels on."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10)
        self.s.connect(path)
        self.s.sendall(b"\x00SP\x00\x00\x30\x00\x00")
        check(self.s.recv(8, socket.MSG_WAITALL)[:4] == b"\x00SP\x00",
              "no SP handshake from the daemon")
        self.next_id = 1

    def call(self, data):
        """Sends one request; returns the reply body (OSError when the
        connection broke)."""
        body = struct.pack(">I", 0x80000000 | self.next_id) + data
        self.next_id += 1
        self.s.sendall(struct.pack(">BQ", 1, len(body)) + body)
        head = self.s.recv(9, socket.MSG_WAITALL)
        if len(head) < 9:
            raise ConnectionResetError("connection closed")
        n = struct.unpack(">Q", head[1:])[0]
        return self.s.recv(n, socket.MSG_WAITALL)[4:]

    def close(self):
        self.s.close()


def info_within(d, bound, attempt_s=5):
    """Runs frameprep info until it answers, for up to bound seconds, each
    attempt given up after attempt_s (a client that connected while the
    listener was stuck is not answered, and tries again). Returns
    (seconds, attempts, last output); seconds is None on failure."""
    t0 = time.monotonic()
    attempts, out = 0, ""
    while time.monotonic() - t0 < bound:
        attempts += 1
        left = bound - (time.monotonic() - t0)
        try:
            r = subprocess.run([ARGS.cli, "info", "--socket", d.url],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT,
                               timeout=max(1.0, min(attempt_s, left)))
            out = r.stdout.decode()
            if r.returncode == 0 and "backend:" in out:
                return time.monotonic() - t0, attempts, out
        except subprocess.TimeoutExpired:
            out = f"(no answer within {attempt_s} s)"
        time.sleep(0.2)
    return None, attempts, out


def test_ipc_wedge(tmp):
    """(13) Local peers that connect and leave before the SP handshake (two
    silent ones, one that sends half a header) must not stop the ipc://
    listener accepting (nng #1518 in nng 1.5.2): a normal client is
    answered within seconds, round after round, and so is a connection
    made before; the daemon makes no connections of its own."""
    d = Daemon(tmp)
    keep = None
    try:
        keep = RawReq(ipc_path(d))
        # Answered: the daemon has taken the connection (not only its
        # handshake) before the listener gets stuck.
        check(fpwire.reply(keep.call(fpwire.request(kind=2)))["status"] == 0,
              "INFO on the long-lived connection failed")
        # The bug did not strike every round: 6 rounds.
        for rnd in range(6):
            for _ in range(5):
                raw_connect(ipc_path(d))
                raw_connect(ipc_path(d))
                raw_connect(ipc_path(d), b"\x00SP")
            dt, attempts, out = info_within(d, 15)
            check(dt is not None,
                  f"round {rnd}: frameprep info after the early-closing "
                  f"peers: no answer within 15 s ({attempts} attempts):\n"
                  f"{out}")
            print(f"ok round {rnd}: info answered in {dt:.1f} s "
                  f"({attempts} attempts)")
            try:
                r = fpwire.reply(keep.call(fpwire.request(kind=2,
                                                          request_id=rnd)))
            except OSError as e:
                raise Fail(f"round {rnd}: the connection made before the "
                           f"listener got stuck was dropped: {e}")
            check(r["status"] == 0, f"round {rnd}: INFO on the old "
                                    f"connection: {r['status_name']}")
        print("ok the connection made before stayed served")
        good_request_ok(d)
        check(f"pid {d.proc.pid}," not in d.log_text(),
              "the daemon logged connections of its own")
    finally:
        if keep is not None:
            keep.close()
        d.stop()


def test_half_open(tmp):
    """(15) Peers that connect and send nothing, or only part of the SP
    handshake, hold nothing: others are served meanwhile, and nng drops them
    after its 10 s handshake bound."""
    d = Daemon(tmp, name="ho.sock")
    held = []
    try:
        t0 = time.monotonic()
        for i in range(20):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(ipc_path(d))
            if i % 2:
                s.sendall(b"\x00SP")
            held.append(s)
        dt, attempts, out = info_within(d, 20)
        check(dt is not None, f"frameprep info beside 20 half-open peers: "
                              f"no answer within 20 s:\n{out}")
        print(f"ok info answered beside them in {dt:.1f} s "
              f"({attempts} attempts)")
        slowest = 0.0
        for s in held:
            s.settimeout(max(0.1, 30 - (time.monotonic() - t0)))
            try:
                while s.recv(64):
                    pass
            except socket.timeout:
                raise Fail("a half-open peer was still connected after "
                           "30 s")
            except ConnectionResetError:
                pass
            slowest = max(slowest, time.monotonic() - t0)
        check(slowest < 20, f"half-open peers dropped after {slowest:.1f} s")
        print(f"ok all half-open peers dropped by {slowest:.1f} s")
        dt, attempts, out = info_within(d, 20)
        check(dt is not None, f"frameprep info afterwards: no answer:\n"
                              f"{out}")
    finally:
        for s in held:
            s.close()
        d.stop()


def test_fd_exhaustion(tmp):
    """(14) A daemon out of file descriptors logs it (once), logs when they
    are available again, and then serves clients."""
    import resource

    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    d = Daemon(tmp, name="fd.sock", preexec_fn=low_nofile)
    held = []
    try:
        for _ in range(80):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(ipc_path(d))
            s.sendall(b"\x00SP\x00\x000\x00\x00")
            held.append(s)
        deadline = time.monotonic() + 15
        while ("out of file descriptors" not in d.log_text() and
               time.monotonic() < deadline):
            time.sleep(0.2)
        check("out of file descriptors" in d.log_text(),
              "no 'out of file descriptors' log line with 80 connections "
              "held and 64 descriptors")
        for s in held:
            s.close()
        held = []
        dt, attempts, out = info_within(d, 20)
        check(dt is not None, f"frameprep info after the descriptors came "
                              f"back: no answer within 20 s:\n{out}")
        deadline = time.monotonic() + 10
        while ("available again" not in d.log_text() and
               time.monotonic() < deadline):
            time.sleep(0.2)
        log = d.log_text()
        check(log.count("out of file descriptors") == 1,
              f"'out of file descriptors' logged "
              f"{log.count('out of file descriptors')} times, not once")
        check("file descriptors available again" in log,
              "no 'available again' log line")
        for ln in log.splitlines():
            if "file descriptors" in ln:
                print(f"ok logged: {ln}")
        print(f"ok info answered in {dt:.1f} s ({attempts} attempts)")
    finally:
        for s in held:
            s.close()
        d.stop()


def test_shutdown_inflight(tmp):
    """(6) SIGTERM with requests in flight: each answered (OK or
    ESHUTDOWN), exit 0 within the bound."""
    timeout_ms = 200
    d = Daemon(tmp, "--workers", "1", "--shutdown-timeout-ms",
               str(timeout_ms), "--max-inflight", "64")
    n = 40
    rng = np.random.default_rng(7)
    frame = rng.integers(0, 256, size=(1080, 1920, 3), dtype=np.uint8)
    path = os.path.join(tmp, "hd.bin")
    with open(path, "wb") as f:
        f.write(fpwire.request(width=1920, height=1080, out_width=1280,
                               out_height=1280, payload=frame.tobytes()))
    procs = [subprocess.Popen(["nngcat", "--req0", "--dial", d.url, "--file",
                               path, "--raw", "--recv-timeout", "300"],
                              stdout=subprocess.PIPE) for _ in range(n)]
    # nngcat's receive timeout bounds a hang only: with one worker, the
    # 40 frames take minutes on a loaded machine, and a request sent early
    # waits for all before it.
    try:
        # Wait until the daemon holds all of them: in flight or answered
        # (40 nngcat processes can take tens of seconds to start on a
        # loaded machine; one still starting at SIGTERM would find no
        # daemon, which is not what this test is about). served counts
        # INFO replies too: the one of Daemon.wait_ready and each poll
        # here before the current one.
        deadline = time.monotonic() + 240
        busy = polls = frames = 0
        while time.monotonic() < deadline:
            info = fpwire.reply(nngcat(d.url, fpwire.request(kind=2)))
            text = info["payload"].decode()
            busy = int(text.split("\ninflight: ")[1].split()[0])
            frames = int(text.split("\nserved: ")[1].split()[0]) - 1 - polls
            polls += 1
            if busy + frames >= n:
                break
            time.sleep(0.02)
        check(busy + frames >= n, f"only {busy + frames} of {n} requests "
              "reached the daemon in 240 s")
        check(busy > 0, "no request in flight when SIGTERM was sent")
        took = d.stop(bound=timeout_ms / 1000 + 12)
        counts = {}
        for p in procs:
            out = p.communicate(timeout=330)[0]
            check(out, "a request in flight got no reply")
            r = fpwire.reply(out)
            check(r["status_name"] in ("OK", "ESHUTDOWN"),
                  f"status {r['status_name']}: {r['message']}")
            counts[r["status_name"]] = counts.get(r["status_name"], 0) + 1
        print(f"ok {busy} in flight at SIGTERM; replies {counts}; exited "
              f"0 after {took:.2f} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        d.kill()


def test_shutdown_slow_reader(tmp):
    """SIGTERM while a client is not reading its reply (12.6 MB, far more
    than the socket holds): the daemon keeps the connection until the
    reply is written, up to the send timeout (10 s), so the client that
    reads it 2.5 s after SIGTERM gets it whole; then exits 0. A linger
    bounded at 2 s after the reply was handed on closed the pipe with the
    reply partly written (the client saw the connection close)."""
    d = Daemon(tmp, "--workers", "1", "--shutdown-timeout-ms", "20000",
               "--send-timeout-ms", "10000")
    rng = np.random.default_rng(11)
    frame = rng.integers(0, 256, size=(512, 512, 3), dtype=np.uint8)
    slow = fpwire.SpReq(d.url, timeout=30)
    try:
        slow.send(fpwire.request(width=512, height=512, out_width=1024,
                                 out_height=1024, payload=frame.tobytes(),
                                 request_id=5))
        # SIGTERM once the daemon holds the request (in flight or
        # answered), not before: one arriving while it stops is refused
        # with a small ESHUTDOWN reply, which the socket holds whole.
        # served counts INFO replies too: the one of Daemon.wait_ready and
        # each poll here before the current one.
        deadline = time.monotonic() + 60
        held = polls = 0
        while time.monotonic() < deadline and not held:
            text = fpwire.reply(nngcat(d.url, fpwire.request(kind=2)))[
                "payload"].decode()
            held = (int(text.split("\ninflight: ")[1].split()[0]) +
                    int(text.split("\nserved: ")[1].split()[0]) - 1 - polls)
            polls += 1
            if not held:
                time.sleep(0.02)
        check(held, "the daemon did not take the request in 60 s")
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        time.sleep(2.5)  # the client reads nothing meanwhile
        try:
            rid, body = slow.recv()
        except (ConnectionError, OSError, ValueError) as e:
            raise Fail(f"the reply of a client that read 2.5 s after "
                       f"SIGTERM: {e}\n{d.log_text()}")
        r = fpwire.reply(body)
        check(r["status_name"] == "OK" and r["request_id"] == 5,
              f"status {r['status_name']} (id {r['request_id']}): "
              f"{r['message']}")
        check(len(r["payload"]) == 3 * 1024 * 1024 * 4,
              f"a reply of {len(r['payload'])} tensor bytes, not "
              f"{3 * 1024 * 1024 * 4}")
        rc = d.proc.wait(20)
        check(rc == 0, f"frameprepd exited {rc}:\n{d.log_text()}")
        print(f"ok a reply read 2.5 s after SIGTERM arrived whole; exited 0 "
              f"{time.monotonic() - t0:.2f} s after SIGTERM")
    finally:
        slow.close()
        d.kill()


def test_info(tmp):
    """(7) INFO through the CLI."""
    d = Daemon(tmp, "--max-inflight", "12", "--max-frame-bytes", "5000000")
    try:
        text = cli("info", "--socket", d.url).stdout.decode()
        for want in ("version: ", "protocol: 1", "backend: cpu",
                     "device: cpu", "listen: " + d.url,
                     "max_frame_bytes: 5000000", "max_inflight: 12",
                     "max_width: ", "max_out_width: ", "max_tensor_bytes: "):
            check(want in text, f"INFO lacks '{want}':\n{text}")
        keys = [ln.split(":", 1)[0] for ln in text.splitlines()
                if ":" in ln and not ln.startswith(" ")]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        check(not dup, f"INFO repeats {dup}:\n{text}")
        print("ok INFO:\n" + text)
    finally:
        d.stop()


def run_daemon(*argv, timeout=10):
    return subprocess.run([ARGS.daemon, *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)


def test_config(tmp):
    """(8) Bad flags and config files exit 2 with a clear message; help,
    version, file + flag precedence, socket mode, refusing a second
    daemon, stale socket files."""
    sock = "ipc://" + os.path.join(tmp, "c.sock")
    bad = [
        (["--max-width", "0"], "--max-width"),
        (["--max-width", "12abc"], "--max-width"),
        (["--max-inflight", "99999999999999999999"], "--max-inflight"),
        (["--device", "gpu"], "--device"),
        (["--device", "0,0"], "listed twice"),
        (["--lanes", "0"], "--lanes"),
        (["--listen", "http://x"], "--listen"),
        (["--log-level", "loud"], "--log-level"),
        (["--slots", "1"], "--slots"),
        (["--max-inflight-per-conn", "0"], "--max-inflight-per-conn"),
        (["--max-reply-bytes", "-1"], "--max-reply-bytes"),
        (["--bogus"], "--bogus"),
        (["--max-width"], "--max-width"),
        (["stray"], "stray"),
        (["--config", os.path.join(tmp, "missing.conf")], "missing.conf"),
        (["--config", tmp], "is a directory"),
    ]
    conf = os.path.join(tmp, "bad.conf")
    for text, want in (("max-width = 0\n", "max-width"),
                       ("no-such-key = 1\n", "no-such-key"),
                       ("[other]\nmax-width = 5\n", "other"),
                       ("this is not ini\n", "bad.conf"),
                       ("", "is empty"),
                       ("\0max-width = 5\n", "not a text file"),
                       ("\x7fELF\x02\x01", "not a text file")):
        with open(conf, "w", encoding="latin-1") as f:
            f.write(text)
        r = run_daemon("--config", conf, "--listen", sock)
        check(r.returncode == 2, f"config {text!r}: exit {r.returncode}")
        check(want in r.stderr.decode(),
              f"config {text!r}: message lacks {want}: {r.stderr!r}")
    for argv, want in bad:
        r = run_daemon("--listen", sock, *argv)
        check(r.returncode == 2, f"{argv}: exit {r.returncode}, expected 2")
        check(want in r.stderr.decode(),
              f"{argv}: message lacks '{want}': {r.stderr.decode()}")
        print(f"ok {' '.join(argv)}: {r.stderr.decode().strip()}")
    r = run_daemon("--help")
    check(r.returncode == 0, "--help exit")
    for flag in ("--listen", "--config", "--device", "--lanes", "--workers",
                 "--max-inflight", "--max-inflight-per-conn",
                 "--max-reply-bytes", "--max-width", "--max-height",
                 "--max-frame-bytes", "--max-out-width", "--max-out-height",
                 "--max-tensor-bytes", "--send-timeout-ms",
                 "--shutdown-timeout-ms", "--slots", "--kernels",
                 "--kernel-cache", "--log-level", "--version"):
        check(flag in r.stdout.decode(), f"--help lacks {flag}")
    r = run_daemon("--version")
    check(r.returncode == 0 and b"frameprepd" in r.stdout, "--version")

    # The file sets limits, a flag overrides one of them.
    good = os.path.join(tmp, "good.conf")
    with open(good, "w") as f:
        f.write("# comment\n[frameprepd]\nmax-inflight = 5\n"
                "max-inflight-per-conn = 3\nmax-reply-bytes = 7654321\n"
                "max-frame-bytes = 123456\nlisten = ipc:///nonexistent/x\n")
    d = Daemon(tmp, "--config", good, "--max-frame-bytes", "654321")
    try:
        info = fpwire.reply(nngcat(d.url, fpwire.request(kind=2)))
        text = info["payload"].decode()
        check("max_inflight: 5\n" in text and
              "max_inflight_per_conn: 3\n" in text and
              "max_reply_bytes: 7654321\n" in text,
              f"file not applied:\n{text}")
        check("max_frame_bytes: 654321\n" in text,
              f"flag did not override the file:\n{text}")
        mode = stat.S_IMODE(os.stat(d.url[len("ipc://"):]).st_mode)
        check(mode == 0o600, f"socket mode {oct(mode)}, expected 0o600")
        # A second daemon on the same socket must refuse to start.
        r = run_daemon("--device", "cpu", "--listen", d.url)
        check(r.returncode == 1 and b"in use" in r.stderr,
              f"second daemon: exit {r.returncode}: {r.stderr!r}")
        good_request_ok(d)
    finally:
        d.stop()
    # A stale socket file (daemon killed) does not stop the next start.
    d = Daemon(tmp, name="stale.sock")
    d.proc.kill()
    d.proc.wait()
    check(os.path.exists(d.url[len("ipc://"):]), "no stale socket left")
    d = Daemon(tmp, name="stale.sock")
    try:
        good_request_ok(d)
    finally:
        d.stop()
    print("ok config file, precedence, socket mode, second daemon, stale "
          "socket")


def tool_run(argv, ok):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    out = r.stdout.decode() + r.stderr.decode()
    check(r.returncode in ok, f"{' '.join(argv)} exited {r.returncode}, "
                              f"expected {ok}:\n{out}")
    return out


def bench_path():
    return os.path.join(os.path.dirname(ARGS.cli), "frameprep-bench")


def test_cli_oversized(tmp):
    """A 6000x4000 photo sent inline (72 MB, over the default 64 MiB) is
    refused by the client before it is sent, naming the limit, in the CLI
    and in frameprep-bench; the daemon keeps serving."""
    import cv2
    photo = os.path.join(tmp, "photo.png")
    check(cv2.imwrite(photo, np.zeros((4000, 6000, 3), np.uint8)),
          "cannot write the test photo")
    d = Daemon(tmp)
    try:
        want = ("frame is 72000000 bytes; the daemon's max_frame_bytes is "
                "67108864 (--max-frame-bytes)")
        out = tool_run([ARGS.cli, "send", photo, "--socket", d.url], (1,))
        check(want in out and "nng error" not in out,
              f"frameprep send: {out}")
        print(f"ok frameprep send: {out.strip().splitlines()[-1]}")
        out = tool_run([bench_path(), "--socket", d.url, "--synthetic",
                        "6000x4000", "--format", "rgb8", "--requests", "4",
                        "--no-ceiling", "--quiet"], (2,))
        check(want in out, f"frameprep-bench: {out}")
        print(f"ok frameprep-bench: {want}")
        good_request_ok(d)
    finally:
        d.stop()


def png_header_only(path, width, height):
    """A PNG whose header claims width x height (no pixel data)."""
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data)))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" +
                chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2,
                                           0, 0, 0)) +
                chunk(b"IEND", b""))


def test_cli_errors(tmp):
    """Errors a newcomer can act on: addresses checked like the daemon's,
    a missing socket directory named, the daemon-not-running hint, image
    errors that say what happened, help without internal names, and
    frameprepd's -h and --max-frame-bytes bound."""
    missing_dir = os.path.join(tmp, "no-such-dir")
    cases = [
        (["info", "--socket", "/tmp/x.sock"], 2,
         "'/tmp/x.sock' is not an ipc:// or tcp:// URL"),
        (["info", "--socket", "tcp://127.0.0.1"], 2, "has no port"),
        (["info", "--socket", f"ipc://{missing_dir}/d.sock"], 3,
         f"the directory {missing_dir} does not exist"),
        (["info", "--socket", f"ipc://{tmp}/none.sock"], 3,
         "is frameprepd running?"),
        (["send", os.path.join(tmp, "missing.png"), "--socket",
          f"ipc://{tmp}/none.sock"], 3, "No such file or directory"),
    ]
    garbage = os.path.join(tmp, "garbage.png")
    with open(garbage, "wb") as f:
        f.write(b"this is not an image\n" * 10)
    cases.append((["send", garbage], 3, "cannot decode image: "))
    # A photograph cut short says so, in each format stb_image reads.
    import cv2
    photo = np.random.default_rng(5).integers(0, 256, (96, 128, 3),
                                              np.uint8)
    for ext in ("png", "jpg", "bmp"):
        ok, data = cv2.imencode("." + ext, photo)
        check(ok, f"cv2.imencode {ext}")
        cut = os.path.join(tmp, f"cut.{ext}")
        with open(cut, "wb") as f:
            f.write(data.tobytes()[:len(data) // 2])
        cases.append((["send", cut], 3, "the file is truncated"))
    cases.append((["send", garbage, "--size", "0x0"], 2,
                  "bad value '0x0' for --size: WxH, width and height each "
                  "1..65535"))
    huge = os.path.join(tmp, "huge.png")
    png_header_only(huge, 20000, 20000)
    cases.append((["send", huge], 3, "20000x20000 pixels, too large"))
    out = tool_run([ARGS.cli, "send", huge], (3,))
    check("unknown image type" not in out, f"send huge.png: {out}")
    for argv, status, want in cases:
        out = tool_run([ARGS.cli, *argv], (status,))
        check(want in out, f"frameprep {' '.join(argv)}: lacks '{want}':\n"
                           f"{out}")
        check("nng error" not in out, f"frameprep {' '.join(argv)}: {out}")
        print(f"ok frameprep {' '.join(argv)}: {out.strip()}")

    # --shm over tcp://: the daemon refuses the REGISTER, and the CLI
    # exits 1 ("refused by the daemon"), as its --help says.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    d = Daemon(tmp, "--listen", f"tcp://127.0.0.1:{port}", name="t.sock")
    try:
        ok_png = os.path.join(tmp, "ok.png")
        check(cv2.imwrite(ok_png, photo), "cv2.imwrite")
        out = tool_run([ARGS.cli, "send", ok_png, "--shm", "--socket",
                        f"tcp://127.0.0.1:{port}"], (1,))
        check("ipc://" in out, f"send --shm over tcp://: {out}")
        print(f"ok frameprep send --shm over tcp://: exit 1: "
              f"{out.strip().splitlines()[-1]}")
    finally:
        d.stop()

    helps = [[ARGS.cli, "--help"], [ARGS.daemon, "-h"],
             [ARGS.daemon, "--help"], [bench_path(), "--help"]]
    for cmd in ("send", "info", "request", "reply"):
        helps.append([ARGS.cli, cmd, "--help"])
    for argv in helps:
        out = tool_run(argv, (0,))
        check("--" in out, f"{' '.join(argv)}: no options listed")
        for internal in ("nng", "fprep_"):
            check(internal not in out,
                  f"{' '.join(argv)} shows '{internal}':\n{out}")
    print("ok help texts without internal names; frameprepd -h")

    r = run_daemon("--listen", f"ipc://{tmp}/m.sock", "--max-frame-bytes",
                   "4294967296")
    check(r.returncode == 2 and b"--max-frame-bytes" in r.stderr,
          f"--max-frame-bytes 4294967296: exit {r.returncode}: {r.stderr!r}")
    print(f"ok {r.stderr.decode().strip()}")


def test_systemd_notify(tmp):
    """sd_notify: READY=1 once listening, STOPPING=1 on SIGTERM."""
    import socket
    path = os.path.join(tmp, "notify.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(path)
    ns.settimeout(10)
    os.environ["NOTIFY_SOCKET"] = path
    try:
        d = Daemon(tmp)
    finally:
        del os.environ["NOTIFY_SOCKET"]
    try:
        first = ns.recv(4096).decode()
        check("READY=1" in first.split("\n"), f"first notification: {first!r}")
        good_request_ok(d)
    finally:
        d.stop()
    rest = ns.recv(4096).decode()
    check("STOPPING=1" in rest.split("\n"), f"on SIGTERM: {rest!r}")
    ns.close()
    print(f"ok notifications {first!r} then {rest!r}")


def test_systemd_watchdog(tmp):
    """WatchdogSec: with WATCHDOG_USEC the loop sends WATCHDOG=1 at half
    the period, from READY=1 until STOPPING=1; without it, none. Counted
    between those two messages' arrivals, so start-up and shutdown under
    load do not widen the window; the bounds are systemd's own (at least
    one keep-alive per period) and the daemon's (not more than one per
    half period)."""
    import socket
    import threading
    for usec in (300000, None):
        path = os.path.join(tmp, f"notify{usec}.sock")
        ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        ns.bind(path)
        ns.settimeout(0.2)
        env = {"NOTIFY_SOCKET": path}
        if usec:
            env["WATCHDOG_USEC"] = str(usec)
        # Read as systemd does, at once: a unix datagram socket queues
        # only 10 messages, and sd_notify then blocks. Each line is kept
        # with its arrival time.
        got = []
        done = threading.Event()

        def read():
            while not done.is_set():
                try:
                    data = ns.recv(4096).decode()
                except socket.timeout:
                    continue
                now = time.monotonic()
                got.extend((now, ln) for ln in data.split("\n"))
        reader = threading.Thread(target=read)
        reader.start()
        try:
            d = Daemon(tmp, name=f"wd{usec}.sock", env=env)
            time.sleep(1.5)
            d.stop()
        finally:
            done.set()
            reader.join()
            ns.close()
        lines = [ln for _, ln in got]
        check("READY=1" in lines and "STOPPING=1" in lines,
              f"READY=1 and STOPPING=1 expected, got {lines}")
        t0 = next(t for t, ln in got if ln == "READY=1")
        t1 = next(t for t, ln in got if ln == "STOPPING=1")
        n = sum(1 for t, ln in got if ln == "WATCHDOG=1" and t0 <= t <= t1)
        window = t1 - t0
        print(f"WATCHDOG_USEC={usec}: {n} keep-alives in the "
              f"{window:.2f} s from READY=1 to STOPPING=1")
        if usec:
            # systemd kills a unit that is silent for a whole period
            # (0.3 s); the daemon sends one every half period (0.15 s).
            check(window / 0.3 - 1 <= n <= window / 0.15 + 2,
                  f"{n} keep-alives in {window:.2f} s: systemd needs one "
                  f"every 0.3 s, the daemon sends one every 0.15 s")
        else:
            check(lines.count("WATCHDOG=1") == 0,
                  f"{lines.count('WATCHDOG=1')} keep-alives without "
                  f"WATCHDOG_USEC")
    print("ok systemd watchdog")


def vmrss(pid):
    """The process's resident set, bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise Fail(f"no VmRSS for pid {pid}")


def info_latencies(url, n, bound_s):
    """Up to n INFO round trips on one connection, one at a time; their
    latencies in seconds. One not answered within bound_s counts as
    bound_s and ends the series."""
    c = fpwire.SpReq(url, timeout=bound_s)
    lat = []
    try:
        for i in range(n):
            t0 = time.monotonic()
            c.send(fpwire.request(kind=2, request_id=i))
            try:
                _, body = c.recv()
            except TimeoutError:
                lat.append(bound_s)
                break
            lat.append(time.monotonic() - t0)
            check(fpwire.reply(body)["status"] == 0, "INFO failed")
            time.sleep(0.002)
    finally:
        c.close()
    return lat


def p99(lat):
    return sorted(lat)[int(len(lat) * 0.99) - 1]


def test_flood(tmp):
    """A client that pipelines requests for large tensors and never reads
    the replies: a well-behaved client's INFO keeps its latency (p99 within
    2x of alone, with a floor), the daemon's memory stays bounded, and the
    requests past the connection's limits get EBUSY. The latency floor
    (50 ms; 200 ms for a daemon built with a sanitizer, whose every memory
    access is checked) absorbs the CPU and page faults of the flooder's
    accepted work on a small, shared machine; a starved client waits for
    the send timeout (30 s)."""
    import threading
    d = Daemon(tmp, "--send-timeout-ms", "30000", "--log-level", "info",
               "--workers", "1")
    floor_s, n, mib = 0.050, 600, 1 << 20
    flooders, threads = [], []
    with open(f"/proc/{d.proc.pid}/maps") as m:
        maps = m.read()
    tsan = "libtsan" in maps
    if tsan or "libasan" in maps:
        floor_s = 0.200
    try:
        alone = info_latencies(d.url, n, 5.0)
        base = vmrss(d.proc.pid)
        peak = [base]
        done = threading.Event()

        def sample():
            while not done.is_set() and d.alive():
                peak[0] = max(peak[0], vmrss(d.proc.pid))
                time.sleep(0.01)

        def flood(c, reqs):
            """Sends reqs[0], waits until its reply has begun to arrive
            (the daemon's send of 48 MiB is then stuck behind a reader
            that never reads: the socket is readable, and left so), then
            sends the rest. A fixed pause was not enough on a loaded
            machine: a reply not yet begun leaves the pipe free, the
            refusals go out at once and the connection is never found
            not reading."""
            import select
            try:
                c.send(reqs[0])
                ready, _, _ = select.select([c.sock], [], [], 60)
                begun[0] = bool(ready)
                for q in reqs[1:]:
                    c.send(q)
            except OSError:
                pass  # closed by the daemon

        # 20 requests for 3 MiB tensors, read later: 16 accepted, 4
        # refused (20 replies held, within the connection's share of the
        # slots, a third of --max-inflight's 64). A request counts against
        # --max-inflight-per-conn until its work is done, so the daemon's
        # one worker is held stopped while they arrive: otherwise a worker
        # that keeps up with the sender (a loaded machine slows the
        # sender) never has 17 in flight. The 4 refusals come back while
        # it is held, which says all 20 were taken.
        small = [fpwire.request(request_id=100 + i, out_width=512,
                                out_height=512) for i in range(20)]
        workers = threads_named(d.proc.pid, "fp-cpu-worker")
        check(len(workers) == 1, f"worker threads: {workers}")
        c = fpwire.SpReq(d.url, timeout=30)
        flooders.append(c)
        held = ThreadStop(workers[0])
        try:
            for q in small:
                c.send(q)
            early = [fpwire.reply(c.recv()[1]) for _ in range(4)]
        finally:
            held.release()
        check(all(r["status_name"] == "EBUSY" for r in early),
              f"with the worker held, 20 pipelined requests: the first 4 "
              f"replies {[r['status_name'] for r in early]}, not EBUSY")
        for r in early:
            check("--max-inflight-per-conn 16" in r["message"],
                  f"EBUSY message: {r['message']!r}")
        # Then 70 for 48 MiB tensors (2048x2048x3 float32), never read,
        # the first alone so that its reply fills the connection and the
        # refusals pile up behind it.
        big = [fpwire.request(request_id=200 + i, out_width=2048,
                              out_height=2048) for i in range(70)]
        c = fpwire.SpReq(d.url, timeout=30)
        flooders.append(c)
        begun = [False]
        threads.append(threading.Thread(target=flood, args=(c, big)))
        threads.append(threading.Thread(target=sample))
        for t in threads:
            t.start()
            time.sleep(0.3)
        flooded = info_latencies(d.url, n, 5.0)
        time.sleep(1.0)
        done.set()
        for t in threads:
            t.join(60)
        a, f = p99(alone), p99(flooded)
        grown = (peak[0] - base) / mib
        print(f"INFO p99 alone {a * 1000:.2f} ms, beside the flood "
              f"{f * 1000:.2f} ms (max {max(flooded) * 1000:.2f} ms); "
              f"daemon VmRSS grew {grown:.0f} MiB")
        check(len(flooded) == n,
              f"INFO {len(flooded) - 1} not answered within 5 s")
        check(f <= 2 * max(a, floor_s),
              f"INFO p99 {f * 1000:.2f} ms beside the flood, over 2x "
              f"max(alone {a * 1000:.2f} ms, {floor_s * 1000:.0f} ms)")
        # ThreadSanitizer's shadow memory counts in VmRSS: about twice as
        # much there. Without the reply budget it grew by over 2 GiB.
        rss_bound = 1536 if tsan else 640
        check(grown <= rss_bound,
              f"daemon VmRSS grew {grown:.0f} MiB under one flooding "
              f"connection (bound {rss_bound} MiB"
              f"{' under ThreadSanitizer' if tsan else ''})")
        status = {}
        for _ in range(len(small) - len(early)):
            _, body = flooders[0].recv()
            r = fpwire.reply(body)
            status[r["status_name"]] = status.get(r["status_name"], 0) + 1
        print(f"reading client: 4 EBUSY while the worker was held, then "
              f"{status}")
        check(status == {"OK": len(small) - len(early)},
              f"the {len(small) - len(early)} accepted requests answered "
              f"{status}")
        check(begun[0], "the first 48 MiB reply did not begin within 60 s")
        log = d.log_text()
        check("--max-reply-bytes" in log,
              "no EBUSY for the reply byte share in the log")
        check("does not read its replies" in log,
              "the never-reading connection was not closed")
        check(fpwire.reply(nngcat(d.url, fpwire.request(kind=2)))["status"]
              == 0, "INFO after the flood")
        print("ok flooding connection held to its share")
    finally:
        for c in flooders:
            c.close()
        if d.alive():
            d.stop(60)


def test_reply_budget(tmp):
    """--max-reply-bytes across connections: a connection's tensor that
    does not fit beside the replies in flight gets EBUSY naming it; with
    nothing in flight any tensor within the limits is served."""
    budget, mib = 10 << 20, 1 << 20
    d = Daemon(tmp, "--max-inflight-per-conn", "64", "--max-reply-bytes",
               str(budget), "--send-timeout-ms", "30000")
    a = b = None
    try:
        # a: six 3 MiB tensors pipelined, not read yet.
        a = fpwire.SpReq(d.url)
        for i in range(6):
            a.send(fpwire.request(request_id=10 + i, out_width=512,
                                  out_height=512))
        time.sleep(1.0)
        # b: one 12 MiB tensor (1024x1024x3 float32), over what is left.
        b = fpwire.SpReq(d.url)
        big = fpwire.request(request_id=99, out_width=1024, out_height=1024)
        b.send(big)
        r = fpwire.reply(b.recv()[1])
        print(f"beside a's replies: {r['status_name']}: {r['message']}")
        check(r["status_name"] == "EBUSY" and
              f"of --max-reply-bytes {budget}" in r["message"],
              f"12 MiB tensor beside 6 MiB in flight: {r['status_name']} "
              f"{r['message']!r}")
        b.send(fpwire.request(kind=2))
        info = fpwire.reply(b.recv()[1])["payload"].decode()
        held = int(info.split("\nreply_bytes: ")[1].split()[0])
        check(0 < held <= budget, f"INFO reply_bytes {held}")
        status = {}
        for _ in range(6):
            r = fpwire.reply(a.recv()[1])
            status[r["status_name"]] = status.get(r["status_name"], 0) + 1
            if r["status_name"] == "EBUSY":
                check("--max-reply-bytes" in r["message"],
                      f"EBUSY message {r['message']!r}")
        print(f"a's six 3 MiB tensors: {status}; INFO reply_bytes was "
              f"{held / mib:.0f} MiB")
        check(status.get("EBUSY", 0) >= 1 and status.get("OK", 0) >= 3,
              f"a's replies {status}")
        time.sleep(0.2)
        b.send(big)
        r = fpwire.reply(b.recv()[1])
        check(r["status"] == 0 and r["tensor_size"] == 12 * mib,
              f"12 MiB tensor with nothing in flight: {r['status_name']} "
              f"{r['message']!r}")
        print("ok reply byte budget across connections")
    finally:
        for c in (a, b):
            if c is not None:
                c.close()
        d.stop()


def test_flood_shutdown(tmp):
    """SIGTERM after the daemon closed connections that flooded it without
    reading their replies: it exits 0 within the shutdown timeout plus a
    margin. The daemon closes each such connection while the client is
    still sending; nng 1.5.2 then never finished closing some of them, and
    nng_close waited for them until the watchdog ended the process with
    status 1 (nearly every round). Eight clients at once, three rounds."""
    import threading
    q = fpwire.request(width=256, height=256, out_width=1024,
                       out_height=1024)

    def flood(url):
        try:
            c = fpwire.SpReq(url, timeout=30)
            try:
                for _ in range(400):
                    c.send(q)
            finally:
                c.close()
        except OSError:
            pass  # closed by the daemon

    for rnd in range(3):
        d = Daemon(tmp, "--max-inflight-per-conn", "2", "--workers", "1",
                   "--log-level", "info", name=f"d{rnd}.sock")
        try:
            threads = [threading.Thread(target=flood, args=(d.url,))
                       for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            log = d.log_text()
            closed = log.count("does not read its replies")
            check(closed >= 1, "no flooding connection was closed")
            # Shutdown timeout 10 s; the watchdog fires 10 s later.
            took = d.stop(30)
        finally:
            d.kill()
        print(f"round {rnd}: {closed} connections closed for not reading; "
              f"exited 0 {took:.1f} s after SIGTERM")
    print("ok shutdown after flooding connections were closed")


def test_shutdown_prompt(tmp):
    """SIGTERM exits as soon as every accepted request was answered and its
    reply written: with an idle connected client in well under 0.5 s (no
    fixed linger); a client that sends while the daemon drains gets an
    ESHUTDOWN reply, not a reset; a slow reader's pipelined replies all
    arrive whole."""
    bound = 0.5
    # ThreadSanitizer sleeps 1 s at exit unless told not to.
    env = {"TSAN_OPTIONS": (os.environ.get("TSAN_OPTIONS", "") +
                            " atexit_sleep_ms=0").strip()}
    d = Daemon(tmp, name="idle.sock", env=env)
    idle = fpwire.SpReq(d.url, timeout=10)
    try:
        idle.send(fpwire.request(kind=2))
        r = fpwire.reply(idle.recv()[1])
        check(r["status_name"] == "OK", f"INFO: {r['status_name']}")
        took = d.stop(bound=10)
        check(took < bound, f"exited {took:.3f} s after SIGTERM with an idle "
                            f"client connected (bound {bound} s)")
        print(f"ok idle client connected: exited {took * 1000:.0f} ms after "
              f"SIGTERM")
    finally:
        idle.close()
        d.kill()

    # One worker, a connection with n large requests pipelined: the drain
    # lasts; a second connection sends INFO meanwhile.
    d = Daemon(tmp, "--workers", "1", "--max-inflight", "64",
               "--shutdown-timeout-ms", "20000", name="drain.sock", env=env)
    n = 12
    rng = np.random.default_rng(5)
    frame = rng.integers(0, 256, size=(1080, 1920, 3), dtype=np.uint8)
    req = fpwire.request(width=1920, height=1080, out_width=640,
                         out_height=640, payload=frame.tobytes())
    busy = fpwire.SpReq(d.url, timeout=60)
    late = fpwire.SpReq(d.url, timeout=20)
    try:
        for _ in range(n):
            busy.send(req)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            text = fpwire.reply(nngcat(d.url, fpwire.request(kind=2)))[
                "payload"].decode()
            if int(text.split("\ninflight: ")[1].split()[0]) >= 2:
                break
            time.sleep(0.005)
        t0 = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while ("shutting down" not in d.log_text() and
               time.monotonic() < deadline):
            time.sleep(0.005)
        check(d.alive(), "the daemon exited before the late request was "
                         "sent: the drain was too short to test")

        def late_reply(kind, request_id, what):
            late.send(fpwire.request(kind=kind, request_id=request_id))
            try:
                return fpwire.reply(late.recv()[1])
            except (ConnectionError, OSError) as e:
                raise Fail(f"{what} sent while draining: {e}, not a "
                           f"reply:\n{d.log_text()}")

        # INFO is still answered while draining, and says so.
        r = late_reply(2, 98, "INFO")
        check(r["status_name"] == "OK" and
              "\ndraining: true\n" in r["payload"].decode(),
              f"INFO sent while draining got {r['status_name']} "
              f"({r['message']}), not OK with draining: true")
        r = late_reply(3, 99, "a request")
        check(r["status_name"] == "ESHUTDOWN" and r["request_id"] == 99,
              f"a request sent while draining got {r['status_name']} "
              f"(id {r['request_id']}): {r['message']}")
        late_msg = r["message"]
        check(d.alive(), "the daemon exited before the drain was over")
        time.sleep(0.3)  # a slow reader: its replies wait on the pipe
        counts = {}
        for _ in range(n):
            try:
                r = fpwire.reply(busy.recv()[1])
            except (ConnectionError, OSError, ValueError) as e:
                raise Fail(f"a pipelined request's reply: {e} (got "
                           f"{counts})\n{d.log_text()}")
            check(r["status_name"] in ("OK", "ESHUTDOWN"),
                  f"status {r['status_name']}: {r['message']}")
            counts[r["status_name"]] = counts.get(r["status_name"], 0) + 1
        rc = d.proc.wait(20)
        took = time.monotonic() - t0
        check(rc == 0, f"frameprepd exited {rc}:\n{d.log_text()}")
        print(f"ok sent while draining: INFO answered (draining: true), "
              f"ECHO ESHUTDOWN ({late_msg!r}); "
              f"{n} pipelined replies whole {counts}; exited {took:.2f} s "
              f"after SIGTERM")
    finally:
        busy.close()
        late.close()
        d.kill()


def tests_of(names):
    """The tests among a module's names (its globals()): each test_*
    function, by its name without the prefix."""
    return {name[5:]: fn for name, fn in names.items()
            if name.startswith("test_")}


TESTS = tests_of(globals())


def run(names):
    """Runs, as main() does, one of the tests of another module (names: its
    globals()), with this driver's arguments, scratch directory and logs on
    failure; returns the exit status."""
    TESTS.clear()
    TESTS.update(tests_of(names))
    return main()


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("test", choices=sorted(TESTS))
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--images")
    ARGS = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fprep-it-")
    try:
        TESTS[ARGS.test](tmp)
    except Skip as e:
        print(f"SKIP {ARGS.test}: {e}")
        return 77
    except Fail as e:
        print(f"FAIL {ARGS.test}: {e}", file=sys.stderr)
        for name in sorted(os.listdir(tmp)):
            if name.endswith(".log"):
                with open(os.path.join(tmp, name), errors="replace") as f:
                    print(f"--- {name}\n{f.read()[-4000:]}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS {ARGS.test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
