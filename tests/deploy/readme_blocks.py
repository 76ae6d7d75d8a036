#!/usr/bin/python3
"""readme_blocks.py: runs the shell blocks of README.md as a reader would.

Every ```sh or ```bash block of the README runs, as written, with
`bash -e -o pipefail` (so a failing command fails the block), unless an
HTML comment on the line just before its fence says otherwise:

  <!-- ci: skip (REASON) -->   not run here; REASON says why (a GPU, root
                               and systemd, other hosts, a whole rebuild
                               that CI does as .ci/run...). A skip without a
                               reason, or any other "ci:" word, fails.
  <!-- ci: daemon -->          run with a CPU frameprepd listening on the
                               default socket, as a reader who followed
                               "Running it" has; it must still be running
                               afterwards, and stop cleanly.

Where they run: a scratch folder laid out as the repository's root for what
the README names (build -> the build folder under test, deploy, src and
tests -> the repository's), with photo.jpg, photo.png, image.png and
photos/ made from the test photographs; that folder's build/src and
build/service first on PATH (as an install would put the tools);
XDG_RUNTIME_DIR, HOME and TMPDIR in the scratch folder, so the default
socket and ~ are the test's own. Each block gets 120 s; what it left
running (its process group) is ended after it. A block that fails prints
its output.

Usage: readme_blocks.py --build BUILD_DIR --images DIR [--readme PATH]
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FENCE = re.compile(r"^```(sh|bash)\s*$")
MARK = re.compile(r"^<!--\s*ci:\s*(.*?)\s*-->\s*$")


class Fail(Exception):
    pass


def blocks(readme):
    """[(line number, marker text or None, body)] of the sh/bash blocks."""
    with open(readme) as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if j == len(lines):
                raise Fail(f"README line {i + 1}: the block never ends")
            m = MARK.match(lines[i - 1]) if i > 0 else None
            out.append((i + 1, m.group(1) if m else None,
                        "\n".join(lines[i + 1:j]) + "\n"))
            i = j
        i += 1
    return out


def prepare(tmp, build, images):
    for name, target in (("build", build), ("deploy", "deploy"),
                         ("src", "src"), ("tests", "tests")):
        os.symlink(os.path.join(ROOT, target) if target != build
                   else build, os.path.join(tmp, name))
    for d in ("run", "home", "tmp", "photos"):
        os.makedirs(os.path.join(tmp, d), mode=0o700)
    shutil.copy(os.path.join(images, "astronaut.png"),
                os.path.join(tmp, "photo.png"))
    shutil.copy(os.path.join(images, "chelsea.png"),
                os.path.join(tmp, "image.png"))
    shutil.copy(os.path.join(images, "rocket.jpg"),
                os.path.join(tmp, "photo.jpg"))
    n = 0
    for name in sorted(os.listdir(images)):
        if name.endswith(".jpg"):
            shutil.copy(os.path.join(images, name),
                        os.path.join(tmp, "photos", name))
            n += 1
    if n == 0:
        raise Fail(f"no JPEG photographs in {images}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("FRAMEPREP_SOCKET", "CDPATH")}
    env.update(PATH=os.pathsep.join([os.path.join(build, "src"),
                                     os.path.join(build, "service"),
                                     env.get("PATH", "/usr/bin:/bin")]),
               XDG_RUNTIME_DIR=os.path.join(tmp, "run"),
               HOME=os.path.join(tmp, "home"),
               TMPDIR=os.path.join(tmp, "tmp"))
    return env


def start_daemon(tmp, build, env):
    log = open(os.path.join(tmp, "daemon.log"), "wb")
    d = subprocess.Popen([os.path.join(build, "service", "frameprepd"),
                          "--device", "cpu", "--workers", "2"], env=env,
                         stdout=log, stderr=subprocess.STDOUT)
    cli = os.path.join(build, "src", "frameprep")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if d.poll() is not None:
            raise Fail(f"the daemon exited {d.returncode} at start")
        if subprocess.run([cli, "info"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0:
            return d
        time.sleep(0.1)
    d.kill()
    raise Fail("the daemon did not answer on the default socket in 20 s")


def stop_daemon(d, tmp):
    if d.poll() is not None:
        raise Fail(f"the daemon died during the block (status "
                   f"{d.returncode}):\n{daemon_log(tmp)}")
    d.send_signal(signal.SIGTERM)
    try:
        rc = d.wait(15)
    except subprocess.TimeoutExpired:
        d.kill()
        raise Fail("the daemon did not stop within 15 s of SIGTERM")
    if rc != 0:
        raise Fail(f"the daemon exited {rc}:\n{daemon_log(tmp)}")


def daemon_log(tmp):
    with open(os.path.join(tmp, "daemon.log"), errors="replace") as f:
        return f.read()[-3000:]


def run_block(body, tmp, env):
    t0 = time.monotonic()
    p = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", body],
                         cwd=tmp, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=120)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        rc = "timeout (120 s)"
    try:
        os.killpg(p.pid, signal.SIGTERM)  # what it left running
    except ProcessLookupError:
        pass
    return rc, out.decode(errors="replace"), time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    failed = ran = skipped = 0
    tmp = tempfile.mkdtemp(prefix="fprep-readme-")
    try:
        env = prepare(tmp, build, os.path.abspath(args.images))
        for line, mark, body in blocks(args.readme):
            first = body.strip().splitlines()[0] if body.strip() else ""
            if mark is not None and mark.startswith("skip"):
                m = re.match(r"skip \((.+)\)$", mark)
                if not m:
                    print(f"FAIL README:{line}: '{mark}' gives no reason "
                          f"(<!-- ci: skip (REASON) -->)")
                    failed += 1
                    continue
                print(f"skip README:{line} ({m.group(1)}): {first}")
                skipped += 1
                continue
            if mark not in (None, "daemon"):
                print(f"FAIL README:{line}: unknown marker 'ci: {mark}'")
                failed += 1
                continue
            d = start_daemon(tmp, build, env) if mark == "daemon" else None
            rc, out, took = run_block(body, tmp, env)
            why = None
            if rc != 0:
                why = f"exited {rc}"
            if d is not None:
                try:
                    stop_daemon(d, tmp)
                except Fail as e:
                    why = why or str(e)
            ran += 1
            if why is None:
                print(f"ok   README:{line} ({took:.1f} s): {first}")
            else:
                failed += 1
                print(f"FAIL README:{line}: {why}: {first}\n--- the "
                      f"block:\n{body}--- its output:\n{out[-6000:]}")
    except Fail as e:
        print(f"FAIL: {e}")
        failed += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"README shell blocks: {ran} run, {skipped} skipped with a "
          f"reason, {failed} failed")
    if ran == 0 and failed == 0:
        print("FAIL: no block ran")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
