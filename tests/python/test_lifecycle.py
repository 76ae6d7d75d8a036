"""How a client lives with the programs around it: forked children
(PyTorch's DataLoader, pre-forking servers), bursts on a fresh client
(asyncio's gather, many threads), and results that must not outlive their
slot.

The checks do not depend on timing: children are waited for with a
generous bound, and results are compared with what the parent got for the
same frames."""
import asyncio
import concurrent.futures
import multiprocessing
import os
import pickle
import threading

import cv2
import numpy as np
import pytest

import frameprep
from conftest import IMAGES, serving

SIZE = (96, 96)


def _frames(n):
    """n frames: the real photos of IMAGES (in turn, some cropped so that
    sizes differ) when there are any, else random ones of several sizes."""
    paths = sorted(IMAGES.glob("*.png")) + sorted(IMAGES.glob("*.jpg")) \
        if IMAGES.is_dir() else []
    photos = [img for img in (cv2.imread(str(p), cv2.IMREAD_COLOR)
                              for p in paths)
              if img is not None and min(img.shape[:2]) >= 64]
    rng = np.random.default_rng(38)
    out = []
    for i in range(n):
        if photos:
            img = photos[i % len(photos)]
            h, w = img.shape[:2]
            img = np.ascontiguousarray(img[:h - (i % 7) * 3, :w - (i % 5) * 4])
        else:
            h, w = 40 + 3 * (i % 11), 60 + 5 * (i % 13)
            img = rng.integers(0, 256, (h, w, 3), np.uint8)
        out.append(img)
    return out


def _child(fn, timeout=120):
    """Runs fn() in a child made by os.fork; returns what it returned (or
    raises what it raised, as an AssertionError naming it). The child ends
    with os._exit, as a forked worker does."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException as exc:  # noqa: B902: reported to the parent
            payload = pickle.dumps(("err", f"{type(exc).__name__}: {exc}"))
        with os.fdopen(w, "wb") as f:
            f.write(payload)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
        f"the child died: wait status {status:#x} (low bits: the signal)"
    kind, value = pickle.loads(data)
    assert kind == "ok", f"in the child: {value}"
    return value


def _digests(client, frames):
    return [client.preprocess(f, size=SIZE).tensor.tobytes() for f in frames]


# -- fork -------------------------------------------------------------------

def test_forked_child_opens_its_own_client(daemon):
    frames = _frames(24)
    with frameprep.Client(daemon.url, timeout=60) as parent:
        want = _digests(parent, frames)

        def child():
            with frameprep.Client(daemon.url, timeout=60) as own:
                got = _digests(own, frames)
                # A grandchild too: the child used nng before its fork.
                grand = _child(lambda: _digests(
                    frameprep.Client(daemon.url, timeout=60), frames[:3]))
            return got, grand

        for _ in range(4):
            got, grand = _child(child)
            assert got == want
            assert grand == want[:3]
        # The parent's client still works, and its connection was not
        # closed by the children.
        assert _digests(parent, frames) == want


def test_parent_client_in_child_raises(daemon):
    frame = _frames(1)[0]
    with frameprep.Client(daemon.url, timeout=60) as parent:
        want = parent.preprocess(frame, size=SIZE).tensor.tobytes()
        ring = parent.ring(slots=2, frame=frame.shape, size=SIZE)

        def child():
            said = []
            for call in (lambda: parent.preprocess(frame, size=SIZE),
                         parent.info,
                         lambda: parent._s.native.info(),
                         lambda: ring.preprocess(frame)):
                with pytest.raises(frameprep.ForkedError) as exc:
                    call()
                said.append(str(exc.value))
            # Closing the parent's objects here forgets them: the parent
            # keeps its connection and its ring's registration.
            ring.close()
            parent.close()
            with frameprep.Client(daemon.url, timeout=60) as own:
                got = own.preprocess(frame, size=SIZE).tensor.tobytes()
            return said, got

        said, got = _child(child)
        assert got == want
        for text in said:
            assert "must open a client of its own" in text, text
        assert parent.preprocess(frame, size=SIZE).tensor.tobytes() == want
        assert ring.preprocess(frame).tensor.tobytes() == want
        ring.close()


def test_fork_while_another_thread_is_in_a_call(daemon):
    """A parent whose other thread is inside calls when it forks (a
    prefetching thread beside a DataLoader): the child still opens its own
    client, and the parent's thread is unaffected."""
    frames = _frames(8)
    stop = threading.Event()
    errors = []
    with frameprep.Client(daemon.url, timeout=60) as parent:
        want = _digests(parent, frames)

        def busy():
            try:
                while not stop.is_set():
                    assert _digests(parent, frames[:2]) == want[:2]
            except BaseException as exc:  # noqa: B902
                errors.append(exc)

        t = threading.Thread(target=busy)
        t.start()
        try:
            for _ in range(8):
                assert _child(lambda: _digests(
                    frameprep.Client(daemon.url, timeout=60), frames)) == want
        finally:
            stop.set()
            t.join()
        assert not errors, errors


_pool_client = None


def _pool_work(args):
    """A DataLoader-style worker: one client a process, opened on its
    first item."""
    global _pool_client
    url, frame = args
    if _pool_client is None:
        _pool_client = frameprep.Client(url, timeout=60)
    r = _pool_client.preprocess(frame, size=SIZE)
    return os.getpid(), r.tensor.tobytes()


def test_multiprocessing_fork_pool(daemon):
    frames = _frames(100)
    with frameprep.Client(daemon.url, timeout=60) as parent:
        want = _digests(parent, frames)
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(4) as pool:
            # Bounded: a pool whose workers die is refilled for ever.
            got = pool.map_async(_pool_work,
                                 [(daemon.url, f) for f in frames],
                                 chunksize=5).get(timeout=120)
        assert [t for _, t in got] == want
        assert len({pid for pid, _ in got}) > 1
        assert os.getpid() not in {pid for pid, _ in got}
        assert _digests(parent, frames[:4]) == want[:4]


# -- bursts on a fresh client -------------------------------------------------

@pytest.mark.parametrize("n", [32, 200, 256])
def test_async_gather_on_fresh_client(daemon, n):
    frames = _frames(n)
    with frameprep.Client(daemon.url, timeout=120) as c:
        want = _digests(c, frames)

    async def main():
        async with frameprep.AsyncClient(daemon.url, timeout=120) as ac:
            results = await asyncio.gather(
                *(ac.preprocess(f, size=SIZE) for f in frames))
            return [r.tensor.tobytes() for r in results]

    assert asyncio.run(main()) == want
    assert daemon.alive()
    assert "unanswered" not in daemon.log()


@pytest.fixture(scope="module")
def narrow_daemon(tmp_path_factory):
    """A daemon that takes 4 requests in flight a connection: fewer than
    the C client's 16 blocking calls, so only the cap keeps 64 threads
    within it."""
    yield from serving(tmp_path_factory.mktemp("narrow"),
                       "--max-inflight-per-conn", "4")


def test_threads_on_fresh_client(narrow_daemon):
    daemon = narrow_daemon
    frames = _frames(64)
    with frameprep.Client(daemon.url, timeout=120) as c:
        want = _digests(c, frames)
    with frameprep.Client(daemon.url, timeout=120) as c:
        barrier = threading.Barrier(64)

        def one(f):
            barrier.wait()
            return c.preprocess(f, size=SIZE).tensor.tobytes()

        with concurrent.futures.ThreadPoolExecutor(64) as pool:
            got = list(pool.map(one, frames))
    assert got == want
    assert "unanswered" not in daemon.log()
