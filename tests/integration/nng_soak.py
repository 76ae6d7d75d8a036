#!/usr/bin/python3
"""nng_soak.py: two hostile-client soaks of a frameprepd binary, for an
operator (long: d1 and kill9 are not part of the test suite; d4 is). CPU backend, a private socket.

  nng_soak.py FRAMEPREPD d1 ROUNDS SECONDS
      32 connections send FRAME requests (256x256 -> 1024x1024) without
      reading a reply, then close mid-message; ROUNDS rounds of SECONDS s.
      Prints the daemon's open fds after each round and while idle after,
      its RSS, and whether an INFO still answers. With nng 1.5.2 the fds
      grow ~100 a round and ~2/s while idle (its pipe reaper gets stuck:
      10 rounds of 35 s reach ~1000 fds); with nng 1.11 (the bundled
      one) they stay at 12.
  nng_soak.py FRAMEPREPD d4
      64 connections close early (before or during the SP handshake), then
      200 INFO requests on new connections; prints how many were lost and
      client errors by kind (nng #1518 on 1.5.2: all 200 lost; 1.11: 0);
      exits 1 if any was lost (CI runs it: integration_nng_d4).
  nng_soak.py FRAMEPREPD kill9 SECONDS [CLIENTS]
      CLIENTS (default 6) client processes send FRAME requests (one of 8
      fixed 40x30 frames each, -> 24x24 f32) one at a time and compare
      each tensor with the first reply the daemon gave for that frame;
      every 0.1-0.5 s one of them is killed with SIGKILL (often while a
      request or reply is on the wire) and a new one started. At the end:
      replies verified, requests lost (no reply within 5 s, or a reply
      that differs: the client says which), clients killed, and the
      daemon's fds, RSS and INFO.
"""
import os, socket, struct, subprocess, sys, tempfile, threading, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fpwire

ERRS = {}
HELLO = b"\x00SP\x00\x00\x30\x00\x00"

def nfds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))

