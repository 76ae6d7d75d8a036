#!/usr/bin/python3
"""readme_blocks.py: runs the code blocks of README.md and of the documents
it points to, as a reader would paste them, in order.

The documents (DOCS: README.md, include/frameprep/README.md,
src/tools/README.md, src/python/README.md, deploy/README.md,
tests/README.md, BENCHMARKS.md) are read in that order. Every ```sh or
```bash block runs, as written, with `bash -e -o pipefail` (so a failing
command fails the block), and every ```python block with
~/fp-venv/bin/python (the venv src/python/README.md makes; here the suite's
own, build/pyvenv, made by the python_venv test), unless an HTML comment on
the line just before its fence says otherwise:

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

Besides: README.md has at most 300 lines (it is the front page; the rest
lives in the documents), and every relative link of a document names a
file or folder that exists.

Usage: readme_blocks.py --build BUILD_DIR --images DIR [--readme PATH...]
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
FENCE = re.compile(r"^```(sh|bash|python)\s*$")
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)]*)?\)")
DOCS = ["README.md", "include/frameprep/README.md", "src/tools/README.md",
        "src/python/README.md", "deploy/README.md", "tests/README.md",
        "BENCHMARKS.md"]
FRONT_PAGE_LINES = 300
MARK = re.compile(r"^<!--\s*ci:\s*(.*?)\s*-->\s*$")


class Fail(Exception):
    pass


def blocks(readme):
    """[(line number, marker text or None, language, body)] of the
    sh/bash/python blocks."""
    with open(readme) as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if j == len(lines):
                raise Fail(f"{readme} line {i + 1}: the block never ends")
            m = MARK.match(lines[i - 1]) if i > 0 else None
            out.append((i + 1, m.group(1) if m else None, fence.group(1),
                        "\n".join(lines[i + 1:j]) + "\n"))
            i = j
        i += 1
    return out


def bad_links(doc):
    """The relative links of doc that name nothing."""
    with open(doc) as f:
        text = f.read()
    base = os.path.dirname(os.path.abspath(doc))
    return [t for t, _ in LINK.findall(text)
            if "://" not in t and not t.startswith("mailto:")
            and not os.path.exists(os.path.join(base, t))]


def prepare(tmp, build, images):
    for name, target in (("build", build), ("deploy", "deploy"),
                         ("src", "src"), ("tests", "tests"),
                         ("include", "include")):
        os.symlink(os.path.join(ROOT, target) if target != build
                   else build, os.path.join(tmp, name))
    for d in ("run", "home", "tmp", "photos"):
        os.makedirs(os.path.join(tmp, d), mode=0o700)
    # The venv src/python/README.md has the reader make (python3 -m venv
    # ... ~/fp-venv; pip install ./src/python) is the suite's own.
    os.symlink(os.path.join(build, "pyvenv"),
               os.path.join(tmp, "home", "fp-venv"))
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


def run_block(lang, body, tmp, env):
    t0 = time.monotonic()
    if lang == "python":
        python = os.path.join(tmp, "home", "fp-venv", "bin", "python")
        if not os.path.exists(python):
            return ("no ~/fp-venv/bin/python (ctest's python_venv makes "
                    "build/pyvenv)", "", 0.0)
        argv = [python, "-c", body]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", body]
    p = subprocess.Popen(argv, cwd=tmp, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
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


def run_one(where, mark, lang, body, tmp, build, env):
    """Runs one block as its marker says; returns "ran", "skipped" or
    "failed"."""
    first = body.strip().splitlines()[0] if body.strip() else ""
    if mark is not None and mark.startswith("skip"):
        m = re.match(r"skip \((.+)\)$", mark)
        if not m:
            print(f"FAIL {where}: '{mark}' gives no reason "
                  f"(<!-- ci: skip (REASON) -->)")
            return "failed"
        print(f"skip {where} ({m.group(1)}): {first}")
        return "skipped"
    if mark not in (None, "daemon"):
        print(f"FAIL {where}: unknown marker 'ci: {mark}'")
        return "failed"
    d = start_daemon(tmp, build, env) if mark == "daemon" else None
    rc, out, took = run_block(lang, body, tmp, env)
    why = None
    if rc != 0:
        why = f"exited {rc}"
    if d is not None:
        try:
            stop_daemon(d, tmp)
        except Fail as e:
            why = why or str(e)
    if why is None:
        print(f"ok   {where} ({took:.1f} s): {first}")
        return "ran"
    print(f"FAIL {where}: {why}: {first}\n--- the block:\n{body}--- its "
          f"output:\n{out[-6000:]}")
    return "failed"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--readme", nargs="+",
                    default=[os.path.join(ROOT, d) for d in DOCS])
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    count = {"ran": 0, "skipped": 0, "failed": 0}
    tmp = tempfile.mkdtemp(prefix="fprep-readme-")
    try:
        env = prepare(tmp, build, os.path.abspath(args.images))
        for doc in args.readme:
            name = os.path.relpath(os.path.abspath(doc), ROOT)
            for t in bad_links(doc):
                print(f"FAIL {name}: the link ({t}) names nothing")
                count["failed"] += 1
            if name == "README.md":
                with open(doc) as f:
                    n = len(f.read().splitlines())
                if n > FRONT_PAGE_LINES:
                    print(f"FAIL README.md has {n} lines, over "
                          f"{FRONT_PAGE_LINES}: the detail belongs in the "
                          f"documents it points to")
                    count["failed"] += 1
            for line, mark, lang, body in blocks(doc):
                count[run_one(f"{name}:{line}", mark, lang, body, tmp,
                              build, env)] += 1
    except Fail as e:
        print(f"FAIL: {e}")
        count["failed"] += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"the documents' code blocks: {count['ran']} run, "
          f"{count['skipped']} skipped with a reason, {count['failed']} "
          f"failed")
    if count["ran"] == 0 and count["failed"] == 0:
        print("FAIL: no block ran")
        return 1
    return 1 if count["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
