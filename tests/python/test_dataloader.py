"""src/python/examples/dataloader.py, the DataLoader recipe, on the CPU
backend: its worker function (torch-free) in a fork pool of 4 workers over
real photographs encoded as JPEG files, each tensor checked against the
package's own result in this process; and its DataLoader (forked workers,
pinned batches) where torch imports.

The parent opens clients (the package's, and the example's own) before
it forks, as a training script does."""
import importlib.util
import multiprocessing
import os
import pathlib
import sys

import cv2
import numpy as np
import pytest

import frameprep
from conftest import IMAGES

# The example in the tree, or where $FPREP_EXAMPLES puts it (the GPU
# bundle of tests/gpu/run-on-gpu.sh).
EXAMPLE = (pathlib.Path(os.environ["FPREP_EXAMPLES"]) / "dataloader.py"
           if os.environ.get("FPREP_EXAMPLES") else
           pathlib.Path(__file__).resolve().parents[2] / "src" / "python" /
           "examples" / "dataloader.py")
SIZE = (224, 224)
ITEMS = 100


def _example():
    """The example as a module named dataloader (in sys.modules, so that
    a pool pickles its functions by name)."""
    spec = importlib.util.spec_from_file_location("dataloader", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["dataloader"] = mod
    spec.loader.exec_module(mod)
    return mod


example = _example()


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """ITEMS paths of JPEG files, in turn: the photographs of IMAGES (the
    PNGs encoded as JPEG at quality 90, the JPEGs as they are)."""
    if not IMAGES.is_dir():
        pytest.fail(f"no photographs: {IMAGES} is missing (ctest's "
                    f"fetch_images makes it)")
    tmp = tmp_path_factory.mktemp("jpegs")
    files = []
    for p in sorted(IMAGES.iterdir()):
        if p.suffix == ".jpg":
            files.append(str(p))
        elif p.suffix == ".png":
            img = cv2.imread(str(p), cv2.IMREAD_COLOR)
            if img is None or min(img.shape[:2]) < 64:
                continue
            ok, data = cv2.imencode(".jpg", img,
                                    [cv2.IMWRITE_JPEG_QUALITY, 90])
            assert ok, p
            out = tmp / (p.stem + ".jpg")
            out.write_bytes(data.tobytes())
            files.append(str(out))
    assert len(files) >= 8, f"only {len(files)} photographs in {IMAGES}"
    return [files[i % len(files)] for i in range(ITEMS)]


@pytest.fixture(scope="module")
def want(daemon, jpegs):
    """The package's own result for each path, in this process:
    (tensor, (scale_x, scale_y, pad_x, pad_y))."""
    out = []
    with frameprep.Client(daemon.url, timeout=60) as c:
        for path in jpegs:
            with open(path, "rb") as f:
                r = c.preprocess(f.read(), size=SIZE, format="jpeg")
            t = r.transform
            out.append((r.tensor[0].copy(),
                        (t.scale_x, t.scale_y, t.pad_x, t.pad_y)))
    return out


def _work(args):
    """One pool item: the example's worker function, and who ran it."""
    path, url = args
    tensor, xf = example.preprocess_file(path, url, SIZE)
    return os.getpid(), tensor, xf


def test_worker_function_in_fork_pool(daemon, jpegs, want):
    # The parent's own client of the example, before the fork: the
    # workers must open theirs.
    tensor, _ = example.preprocess_file(jpegs[0], daemon.url, SIZE)
    assert np.array_equal(tensor, want[0][0])
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(4) as pool:
        # Bounded: a pool whose workers die is refilled for ever.
        got = pool.map_async(_work, [(p, daemon.url) for p in jpegs],
                             chunksize=5).get(timeout=240)
    assert len(got) == len(want)
    for k, ((_, tensor, xf), (w_tensor, w_xf)) in enumerate(zip(got, want)):
        assert tensor.dtype == np.float32 and tensor.shape == (3, *SIZE[::-1])
        assert np.array_equal(tensor, w_tensor), \
            f"item {k} ({jpegs[k]}): the worker's tensor differs"
        assert tuple(xf) == w_xf, f"item {k}: transform {xf} != {w_xf}"
    pids = {pid for pid, _, _ in got}
    assert os.getpid() not in pids
    assert len(pids) > 1, f"one worker did everything: {pids}"
    # The parent's client of the example still works after the fork.
    tensor, _ = example.preprocess_file(jpegs[1], daemon.url, SIZE)
    assert np.array_equal(tensor, want[1][0])


def test_dataloader_with_torch(daemon, jpegs, want):
    torch = pytest.importorskip(
        "torch", reason="torch is not installed: the example's DataLoader "
        "path is not run (test_worker_function_in_fork_pool checks its "
        "worker function in a fork pool without it)")
    # A client of the example in the parent first, as above.
    example.preprocess_file(jpegs[0], daemon.url, SIZE)
    loader = example.load(jpegs, daemon.url, SIZE, batch_size=8,
                          num_workers=4)
    k = 0
    for tensors, xfs in loader:
        assert isinstance(tensors, torch.Tensor)
        assert tensors.dtype == torch.float32
        if torch.cuda.is_available():
            assert tensors.is_pinned()
        on_device = example.to_device(tensors)
        for row, xf in zip(on_device.cpu().numpy(), xfs.numpy()):
            assert np.array_equal(row, want[k][0]), \
                f"item {k} ({jpegs[k]}): the loader's tensor differs"
            assert tuple(xf) == want[k][1]
            k += 1
    assert k == len(want)
