"""frameprep.video against a real frameprepd (CPU backend): streams made by
Debian's ffmpeg from the skimage photographs (pan and zoom, 2 B-frames, an
IDR picture every 8 frames), decoded through Client.video and
frameprep.video.read; the tensors equal those `frameprep video` (the C
client) makes of the same file, in display order."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import frameprep
from frameprep import _core, _native, video
from frameprep.protocol import Location

from conftest import CLI, IMAGES, ring_memory
from video_streams import pan_zoom_args

FRAMES = 24
SIZE = (160, 128)

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None,
                                reason="no ffmpeg to make the streams")


def make_stream(tmp, photo, size, codec, ext):
    out = str(tmp / f"{codec}.{ext}")
    subprocess.run(["ffmpeg", "-v", "error", "-y",
                    *pan_zoom_args(str(IMAGES / photo), size, codec, FRAMES,
                                   out)], check=True, timeout=300)
    return out


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("video")
    return {"h264": make_stream(tmp, "astronaut.png", (320, 240), "libx264",
                                "h264"),
            "hevc": make_stream(tmp, "coffee.png", (352, 240), "libx265",
                                "mp4")}


def cli_tensors(daemon, path, tmp, *opts):
    """`frameprep video path -o` of the C client: (tensors, pts)."""
    npy = str(tmp / "cli.npy")
    r = subprocess.run([str(CLI), "video", path, "--socket", daemon.url,
                        "--size", f"{SIZE[0]}x{SIZE[1]}", *opts, "-o", npy],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    pts = [int(line.split()[3]) for line in r.stdout.decode().splitlines()
           if line.startswith("frame ")]
    return np.load(npy), pts


@pytest.mark.parametrize("name", ["h264", "hevc"])
def test_read_equals_the_c_client(daemon, client, streams, name, tmp_path):
    """frameprep.video.read yields every frame, in display order, each
    tensor equal to the CLI's of the same file, with its transform."""
    path = streams[name]
    frames = list(video.read(path, client=client, size=SIZE))
    want, pts = cli_tensors(daemon, path, tmp_path)
    assert len(frames) == FRAMES == len(want)
    assert [f.pts for f in frames] == pts
    for f, w in zip(frames, want):
        assert f.tensor.shape == (3, SIZE[1], SIZE[0])
        assert f.tensor.dtype == np.float32
        assert np.array_equal(f.tensor, w)
        assert (f.transform.src_width, f.transform.src_height) == \
            ((320, 240) if name == "h264" else (352, 240))
    # u8 NHWC too.
    frames = list(video.read(path, client, size=SIZE, dtype="uint8",
                             layout="nhwc"))
    assert len(frames) == FRAMES
    assert frames[0].tensor.shape == (SIZE[1], SIZE[0], 3)
    assert frames[0].tensor.dtype == np.uint8


def test_stream_send_flush(client, streams):
    """Client.video: packets in, frames out in display order (none for the
    first packets while B-frames wait), the rest at flush; the same
    tensors as read's."""
    ref = list(video.read(streams["h264"], client=client, size=SIZE))
    got = []
    counts = []
    with video.Demuxer(streams["h264"]) as dmx, \
            client.video("h264", size=SIZE) as st:
        assert dmx.codec == video.Codec.H264
        assert (dmx.width, dmx.height) == (320, 240)
        assert st.id != 0
        for k, (packet, pts) in enumerate(dmx):
            # bytes, a bytearray and a uint8 array alike
            out = st.send([packet, bytearray(packet),
                           np.frombuffer(packet, np.uint8)][k % 3], pts)
            counts.append(len(out))
            got += out
        got += st.flush()
    assert st.id == 0
    assert counts[0] == 0 and max(counts) >= 1
    assert len(got) == FRAMES
    for (tensor, pts, xf), r in zip(got, ref):
        assert pts == r.pts and xf == r.transform
        assert np.array_equal(tensor, r.tensor)


