"""A correct processor that uses multiprocessing in every run (``reliability.pool_processor:both``).

Each run maps a job over a ``multiprocessing.Pool`` and a
``ProcessPoolExecutor``, both with the start method named by
``S3WQ_TEST_START_METHOD`` (fork, spawn or forkserver; forkserver is the
default on Linux from Python 3.14, the deployed worker's), and closes both
before it returns. multiprocessing starts its forkserver and resource
tracker lazily, inside the first run that needs them, and keeps them for the
process. A host records its start in ``S3WQ_TEST_HOST_DIR``.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .pool_work import square

START_METHOD_ENV = "S3WQ_TEST_START_METHOD"
HOST_DIR_ENV = "S3WQ_TEST_HOST_DIR"
JOBS = range(8)

if os.environ.get(HOST_DIR_ENV):
    Path(os.environ[HOST_DIR_ENV], str(os.getpid())).touch()


def both(group, ctx) -> None:
    context = multiprocessing.get_context(os.environ[START_METHOD_ENV])
    expected = [square(x) for x in JOBS]
    with context.Pool(2) as pool:
        pooled = pool.map(square, JOBS)
    with ProcessPoolExecutor(2, mp_context=context) as executor:
        executed = list(executor.map(square, JOBS))
    if pooled != expected or executed != expected:
        raise RuntimeError(f"wrong results: {pooled} {executed}")
    ctx.write_result([{"source": path, "squares": pooled} for path in group.paths])
