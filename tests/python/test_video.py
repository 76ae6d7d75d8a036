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
from frameprep import video

from conftest import CLI, IMAGES
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
