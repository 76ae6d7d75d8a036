#!/usr/bin/python3
"""nng_soak.py: two hostile-client soaks of a frameprepd binary, for an
operator (long: not part of the test suite). CPU backend, a private socket.

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
      client errors by kind (nng #1518 on 1.5.2: all 200 lost; 1.11: 0).
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

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[2] not in ("d1", "d4") or \
            (sys.argv[2] == "d1" and len(sys.argv) != 5):
        raise SystemExit(__doc__)
    daemon, what = sys.argv[1], sys.argv[2]
    if what == "d4":
        d4(daemon)
    else:
        d1(daemon, int(sys.argv[3]), float(sys.argv[4]))
