#!/usr/bin/env python3
"""mypy_blocks.py: python_mypy's check, mypy --strict in one run over the
package, typed_use.py, every ```python block of README.md and
src/python/README.md (found by tests/deploy/readme_blocks.py, as
deploy_readme_blocks finds them to run them), and src/python/examples/*.py.

A block is code as a reader pastes it: each becomes a module of its own,
after a prelude that declares the reader's own names the fragments use
(frames, paths, decode_into, model) and the imports they take as read
(asyncio, numpy, torch, frameprep); a block with a top-level await or
async with goes inside an async function. mypy's complaints are printed
against the document's lines. PyTorch and torchvision are not installed
in CI: the stubs in tests/python/stubs (what that code calls, as PyTorch
declares it) stand in for them, on MYPYPATH, whether or not they are.

Usage: mypy_blocks.py --config PYPROJECT --cache-dir DIR
Exits with mypy's status (1 when a block or file does not check).
"""
import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "deploy"))
import readme_blocks  # noqa: E402: found on the path set just above

DOCS = ["README.md", "src/python/README.md"]
PRELUDE = '''\
# The reader's own names that the documents' fragments use.
from typing import Any
import asyncio
import numpy as np
import numpy.typing as npt
import torch
import frameprep
frames: list[npt.NDArray[np.uint8]] = []
paths: list[str] = []
def decode_into(buf: npt.NDArray[np.uint8]) -> None: ...
def model(batch: Any) -> Any: ...
'''
MYPY_LINE = re.compile(r"^(?P<path>[^:\s]+\.py):(?P<line>\d+):(?P<rest>.*)$")


def top_level_await(body):
    """Whether body awaits (await, async with, async for) outside any
    async function."""
    def walk(node, in_async):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Await, ast.AsyncWith, ast.AsyncFor)) \
                    and not in_async:
                return True
            if walk(child, in_async or
                    isinstance(child, ast.AsyncFunctionDef)):
                return True
        return False
    return walk(ast.parse(body), False)


def write_blocks(tmp):
    """Writes each python block as a module in tmp; returns {path:
    (document, the block's first line, lines before the block's first line
    in the module)}."""
    where = {}
    for doc in DOCS:
        for line, _, lang, body in readme_blocks.blocks(
                os.path.join(ROOT, doc)):
            if lang != "python":
                continue
            head = PRELUDE
            if top_level_await(body):
                head += "async def _block() -> None:\n"
                body = "".join("    " + ln if ln.strip() else ln
                               for ln in body.splitlines(True))
            name = re.sub(r"\W", "_", doc[:-3]).lower()
            path = os.path.join(tmp, f"block_{name}_{line}.py")
            with open(path, "w") as f:
                f.write(head + body)
            where[path] = (doc, line, head.count("\n"))
    return where


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--cache-dir", required=True)
    args = ap.parse_args()
    examples = os.path.join(ROOT, "src", "python", "examples")
    with tempfile.TemporaryDirectory(prefix="fprep-mypy-") as tmp:
        where = write_blocks(tmp)
        files = [os.path.join(ROOT, "src", "python", "frameprep"),
                 os.path.join(HERE, "typed_use.py")] + sorted(
            os.path.join(examples, f) for f in os.listdir(examples)
            if f.endswith(".py")) + sorted(where)
        env = dict(os.environ, MYPYPATH=os.path.join(HERE, "stubs"))
        p = subprocess.run([sys.executable, "-m", "mypy", "--strict",
                            "--config-file", args.config, "--cache-dir",
                            args.cache_dir, *files], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        for ln in p.stdout.splitlines():
            m = MYPY_LINE.match(ln)
            got = m and where.get(os.path.join(tmp, os.path.basename(
                m.group("path"))))
            if got:
                doc, first, before = got
                n = int(m.group("line")) - before
                ln = (f"{doc}:{first + n}:{m.group('rest')}" if n > 0 else
                      f"{doc}:{first} (the prelude, line "
                      f"{m.group('line')}):{m.group('rest')}")
            print(ln)
    print(f"checked: the package, typed_use.py, {len(files) - 2 - len(where)}"
          f" examples, {len(where)} python blocks of {', '.join(DOCS)}")
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
