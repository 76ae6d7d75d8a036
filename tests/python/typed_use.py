"""Code as users write it, for python_mypy (mypy --strict), not run: the
types that the package promises them. assert_type fails the check when a
type is not the one named."""
from __future__ import annotations

from typing import Any

from typing_extensions import assert_type

import numpy as np

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
