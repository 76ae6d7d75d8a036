"""Loads the arrays that `test_npy --write DIR` wrote and checks them."""
import sys

import numpy as np

d = sys.argv[1]
a = np.load(d + "/f32.npy")
assert a.dtype == np.float32 and a.shape == (1, 3, 2, 2), (a.dtype, a.shape)
assert a.flags.c_contiguous
assert np.array_equal(a.ravel(), np.arange(12, dtype=np.float32) * 0.5), a
b = np.load(d + "/u8.npy")
assert b.dtype == np.uint8 and b.shape == (5,), (b.dtype, b.shape)
assert b.tolist() == [0, 1, 127, 128, 255], b
print("numpy loads both arrays")