def start(daemon, tmp, extra=()):
    path = os.path.join(tmp, "r.sock")
    log = open(os.path.join(tmp, "d.log"), "wb")
    p = subprocess.Popen([daemon, "--device", "cpu", "--listen", "ipc://" + path,
                          "--workers", "2", *extra], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            if info(path, 1.0):
                return p, path
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("daemon did not start")

def info(path, timeout):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(HELLO)
        if s.recv(8, socket.MSG_WAITALL)[:4] != b"\x00SP\x00":
            return False
        body = struct.pack(">I", 0x80000001) + fpwire.request(kind=2)
        s.sendall(struct.pack(">BQ", 1, len(body)) + body)
        head = s.recv(9, socket.MSG_WAITALL)
        if len(head) < 9:
            return False
        n = struct.unpack(">Q", head[1:])[0]
        return fpwire.reply(s.recv(n, socket.MSG_WAITALL)[4:])["status"] == 0
    except (OSError, ValueError) as e:
        ERRS[type(e).__name__ + ":" + str(getattr(e, "errno", ""))] = ERRS.get(type(e).__name__ + ":" + str(getattr(e, "errno", "")), 0) + 1
        return False
    finally:
        s.close()

def nonreader(path, secs, req, stop):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(1.0)
        s.connect(path)
        s.sendall(HELLO)
        s.recv(8, socket.MSG_WAITALL)
        t0, i = time.monotonic(), 0
        msgs = []
        while time.monotonic() - t0 < secs:
            i += 1
            body = struct.pack(">I", 0x80000000 | i) + req
            msg = struct.pack(">BQ", 1, len(body)) + body
            try:
                s.sendall(msg)
            except socket.timeout:
                pass  # the daemon stopped reading: part of it went
            except OSError:
                break
        try:  # close mid-message: a header and half of a body
            s.settimeout(0.5)
            s.send(msg[:len(msg) // 2])
        except OSError:
            pass
        s.close()
    except OSError:
        pass

def d1(daemon, rounds, round_s):
    with tempfile.TemporaryDirectory() as tmp:
        p, path = start(daemon, tmp)
        req = fpwire.request(kind=1, width=256, height=256, out_width=1024, out_height=1024)
        print(f"D1 start fds={nfds(p.pid)}", flush=True)
        for r in range(rounds):
            th = [threading.Thread(target=nonreader, args=(path, round_s, req, None)) for _ in range(32)]
            for t in th: t.start()
            for t in th: t.join()
            time.sleep(1.0)
            print(f"D1 round {r}: fds={nfds(p.pid)} info={'ok' if info(path, 5) else 'FAILED'}", flush=True)
        time.sleep(5)
        a = nfds(p.pid)
        time.sleep(10)
        b = nfds(p.pid)
        ok = info(path, 5)
        rss = open(f"/proc/{p.pid}/status").read().split("VmRSS:")[1].split()[0]
        print(f"D1 after 10 rounds: fds={a}, 10 s idle later fds={b}, info={'ok' if ok else 'FAILED'}, rss={rss} kB", flush=True)
        print(f"D1 client errors {ERRS}", flush=True)
        p.terminate(); p.wait(20)
        return a, b

def d4(daemon):
    with tempfile.TemporaryDirectory() as tmp:
        p, path = start(daemon, tmp)
        for i in range(64):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            if i % 3 == 2:
                s.sendall(b"\x00SP")
            s.close()
        lost = 0
        t0 = time.monotonic()
        for i in range(200):
            if not info(path, 5):
                lost += 1
        print(f"D4: 64 early closes, then 200 requests: {lost} lost ({time.monotonic()-t0:.1f} s); client errors {ERRS}", flush=True)
        p.terminate(); p.wait(20)
        return lost

K9_FRAMES = 8
K9_REPLY_S = 5.0


def k9_request(i, rid):
    return fpwire.request(kind=1, request_id=rid, width=40, height=30,
                          out_width=24, out_height=24,
                          payload=bytes((i * 31 + k * 7) & 255
                                        for k in range(40 * 30 * 3)))


def k9_call(s, i, rid):
    """One FRAME on connected SP socket s; returns the reply's tensor."""
    body = struct.pack(">I", 0x80000000 | (rid & 0x7fffffff)) + \
        k9_request(i, rid)
    s.sendall(struct.pack(">BQ", 1, len(body)) + body)
    head = s.recv(9, socket.MSG_WAITALL)
    if len(head) < 9:
        raise OSError("connection closed")
    n = struct.unpack(">Q", head[1:])[0]
    data = s.recv(n, socket.MSG_WAITALL)
    if len(data) < n:
        raise OSError("connection closed mid-reply")
    r = fpwire.reply(data[4:])
    if r["status"] != 0 or r["request_id"] != rid:
        raise ValueError(f"{r['status_name']} id {r['request_id']} "
                         f"(sent {rid}): {r['message']}")
    return r["payload"]


def k9_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(K9_REPLY_S)
    s.connect(path)
    s.sendall(HELLO)
    if s.recv(8, socket.MSG_WAITALL)[:4] != b"\x00SP\x00":
        raise OSError("no SP handshake")
    return s


def k9_client(path, refdir, out, seed):
    """A client process: counts in out (ok lost), rewritten every 50
    replies and at each loss; losses also described in out.lost."""
    import random
    rnd = random.Random(seed)
    refs = [open(os.path.join(refdir, f"{i}.ref"), "rb").read()
            for i in range(K9_FRAMES)]
    ok = lost = 0
    rid = seed * 1000003

    def save():
        with open(out + ".tmp", "w") as f:
            f.write(f"{ok} {lost}\n")
        os.replace(out + ".tmp", out)

    s = k9_connect(path)
    while True:
        i = rnd.randrange(K9_FRAMES)
        rid += 1
        try:
            t = k9_call(s, i, rid)
            if t != refs[i]:
                raise ValueError(f"frame {i}: tensor differs")
            ok += 1
            if ok % 50 == 0:
                save()
        except (OSError, ValueError) as e:
            lost += 1
            with open(out + ".lost", "a") as f:
                f.write(f"{time.time():.3f} {type(e).__name__}: {e}\n")
            save()
            s.close()
            s = k9_connect(path)


def kill9(daemon, seconds, nclients):
    import random, signal
    rnd = random.Random(1)
    with tempfile.TemporaryDirectory() as tmp:
        p, path = start(daemon, tmp, ("--log-level", "notice"))
        s = k9_connect(path)
        for i in range(K9_FRAMES):
            with open(os.path.join(tmp, f"{i}.ref"), "wb") as f:
                f.write(k9_call(s, i, i + 1))
        s.close()
        fd0 = nfds(p.pid)
        me = os.path.abspath(__file__)
        procs, seq, killed = {}, 0, 0

        def spawn():
            nonlocal seq
            seq += 1
            out = os.path.join(tmp, f"c{seq}.txt")
            procs[seq] = subprocess.Popen(
                [sys.executable, me, "_k9client", path, tmp, out, str(seq)])

        for _ in range(nclients):
            spawn()
        t_end = time.monotonic() + seconds
        next_report = time.monotonic() + 60
        while time.monotonic() < t_end:
            time.sleep(rnd.uniform(0.1, 0.5))
            victim = rnd.choice(list(procs))
            procs[victim].send_signal(signal.SIGKILL)
            procs.pop(victim).wait()
            killed += 1
            spawn()
            if p.poll() is not None:
                print(f"kill9: the daemon exited ({p.returncode})")
                break
            if time.monotonic() >= next_report:
                next_report += 60
                print(f"kill9: {int(seconds - (t_end - time.monotonic()))} s:"
                      f" {killed} clients killed, daemon fds {nfds(p.pid)}",
                      flush=True)
        for c in procs.values():
            c.send_signal(signal.SIGKILL)
            c.wait()
        ok = lost = 0
        for name in os.listdir(tmp):
            if name.startswith("c") and name.endswith(".txt"):
                a, b = open(os.path.join(tmp, name)).read().split()
                ok, lost = ok + int(a), lost + int(b)
        losses = "".join(open(os.path.join(tmp, n)).read()
                         for n in sorted(os.listdir(tmp))
                         if n.endswith(".lost"))
        time.sleep(2)
        alive = p.poll() is None
        fd1 = nfds(p.pid) if alive else -1
        rss = open(f"/proc/{p.pid}/status").read().split("VmRSS:")[1] \
            .split()[0] if alive else "-"
        ok_info = alive and info(path, 5)
        print(f"kill9: {seconds} s, {nclients} clients: {ok} replies "
              f"verified (at least: a killed client's last <50 are not "
              f"counted), {lost} lost, {killed} clients killed; daemon "
              f"{'alive' if alive else 'GONE'}, fds {fd0} -> {fd1}, rss "
              f"{rss} kB, INFO {'ok' if ok_info else 'FAILED'}", flush=True)
        if losses:
            print("kill9: losses:\n" + losses[-3000:], flush=True)
        if alive:
            p.terminate()
            p.wait(30)
        return lost


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "_k9client":
        k9_client(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        raise SystemExit(0)
    if len(sys.argv) < 3 or sys.argv[2] not in ("d1", "d4", "kill9") or \
            (sys.argv[2] == "d1" and len(sys.argv) != 5):
        raise SystemExit(__doc__)
    daemon, what = sys.argv[1], sys.argv[2]
    if what == "kill9":
        kill9(daemon, float(sys.argv[3]),
              int(sys.argv[4]) if len(sys.argv) > 4 else 6)
    elif what == "d4":
        raise SystemExit(1 if d4(daemon) else 0)
    else:
        d1(daemon, int(sys.argv[3]), float(sys.argv[4]))
