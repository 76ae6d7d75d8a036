"""Fixtures of the Python client tests: paths to the built programs (from
the environment ctest sets, else build/ in the source tree) and a real
frameprepd (CPU backend) on a private ipc:// socket."""
import os
import pathlib
import signal
import subprocess
import time

import pytest

import frameprep

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"


def _path(env, default):
    return pathlib.Path(os.environ.get(env, str(BUILD / default)))


DAEMON = _path("FPREP_DAEMON", "service/frameprepd")
CLI = _path("FPREP_CLI", "src/frameprep")
WIRE_GOLDEN = _path("FPREP_WIRE_GOLDEN", "tests/python/wire_golden")
IMAGES = _path("FPREP_IMAGES", "images")
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"


def ring_memory(ring):
    """A uint8 numpy view of the region a ring uses now (its C ring's
    mapping; read it while the ring is open)."""
    import ctypes

    import numpy as np
    c = ring._c
    return np.ctypeslib.as_array(
        (ctypes.c_uint8 * c.size).from_address(c.base))


class Daemon:
    """A frameprepd process on a socket in tmp; stop() requires a clean
    exit (status 0 after SIGTERM)."""

    def __init__(self, tmp, *extra, prefix=(), trust_owner=None):
        self.url = f"ipc://{tmp}/frameprepd.sock"
        self.log_path = tmp / "frameprepd.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [*prefix, str(DAEMON), "--device", "cpu", "--listen", self.url,
             "--workers", "2", "--log-level", "info", *extra],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"frameprepd exited with "
                                   f"{self.proc.returncode}:\n{self.log()}")
            try:
                with frameprep.Client(self.url, timeout=2,
                                      trust_owner=trust_owner) as c:
                    c.info()
                return
            except frameprep.FrameprepError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError("frameprepd did not answer INFO "
                                       "within 30 s")
                time.sleep(0.1)

    def log(self):
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def alive(self):
        return self.proc.poll() is None

    def pause(self):
        """SIGSTOP, and return once every thread of the daemon has stopped
        (kill() returns when the signal is queued; until the group stop
        completes the daemon may still answer)."""
        self.proc.send_signal(signal.SIGSTOP)
        while True:
            pid, status = os.waitpid(self.proc.pid, os.WUNTRACED)
            if pid == self.proc.pid and os.WIFSTOPPED(status):
                return

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()

    def stop(self):
        assert self.alive(), f"frameprepd died:\n{self.log()}"
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("frameprepd did not stop within 30 s")
        self._log.close()
        assert rc == 0, f"frameprepd exited with {rc}:\n{self.log()}"


def serving(tmp, *extra):
    """A generator for a fixture: a Daemon that must still be alive and
    stop cleanly at the end."""
    d = Daemon(tmp, *extra)
    try:
        yield d
    except BaseException:
        d.kill()
        raise
    d.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """One frameprepd for a test module."""
    yield from serving(tmp_path_factory.mktemp("daemon"))


@pytest.fixture
def client(daemon):
    with frameprep.Client(daemon.url, timeout=60) as c:
        yield c
