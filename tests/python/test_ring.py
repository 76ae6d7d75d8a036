"""The Ring's slots: a result or a reserved frame holds its slot until it
is given back, threads sharing a ring never see another frame's tensor,
the client's in-flight limit holds for ring requests too, and a ring
goes on after the daemon is killed and restarted."""
import gc
import signal
import threading
import time

import numpy as np
import pytest

import frameprep
from conftest import Daemon, ring_memory, serving


def in_threads(n, target):
    """Runs target(t) on n threads, t = 0..n-1, and waits for them."""
    threads = [threading.Thread(target=target, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def frames(n, h=48, w=64, seed=7):
    """n different small BGR frames."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, 3), np.uint8) for _ in range(n)]


OPTS = dict(size=(32, 24))


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon whose loop polls (doorbells taken while it spins)."""
    yield from serving(tmp_path_factory.mktemp("ring"), "--spin-us", "2000")


def expected(client, fs, **opts):
    return [client.preprocess(f, **opts).tensor.tobytes() for f in fs]


@pytest.mark.parametrize("doorbell", [True, False])
def test_four_threads_share_four_slots(daemon, doorbell):
    """Four threads share one ring of four slots, 2,000 results each,
    copied and in place: every tensor, read after the other threads had
    the chance to reuse slots, is its own frame's (the inline reply)."""
    fs = frames(16)
    per_thread = 2000
    with frameprep.Client(daemon.url, timeout=30) as c:
        want = expected(c, fs, **OPTS)
        wrong, done, failures = [0], [0], []
        lock = threading.Lock()
        with c.ring(slots=4, frame=fs[0].shape, doorbell=doorbell,
                    **OPTS) as ring:
            def worker(t):
                try:
                    n_wrong = 0
                    for i in range(per_thread):
                        j = (t * 5 + i * 3) % len(fs)
                        if i % 2:
                            with ring.next_frame() as buf:
                                buf[:] = fs[j]
                                r = ring.preprocess(buf)
                        else:
                            r = ring.preprocess(fs[j])
                        with r:
                            time.sleep(0)  # let the others run
                            if r.tensor.tobytes() != want[j]:
                                n_wrong += 1
                    with lock:
                        wrong[0] += n_wrong
                        done[0] += per_thread
                except BaseException as exc:  # noqa: BLE001
                    failures.append(repr(exc))

            in_threads(4, worker)
            assert failures == []
            assert sorted(ring._free) == [0, 1, 2, 3]
    assert (done[0], wrong[0]) == (4 * per_thread, 0)


def test_slots_are_held_until_given_back(daemon):
    fs = frames(3)
    with frameprep.Client(daemon.url, timeout=0.5) as c:
        want = expected(c, fs, **OPTS)
        with c.ring(slots=2, frame=fs[0].shape, **OPTS) as ring:
            r0 = ring.preprocess(fs[0])
            r1 = ring.preprocess(fs[1])
            # Both slots held by this thread: a third request could never
            # get one (test_ring_full_fails_fast).
            with pytest.raises(frameprep.RingFullError, match="2 slots"):
                ring.preprocess(fs[2])
            with pytest.raises(frameprep.RingFullError):
                ring.next_frame()
            assert r0.tensor.tobytes() == want[0]
            assert r1.tensor.tobytes() == want[1]
            r0.release()
            assert r0.released and not r1.released
            r0.release()  # no-op
            with ring.preprocess(fs[2]) as r2:
                assert r2.tensor.tobytes() == want[2]
                assert isinstance(r2, frameprep.RingResult)
            assert r1.tensor.tobytes() == want[1]  # its slot not reused
            r1.release()

            # A reserved frame holds its slot until sent or cancelled;
            # leaving its block with an exception gives it back.
            a = ring.next_frame()
            b = ring.next_frame()
            with pytest.raises(frameprep.RingFullError):
                ring.next_frame()
            a.cancel()
            a.cancel()  # no-op
            with pytest.raises(ValueError):
                with ring.next_frame() as buf:
                    raise ValueError("the decoder failed")
            b[:] = fs[1]
            with ring.preprocess(b[4:40, 8:60]) as r:
                crop = c.preprocess(fs[1][4:40, 8:60], **OPTS)
                assert r.tensor.tobytes() == crop.tensor.tobytes()
            b.cancel()  # sent: no-op
            assert sorted(ring._free) == [0, 1]

            # Dropped without being given back: the slot comes back at
            # collection, with a ResourceWarning.
            with pytest.warns(ResourceWarning, match="frame was never"):
                buf = ring.next_frame()
                del buf
                gc.collect()
            with pytest.warns(ResourceWarning, match="result was never"):
                t = ring.preprocess(fs[0]).tensor
                assert t.tobytes() == want[0]  # the tensor holds the slot
                assert len(ring._free) == 1
                del t
                gc.collect()
            assert sorted(ring._free) == [0, 1]


def test_released_result_cannot_show_another_frame(daemon):
    """After release() (or the with block) r.tensor raises; an array
    taken from it before (the tensor, a slice, a DLPack import) keeps the
    slot and this frame's values while 100 later frames pass through the
    ring, and the slot comes back, without a warning, once the last such
    array is gone."""
    import warnings
    fs = frames(3)
    with frameprep.Client(daemon.url, timeout=30) as c:
        want = expected(c, fs, **OPTS)
        with c.ring(slots=2, frame=fs[0].shape, **OPTS) as ring:
            r = ring.preprocess(fs[0])
            t = r.tensor
            part = t[0, 1, 3:9]
            part_want = part.copy()
            r.release()
            assert r.released
            with pytest.raises(frameprep.ClosedError, match="released"):
                r.tensor
            assert "released" in repr(r)
            r.release()  # no-op
            with ring.preprocess(fs[1]) as w:
                kept = w.tensor[0]
                dl = np.from_dlpack(w.tensor)
            with pytest.raises(frameprep.ClosedError):
                w.tensor
            assert ring._free == []  # both slots viewed
            with warnings.catch_warnings():
                warnings.simplefilter("error", ResourceWarning)
                del t  # part still views the first slot
                del kept  # dl still views the second
                # Every slot is viewed by this thread: it is told at once.
                with pytest.raises(frameprep.RingFullError):
                    ring.preprocess(fs[2])
                del dl  # the second slot comes back
                assert len(ring._free) == 1
                for i in range(100):
                    with ring.preprocess(fs[i % 3]) as q:
                        assert q.tensor.tobytes() == want[i % 3]
                    assert np.array_equal(part, part_want)
                assert part.tobytes() == \
                    np.frombuffer(want[0], np.float32).reshape(
                        1, 3, 24, 32)[0, 1, 3:9].tobytes()
                assert len(ring._free) == 1
                del part
                gc.collect()
            assert sorted(ring._free) == [0, 1]


def test_ring_full_fails_fast(daemon):
    """A thread that asks for a slot while it holds every slot itself
    (results, views, reserved frames; none in flight) gets RingFullError
    naming the slot count at once, not after the client's 60 s timeout;
    slots held by another thread are waited for, and come when that
    thread releases them."""
    fs = frames(4)
    with frameprep.Client(daemon.url, timeout=60) as c:
        want = expected(c, fs, **OPTS)
        with c.ring(slots=3, frame=fs[0].shape, **OPTS) as ring:
            held = [ring.preprocess(fs[0]), ring.preprocess(fs[1])]
            buf = ring.next_frame()
            t0 = time.monotonic()
            with pytest.raises(frameprep.RingFullError,
                               match="ring has 3 slots") as exc:
                ring.preprocess(fs[2])
            assert isinstance(exc.value, frameprep.LimitExceededError)
            with pytest.raises(frameprep.RingFullError):
                ring.next_frame()
            assert time.monotonic() - t0 < 30
            buf.cancel()
            with ring.preprocess(fs[2]) as r:
                assert r.tensor.tobytes() == want[2]
            for r in held:
                r.release()

            # Another thread holds every slot: this one waits for it.
            taken, go = threading.Event(), threading.Event()
            other = []

            def holder():
                other.extend(ring.preprocess(fs[k]) for k in range(3))
                taken.set()
                go.wait()
                time.sleep(0.2)
                for r in other:
                    r.release()

            th = threading.Thread(target=holder)
            th.start()
            assert taken.wait(60)
            go.set()
            with ring.preprocess(fs[3]) as r:  # waits for the holder
                assert r.tensor.tobytes() == want[3]
            th.join()
            assert sorted(ring._free) == [0, 1, 2]


def test_more_threads_than_slots(daemon):
    """Eight threads on two slots, each holding its result for 2 ms:
    they wait their turn (the holders are other threads), never get
    RingFullError, and every tensor is their own frame's."""
    fs = frames(8)
    with frameprep.Client(daemon.url, timeout=60) as c:
        want = expected(c, fs, **OPTS)
        failures, wrong = [], [0]
        with c.ring(slots=2, frame=fs[0].shape, **OPTS) as ring:
            def worker(t):
                try:
                    for i in range(50):
                        with ring.preprocess(fs[t]) as r:
                            time.sleep(0.002)
                            if r.tensor.tobytes() != want[t]:
                                wrong[0] += 1
                except BaseException as exc:  # noqa: BLE001
                    failures.append(repr(exc))

            in_threads(8, worker)
            assert failures == [] and wrong == [0]
            assert sorted(ring._free) == [0, 1]


def test_async_ring_full_fails_fast(daemon):
    """AsyncRing: a gather of 16 requests on 4 slots, whose results stay
    held by the gather, fails at once with RingFullError (not after the
    client's 60 s timeout); 16 tasks that each hold their result across
    an await, on the same 4 slots, wait their turn and all succeed; a
    released result's tensor raises, a view kept past its block holds
    the slot while later frames pass."""
    import asyncio
    fs = frames(16)
    with frameprep.Client(daemon.url, timeout=60) as c:
        want = expected(c, fs, **OPTS)

    async def main():
        async with frameprep.AsyncClient(daemon.url, timeout=60) as ac:
            async with await ac.ring(slots=4, frame=fs[0].shape,
                                     **OPTS) as ring:
                t0 = time.monotonic()
                got = await asyncio.gather(
                    *(ring.preprocess(f) for f in fs),
                    return_exceptions=True)
                took = time.monotonic() - t0
                full = [g for g in got
                        if isinstance(g, frameprep.RingFullError)]
                ok = [g for g in got if isinstance(g, frameprep.RingResult)]
                assert len(ok) == 4 and len(full) == 12, got
                assert "ring has 4 slots" in str(full[0])
                for g in ok:
                    g.release()

                async def one(k):
                    async with await ring.preprocess(fs[k]) as r:
                        await asyncio.sleep(0.01)
                        return r.tensor.tobytes() == want[k]

                assert await asyncio.gather(*(one(k) for k in range(16))) \
                    == [True] * 16

                # A result dropped unreleased while an exception unwinds
                # gives its slot back (on_free runs with the exception
                # kept aside).
                with pytest.warns(ResourceWarning, match="result was never"):
                    with pytest.raises(IndexError):
                        [await ring.preprocess(fs[0])][1]
                    gc.collect()
                assert sorted(ring._free) == [0, 1, 2, 3]

                with await ring.preprocess(fs[0]) as r:
                    kept = r.tensor
                with pytest.raises(frameprep.ClosedError):
                    r.tensor
                for i in range(100):
                    with await ring.preprocess(fs[1 + i % 15]) as q:
                        assert q.tensor.tobytes() == want[1 + i % 15]
                assert kept.tobytes() == want[0]
                del kept
                assert sorted(ring._free) == [0, 1, 2, 3]
                return took

    took = asyncio.run(main())
    assert took < 30, took


def test_ring_yuv_frames(daemon):
    """The ring takes YUV frames (nv12 here): the inline reply's tensor,
    copied and in place."""
    rng = np.random.default_rng(3)
    nv12 = rng.integers(16, 235, (72, 64), np.uint8)  # 48 rows + 24 of UV
    with frameprep.Client(daemon.url, timeout=30) as c:
        want = c.preprocess(nv12, format="nv12", **OPTS).tensor.tobytes()
        with c.ring(slots=2, frame=nv12.shape, format="nv12",
                    **OPTS) as ring:
            with ring.preprocess(nv12) as r:
                assert r.tensor.tobytes() == want
            with ring.next_frame() as buf:
                buf[:] = nv12
                with ring.preprocess(buf) as r:
                    assert r.tensor.tobytes() == want


def test_ring_honours_the_in_flight_limit(tmp_path):
    """48 threads on one ring of 48 slots against a polling daemon that
    allows 4 requests in flight per connection: at no time are more than 4
    of the ring's doorbell entries posted or taken (sampled from the
    area), and there is no EBUSY, region error or timeout, every tensor
    right (the ring's requests wait for the client's in-flight tokens like
    any other).

    The tokens are taken and given back in C with the GIL released, so a
    scan of the area is no instant: an entry seen busy early in it may be
    answered, and its token taken for another entry seen busy later. The
    sampler copies the area twice and counts the entries that hold the
    same request in both copies: each of those was in flight from the
    first copy to the second, so all of them at once in between."""
    d = Daemon(tmp_path, "--spin-us", "100000", "--max-inflight-per-conn",
               "4")
    try:
        fs = frames(8, 240, 320)
        # The timeout bounds a hang: 48 threads taking turns at 4 tokens
        # waited past 30 s under ThreadSanitizer on two loaded cores.
        with frameprep.Client(d.url, timeout=300) as c:
            want = expected(c, fs, size=(320, 320))
            failures, wrong, most = [], [0], [0]
            with c.ring(slots=48, frame=fs[0].shape,
                        size=(320, 320)) as ring:
                assert ring._c.doorbell, \
                    "the daemon polls: the doorbell is used"
                # Per entry (512 bytes): its state word, its request's id
                # (the request header's at 64 + 8) and its reply's, 0 from
                # the post until the reply (at 256 + 8; protocol.h); the
                # doorbell area (a 64-byte header and 48 entries) is the
                # region's last page-rounded bytes.
                at = ring.size - -(-(64 + 512 * 48) // 4096) * 4096 + 64
                area = ring_memory(ring)[at:at + 512 * 48]
                stop = threading.Event()

                def busy(copy):
                    """Each entry's (posted or taken, its request's id)."""
                    words = copy.view(np.uint64)
                    return ((copy.view(np.uint32)[::128] != 0) &
                            (words[33::64] == 0), words[9::64])

                def sample():
                    while not stop.is_set():
                        b1, ids1 = busy(area.copy())
                        b2, ids2 = busy(area.copy())
                        both = b1 & b2 & (ids1 == ids2)
                        most[0] = max(most[0], int(np.count_nonzero(both)))

                def worker(t):
                    try:
                        for i in range(10):
                            j = (t + i) % len(fs)
                            with ring.preprocess(fs[j]) as r:
                                if r.tensor.tobytes() != want[j]:
                                    wrong[0] += 1
                    except BaseException as exc:  # noqa: BLE001
                        failures.append(repr(exc))

                sampler = threading.Thread(target=sample)
                sampler.start()
                in_threads(48, worker)
                stop.set()
                sampler.join()
            assert failures == [] and wrong[0] == 0
            assert 1 <= most[0] <= 4, most[0]
    finally:
        d.stop()


def test_gate_tokens():
    """The in-flight gate: its tokens are taken at once while free; a take
    that waits gets the token another thread gives back; one that times
    out says so after its timeout."""
    g = frameprep._native.Gate(2)
    assert g.try_take() and g.take(0.0) and g.tokens == 0
    assert not g.try_take()
    t0 = time.monotonic()
    assert not g.take(0.05)
    assert time.monotonic() - t0 >= 0.05
    threading.Timer(0.05, g.give).start()
    assert g.take(5.0) and g.tokens == 0
    g.give()
    g.give()
    assert g.tokens == 2
    with pytest.raises(frameprep.InvalidRequestError):
        frameprep._native.Gate(0)


def _restart(tmp_path, d, *extra):
    """Kills d with SIGKILL and starts a daemon on the same socket."""
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    d._log.close()
    return Daemon(tmp_path, *extra)


@pytest.mark.parametrize("extra", [("--spin-us", "100000"), ()],
                         ids=["doorbell", "socket"])
def test_ring_survives_kill_and_restart(tmp_path, extra):
    """kill -9 of the daemon, then a new one on the same socket: the ring
    registers anew and its next result is right within 2 s of the new
    daemon's start, results
    held from before keep their values, a frame reserved before the
    restart is sent from the new region, and a request in flight when
    the daemon dies is answered (by the new daemon) with its own tensor."""
    fs = frames(6, 480, 640)
    opts = dict(size=(320, 320))
    d = Daemon(tmp_path, *extra)
    try:
        with frameprep.Client(d.url, timeout=20) as c:
            want = expected(c, fs, **opts)
            with c.ring(slots=4, frame=fs[0].shape, **opts) as ring:
                old = ring.preprocess(fs[0])
                reserved = ring.next_frame()
                reserved[:] = fs[1]
                d = _restart(tmp_path, d, *extra)
                t0 = time.monotonic()  # the new daemon answers
                with ring.preprocess(fs[2]) as r:
                    assert r.tensor.tobytes() == want[2]
                took = time.monotonic() - t0
                assert took < 2.0, took
                with ring.preprocess(reserved) as r:
                    assert r.tensor.tobytes() == want[1]
                assert old.tensor.tobytes() == want[0]
                old.release()
                assert ring.region_id != 0

                # A request in flight when the daemon dies: big frames
                # keep the CPU daemon busy; the daemon is killed and
                # restarted while threads send.
                results, failures = [], []

                def sender(k):
                    try:
                        for i in range(6):
                            j = (k + i) % len(fs)
                            with ring.preprocess(fs[j]) as r:
                                results.append(r.tensor.tobytes() == want[j])
                    except BaseException as exc:  # noqa: BLE001
                        failures.append(repr(exc))

                threads = [threading.Thread(target=sender, args=(k,))
                           for k in range(3)]
                for th in threads:
                    th.start()
                time.sleep(0.05)
                d = _restart(tmp_path, d, *extra)
                for th in threads:
                    th.join()
                assert failures == []
                assert results == [True] * 18
        assert_serving_url(d.url)
    finally:
        d.stop()


def assert_serving_url(url):
    with frameprep.Client(url, timeout=10) as c:
        assert c.info()["backend"] == "cpu"


@pytest.mark.parametrize("spin", ["100000", "0"],
                         ids=["doorbell", "socket"])
def test_dead_daemon_noticed_at_once(tmp_path, spin):
    """A daemon killed while a ring's request waits for its reply in the
    doorbell or the slot is noticed at once (the connection closed), not
    after the client's timeout (10 s): with a new daemon 0.3 s later the
    request is answered, right, within 2 s of the new daemon's start."""
    d = Daemon(tmp_path, "--spin-us", spin)
    try:
        fs = frames(2, 1080, 1920)
        with frameprep.Client(d.url, timeout=10) as c:
            want = expected(c, fs, size=(640, 640))
            with c.ring(slots=2, frame=fs[0].shape, size=(640, 640)) as ring:
                with ring.preprocess(fs[0]):
                    pass
                got, failures = [], []
                stop = threading.Event()

                def sender():
                    try:
                        while not stop.is_set():
                            with ring.preprocess(fs[1]) as r:
                                got.append((time.monotonic(),
                                            r.tensor.tobytes() == want[1]))
                    except frameprep.FrameprepError as exc:
                        failures.append((time.monotonic(), exc))

                th = threading.Thread(target=sender)
                th.start()
                time.sleep(0.2)
                d.proc.send_signal(signal.SIGKILL)
                killed = time.monotonic()
                d.proc.wait()
                d._log.close()
                time.sleep(0.3)
                d = Daemon(tmp_path, "--spin-us", spin)
                ready = time.monotonic()
                while not [t for t, _ in got if t > killed]:
                    assert time.monotonic() - ready < 2.0, failures
                    assert not failures, failures
                    time.sleep(0.01)
                stop.set()
                th.join(30)
                assert failures == [] and all(ok for _, ok in got)
    finally:
        d.kill()


def test_async_ring_survives_kill_and_restart(tmp_path):
    """The AsyncRing registers anew after kill -9 + restart as the Ring
    does: its results after the restart are right, the first within 2 s
    of the new daemon's start, a frame reserved before is sent from the
    new region, and a result held from before keeps its values."""
    import asyncio
    fs = frames(4, 240, 320)
    d = Daemon(tmp_path)
    try:
        with frameprep.Client(d.url, timeout=20) as c:
            want = expected(c, fs, **OPTS)

        async def main():
            nonlocal d
            async with frameprep.AsyncClient(d.url, timeout=20) as ac:
                async with await ac.ring(slots=3, frame=fs[0].shape,
                                         **OPTS) as ring:
                    old = await ring.preprocess(fs[0])
                    buf = await ring.next_frame()
                    buf[:] = fs[1]
                    d = _restart(tmp_path, d)
                    t0 = time.monotonic()
                    with await ring.preprocess(fs[2]) as r:
                        assert r.tensor.tobytes() == want[2]
                    took = time.monotonic() - t0
                    with await ring.preprocess(buf) as r:
                        assert r.tensor.tobytes() == want[1]
                    assert old.tensor.tobytes() == want[0]
                    old.release()
                    got = await asyncio.gather(
                        *(ring.preprocess(fs[k % 4]) for k in range(3)))
                    assert [g.tensor.tobytes() for g in got] == \
                        [want[k % 4] for k in range(3)]
                    for g in got:
                        g.release()
                    return took

        took = asyncio.run(main())
        assert took < 2.0, took
    finally:
        d.stop()


def test_ring_region_dropped_behind_its_back(daemon):
    """A region the daemon no longer knows on a live connection (here
    unregistered behind the ring's back) is registered anew, and the
    ring goes on with right tensors; the daemon then holds one region and
    one doorbell for it, not more."""
    from frameprep.protocol import Kind, Request
    fs = frames(2)
    with frameprep.Client(daemon.url, timeout=30) as c:
        want = expected(c, fs, **OPTS)
        before = c.info()
        with c.ring(slots=2, frame=fs[0].shape, **OPTS) as ring:
            with ring.preprocess(fs[0]) as r:
                assert r.tensor.tobytes() == want[0]
            first = ring.region_id
            c.request(Request(kind=Kind.UNREGISTER, region_id=first))
            for k in range(4):
                with ring.preprocess(fs[k % 2]) as r:
                    assert r.tensor.tobytes() == want[k % 2]
            assert ring.region_id != first
            info = c.info()
            assert info["regions"] == before["regions"] + 1
            assert info["doorbells"] == before["doorbells"] + 1
        info = c.info()
        assert (info["regions"], info["doorbells"]) == \
            (before["regions"], before["doorbells"])


def test_one_call_path_and_its_fallbacks(daemon):
    """The ring sends whole frames in one call (its whole frame's request
    prepared from the start): reserved frames and arrays of the frame's
    shape; anything else (a crop, a Fortran-ordered array, a frame of
    another shape, another ring's frame) goes the step-by-step way, with
    the same tensors; the result's timings, transform and reply are the
    reply's."""
    fs = frames(3)
    with frameprep.Client(daemon.url, timeout=30) as c:
        want = expected(c, fs, **OPTS)
        crop = c.preprocess(fs[1][4:40, 8:60], **OPTS).tensor.tobytes()
        small = c.preprocess(fs[2][:40, :50], **OPTS).tensor.tobytes()
        with c.ring(slots=2, frame=fs[0].shape, **OPTS) as ring, \
                c.ring(slots=1, frame=fs[0].shape, **OPTS) as other:
            assert ring._c.prepared and other._c.prepared
            for _ in range(3):
                with ring.preprocess(fs[0]) as r:  # copied in one call
                    assert r.tensor.tobytes() == want[0]
                    assert r.timings == frameprep.Timings(*r._res.timings)
                    assert r.timings.total_us == r.reply.t_total_us
                    assert (r.transform.src_width,
                            r.transform.src_height) == (64, 48)
                with ring.next_frame() as buf:  # in place, in one call
                    assert type(buf) is frameprep.RingFrame
                    buf[:] = fs[1]
                    with ring.preprocess(buf) as r:
                        assert r.tensor.tobytes() == want[1]
                with ring.preprocess(np.asfortranarray(fs[2])) as r:
                    assert r.tensor.tobytes() == want[2]
                with ring.next_frame() as buf:
                    buf[:] = fs[1]
                    with ring.preprocess(buf[4:40, 8:60]) as r:
                        assert r.tensor.tobytes() == crop
                with ring.next_frame((40, 50, 3)) as buf:
                    buf[:] = fs[2][:40, :50]
                    with ring.preprocess(buf) as r:
                        assert r.tensor.tobytes() == small
                with other.next_frame() as buf:  # copied into ring
                    buf[:] = fs[2]
                    with ring.preprocess(buf) as r:
                        assert r.tensor.tobytes() == want[2]
                    assert buf.base.ring is other  # still other's
                with pytest.raises(frameprep.InvalidRequestError):
                    ring.preprocess(fs[0].astype(np.uint16))
            assert sorted(ring._free) == [0, 1]


def test_step_path_without_a_prepared_request(daemon):
    """A ring whose whole frame's request is dropped (CRing.prepare(None))
    sends every frame the step-by-step way, over the same C ring, from
    many threads at once: each result is its frame's, and every slot
    comes back."""
    fs = frames(3, h=120, w=160)
    with frameprep.Client(daemon.url, timeout=60) as c:
        want = expected(c, fs, **OPTS)
        with c.ring(slots=2, frame=fs[0].shape, **OPTS) as ring:
            ring._c.prepare(None)
            assert not ring._c.prepared
            wrong, failures = [0], []

            def worker(t):
                try:
                    for i in range(6):
                        j = (t + i) % len(fs)
                        with ring.preprocess(fs[j]) as r:
                            if r.tensor.tobytes() != want[j]:
                                wrong[0] += 1
                        with ring.next_frame() as buf:
                            buf[:] = fs[j]
                            with ring.preprocess(buf) as r:
                                if r.tensor.tobytes() != want[j]:
                                    wrong[0] += 1
                except BaseException as exc:  # noqa: BLE001
                    failures.append(repr(exc))

            in_threads(4, worker)
            assert failures == [] and wrong[0] == 0
            assert sorted(ring._free) == [0, 1]