def test_broken_packet(client, streams):
    """A corrupt packet raises BitstreamError; the stream gives frames
    again from the next IDR picture."""
    packets = list(video.Demuxer(streams["h264"]))
    assert len(packets) == FRAMES
    with client.video("h264", size=SIZE) as st:
        got = []
        broken = 0
        for k, (packet, pts) in enumerate(packets):
            if k == 3:
                packet = packet[:len(packet) // 3]
            try:
                got += st.send(packet, pts)
            except frameprep.BitstreamError as e:
                broken += 1
                assert "broken bitstream" in str(e) and e.status == 20
        got += st.flush()
    assert broken >= 1
    assert any(f.pts >= 8 for f in got)
    # skip_broken: read goes on over the same kind of break.
    path = os.path.join(os.path.dirname(streams["h264"]), "cut.h264")
    with open(path, "wb") as f:
        for k, (packet, _) in enumerate(packets):
            f.write(packet[:len(packet) // 3] if k == 11 else packet)
    with pytest.raises(frameprep.BitstreamError):
        list(video.read(path, client=client, size=SIZE))
    frames = list(video.read(path, client=client, size=SIZE,
                             skip_broken=True))
    assert 0 < len(frames) < FRAMES and frames[-1].pts >= 16


def test_refusals(client, tmp_path):
    """An unknown codec, an empty packet, a closed stream, a file without
    video: the package's exceptions."""
    with pytest.raises(frameprep.InvalidRequestError):
        client.video("vp9")
    st = client.video("hevc", size=SIZE)
    with pytest.raises(ValueError):
        st.send(b"", 0)
    st.close()
    st.close()
    with pytest.raises(frameprep.ClosedError):
        st.send(b"\x00\x00\x01\x09", 0)
    bad = tmp_path / "not-a-video.mp4"
    bad.write_bytes(b"nothing here")
    with pytest.raises(frameprep.FrameprepError) as exc:
        video.Demuxer(str(bad))
    assert type(exc.value) in (frameprep.ServerIOError,
                               frameprep.InvalidRequestError)
    assert str(bad) in str(exc.value)


def test_async_video(daemon, client, streams):
    """AsyncClient.video: the same frames as Client.video's, awaited; two
    streams at once on one connection each in display order."""
    import asyncio

    ref = list(video.read(streams["hevc"], client=client, size=SIZE))
    packets = list(video.Demuxer(streams["hevc"]))

    async def one(ac):
        got = []
        async with await ac.video("hevc", size=SIZE) as st:
            assert isinstance(st, frameprep.AsyncVideoStream)
            assert st.id != 0 and st.codec == video.Codec.HEVC
            for packet, pts in packets:
                got += await st.send(packet, pts)
            got += await st.flush()
        assert st.id == 0
        return got

    async def main():
        async with frameprep.AsyncClient(daemon.url, timeout=60) as ac:
            with pytest.raises(frameprep.InvalidRequestError):
                await ac.video("vp9")
            return await asyncio.gather(one(ac), one(ac))

    for got in asyncio.run(main()):
        assert len(got) == FRAMES
        for (tensor, pts, xf), r in zip(got, ref):
            assert pts == r.pts and xf == r.transform
            assert np.array_equal(tensor, r.tensor)


def test_stream_after_its_client(daemon, streams):
    """A stream whose client was closed: calls raise ClosedError, close
    does nothing (the daemon dropped the stream with the connection) and
    frees what the library held for it (the ASan build checks)."""
    c = frameprep.Client(daemon.url)
    st = c.video("h264", size=SIZE)
    packet, pts = next(iter(video.Demuxer(streams["h264"])))
    st.send(packet, pts)
    c.close()
    with pytest.raises(frameprep.ClosedError):
        st.send(packet, pts)
    st.close()
    st.close()


def test_stream_tensors_into_a_region(client, streams):
    """The native stream's out_* arguments (fprep_stream_set_output_id),
    which out= uses: tensors into a shared-memory region of the client (a
    ring's, its slot unused) equal the inline ones, the reply carrying
    only the records; each call names its own place, so one without is
    inline again; too little room is ELIMIT naming out_capacity, those
    frames dropped and the stream going on."""
    ref = list(video.read(streams["h264"], client=client, size=SIZE))
    one = ref[0].tensor.nbytes
    shape = ref[0].tensor.shape
    packets = list(video.Demuxer(streams["h264"]))
    with client.ring(slots=1, frame=(1080, 1920, 3), doorbell=False) as ring:
        mem = ring_memory(ring)
        rid = ring._c.region_id
        got = []
        with client.video("h264", size=SIZE) as st:
            nat = st._native
            for k, unit in enumerate(packets + [None]):
                if k % 2 == 0 and unit is not None:
                    got += st.send(*unit)
                    continue
                mem[:4 * one] = 0xff
                res = _core.checked(
                    nat.send(*unit, Location.SHM, rid, 0, 4 * one)
                    if unit is not None
                    else nat.flush(Location.SHM, rid, 0, 4 * one))
                records = nat.frames(res)
                assert res.fields["output_loc"] == Location.SHM
                assert res.fields["payload_size"] == 32 * len(records)
                if records:
                    with pytest.raises(frameprep.ProtocolError):
                        nat.tensor(res)
                tensors = mem[:len(records) * one].view(np.float32)
                for j, (pts, w, h, sx, sy, px, py) in enumerate(records):
                    got.append(video.VideoFrame(
                        tensors.reshape((-1,) + shape)[j].copy(), pts,
                        frameprep.Transform(sx, sy, px, py, w, h)))
        assert len(got) == FRAMES
        for (tensor, pts, xf), r in zip(got, ref):
            assert pts == r.pts and xf == r.transform
            assert np.array_equal(tensor, r.tensor)
        # One frame's room less a byte: every packet that lets a frame out
        # is refused, and the stream goes on with the next.
        refused, after = 0, []
        with client.video("h264", size=SIZE) as st:
            nat = st._native
            for k, (packet, pts) in enumerate(packets):
                if k >= 12:
                    after += st.send(packet, pts)
                    continue
                try:
                    _core.checked(nat.send(packet, pts, Location.SHM, rid, 0,
                                           one - 1))
                except frameprep.LimitExceededError as e:
                    refused += 1
                    assert "out_capacity" in str(e)
            after += st.flush()
        assert refused >= 6
        order = [r.pts for r in ref]
        assert after and order.index(after[0].pts) >= 8
        for f in after:
            assert np.array_equal(f.tensor, ref[order.index(f.pts)].tensor)
        with client.video("h264", size=SIZE) as st:
            with pytest.raises(frameprep.InvalidRequestError,
                               match="capacity 0"):
                st._native.flush(Location.SHM, rid, 0, 0)
            with pytest.raises(frameprep.InvalidRequestError,
                               match="location 7"):
                st._native.flush(7, rid, 0, one)
            assert st.flush() == []


class _FakeCuda:
    """A CUDA-looking array (its address one the fake driver knows)."""

    def __init__(self, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {
            "version": 3, "shape": shape, "typestr": typestr,
            "data": (0x7f0000000000, False), "strides": strides}


class _Counting:
    """A native stream that counts the calls that reach it."""

    def __init__(self, native):
        self.native, self.calls = native, []

    def __getattr__(self, name):
        self.calls.append(name)
        return getattr(self.native, name)


def test_out_refused_before_sending(client, streams, monkeypatch):
    """out= is checked before anything is sent or registered: numpy (host
    memory) is refused saying CUDA memory is needed, a CUDA array of
    another shape (K = 0 frames too), dtype or layout naming the field;
    one that passes is registered, which the CPU backend refuses
    (UnsupportedError), and the stream goes on."""
    full = []
    monkeypatch.setattr(_native, "cuda_pointer", lambda ptr: (7, 0))
    monkeypatch.setattr(_native, "cuda_allocation", lambda ptr: (
        full.append(ptr) or (ptr, 1 << 24, bytes(64), bytes(16), 0)))
    packets = list(video.Demuxer(streams["h264"]))
    c, h, w = 3, SIZE[1], SIZE[0]
    with client.video("h264", size=SIZE) as st:
        counting = _Counting(st._native)
        st._native = counting
        for bad, what in [
                (np.zeros((4, c, h, w), np.float32), "CUDA memory"),
                (_FakeCuda((4, c, h, w + 1)), "out shape"),
                (_FakeCuda((0, c, h, w)), "K >= 1"),
                (_FakeCuda((4, h, w, c)), "out shape"),
                (_FakeCuda((c, h, w)), "out shape"),
                (_FakeCuda((4, c, h, w), "<f2"), "out dtype"),
                (_FakeCuda((4, c, h, w), "<f4", (4, 4 * h * w, 4 * w, 4)),
                 "out strides")]:
            with pytest.raises(ValueError, match=what) as exc:
                st.send(packets[0][0], 0, out=bad)
            assert isinstance(exc.value, frameprep.InvalidRequestError)
            with pytest.raises(frameprep.InvalidRequestError, match=what):
                st.flush(out=bad)
        assert counting.calls == [] and full == []
        assert client._cuda.count() == 0
        with pytest.raises(frameprep.UnsupportedError, match="GPU"):
            st.send(packets[0][0], 0, out=_FakeCuda((2, c, h, w)))
        assert counting.calls == [] and len(full) == 1
        got = []
        for packet, pts in packets:
            got += st.send(packet, pts)
        got += st.flush()
        assert len(got) == FRAMES
    # The layout's shape: NHWC takes (K, H, W, C).
    with client.video("h264", size=SIZE, dtype="uint8",
                      layout="nhwc") as st:
        with pytest.raises(frameprep.InvalidRequestError, match="out shape"):
            st.send(packets[0][0], 0, out=_FakeCuda((2, c, h, w), "|u1"))
        with pytest.raises(frameprep.UnsupportedError):
            st.send(packets[0][0], 0, out=_FakeCuda((2, h, w, c), "|u1"))


def test_async_out_refused(daemon, streams):
    """AsyncVideoStream's out= is the blocking stream's: numpy refused
    before sending."""
    import asyncio
    packet, pts = next(iter(video.Demuxer(streams["h264"])))

    async def main():
        async with frameprep.AsyncClient(daemon.url, timeout=60) as ac:
            async with await ac.video("h264", size=SIZE) as st:
                with pytest.raises(frameprep.InvalidRequestError,
                                   match="CUDA memory"):
                    await st.send(packet, pts,
                                  out=np.zeros((2, 3, SIZE[1], SIZE[0]),
                                               np.float32))
                assert await st.send(packet, pts) == []
                await ac.release_cuda()

    asyncio.run(main())
