"""Code as users write it, for python_mypy (mypy --strict), not run: the
types that the package promises them. assert_type fails the check when a
type is not the one named."""
from __future__ import annotations

from typing import Any

from typing_extensions import assert_type

import numpy as np
import numpy.typing as npt
import torch

import frameprep


def batch(client: frameprep.Client, frames: list[np.ndarray[Any, Any]],
          out: np.ndarray[Any, np.dtype[np.float16]]) -> None:
    got = client.preprocess_batch(frames, size=(320, 320))
    assert_type(got, frameprep.BatchResult[np.ndarray[Any, np.dtype[Any]]])
    assert_type(got.tensor, np.ndarray[Any, np.dtype[Any]])
    xf = got.transforms[0]
    assert_type(xf, frameprep.ElementTransform)
    assert_type(xf.to_source([[0.0, 0.0, 8.0, 8.0]]),
                np.ndarray[Any, Any])
    into = client.preprocess_batch(frames, out, dtype="float16")
    assert_type(into.tensor, np.ndarray[Any, np.dtype[np.float16]])


def ring(client: frameprep.Client, frame: np.ndarray[Any, Any]) -> None:
    with client.ring(slots=2, frame=frame.shape) as r:
        with r.preprocess(frame) as res:
            assert_type(res, frameprep.RingResult)
            assert_type(res.released, bool)
        try:
            r.preprocess(frame)
        except frameprep.RingFullError as exc:
            assert_type(exc.message, str)


def tensors_by_dtype(client: frameprep.Client, frame: npt.NDArray[np.uint8],
                     jpeg: bytes, out: npt.NDArray[np.float16]) -> None:
    assert_type(client.preprocess(frame).tensor, npt.NDArray[np.float32])
    assert_type(client.preprocess(jpeg, format="jpeg").tensor,
                npt.NDArray[np.float32])
    assert_type(client.preprocess(memoryview(jpeg), dtype="f16").tensor,
                npt.NDArray[np.float16])
    assert_type(client.preprocess(frame, dtype=np.uint8).tensor,
                npt.NDArray[np.uint8])
    assert_type(client.preprocess(frame, out=out, dtype="float16").tensor,
                npt.NDArray[np.float16])
    r: frameprep.Result = client.preprocess(frame, dtype="uint8")
    assert_type(r.tensor, npt.NDArray[Any])


async def async_tensors(client: frameprep.AsyncClient,
                        frame: npt.NDArray[np.uint8]) -> None:
    r = await client.preprocess(frame, dtype="float16")
    assert_type(r.tensor, npt.NDArray[np.float16])
    assert_type((await client.preprocess(frame)).tensor,
                npt.NDArray[np.float32])


def frames_refused(client: frameprep.Client) -> None:
    client.preprocess([[1, 2, 3]])  # type: ignore[call-overload]
    client.preprocess("photo.jpg")  # type: ignore[call-overload]


def ring_signatures(ring: frameprep.Ring, jpeg: bytes) -> None:
    buf = ring.next_frame((1, len(jpeg)))
    assert_type(buf, frameprep.RingFrame)
    assert_type(ring.preprocess(jpeg), frameprep.RingResult)


def video(client: frameprep.Client, packet: bytes,
          out: torch.Tensor) -> None:
    with client.video("h264", size=(320, 320)) as st:
        assert_type(st.send(packet, 0)[0].tensor, np.ndarray[Any, Any])
        assert_type(st.send(packet, 0, out=out)[0].tensor, torch.Tensor)
        assert_type(st.flush(out)[0], frameprep.VideoFrame[torch.Tensor])
        tensor, pts, xf = st.flush()[0]


async def async_video(client: frameprep.AsyncClient, packet: bytes,
                      out: torch.Tensor) -> None:
    async with await client.video("hevc") as st:
        frames = await st.send(packet, 0, out=out)
        assert_type(frames[0].tensor, torch.Tensor)
        assert_type((await st.flush())[0].tensor, np.ndarray[Any, Any])
    await client.release_cuda()
