"""The real olmocr work queue (PyPI ``olmocr``), run beside s3wq in the benchmarks.

The published package is installed on first use into ``bench/.olmocr`` with
``pip install --no-deps --target`` -- a bench-only environment: only its work
queue module is used, and none of its code is copied here. That module
imports, through ``olmocr.s3_utils``, a Google Cloud Storage client and tqdm
that the S3 queue never calls; they are stubbed in ``sys.modules`` before the
import, so nothing else needs installing.

A worker is olmocr's own loop as its pipeline drives it:
``initialize_queue()``, then ``get_work()`` / process / ``mark_done()`` until
``get_work()`` returns None. Each worker has its own ``WorkQueue``, as each
machine of an olmocr fleet has.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

OLMOCR_VERSION = "0.4.27"
INSTALL_DIR = Path(__file__).resolve().parent / ".olmocr"
# olmocr's own default (get_work's worker_lock_timeout_secs).
LOCK_TIMEOUT_SECONDS = 1800


def ensure_installed() -> Path:
    """Install the pinned olmocr into bench/.olmocr (no dependencies) unless it is there already."""
    marker = INSTALL_DIR / f"olmocr-{OLMOCR_VERSION}.dist-info"
    if not marker.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--target",
                str(INSTALL_DIR),
                f"olmocr=={OLMOCR_VERSION}",
            ],
            check=True,
        )
    return INSTALL_DIR


def _stub(name: str, **attributes: Any) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        sys.modules[name] = module


def work_queue_module() -> types.ModuleType:
    """``olmocr.work_queue``, imported from the bench-only install."""
    if str(ensure_installed()) not in sys.path:
        sys.path.insert(0, str(INSTALL_DIR))
    # Imported by olmocr.s3_utils, never used by the S3 work queue.
    _stub("google")
    _stub("google.cloud")
    _stub("google.cloud.storage", Client=None)
    sys.modules["google"].cloud = sys.modules["google.cloud"]  # type: ignore[attr-defined]
    sys.modules["google.cloud"].storage = sys.modules["google.cloud.storage"]  # type: ignore[attr-defined]
    _stub("tqdm", tqdm=lambda iterable=None, *args, **kwargs: iterable)
    module = importlib.import_module("olmocr.work_queue")
    logging.getLogger().setLevel(logging.WARNING)  # olmocr's import turns on INFO logging for everything
    return module


def populate(s3_client: Any, workspace_uri: str, paths: list[str], group_size: int) -> None:
    wq = work_queue_module()
    asyncio.run(wq.WorkQueue(wq.S3Backend(s3_client, workspace_uri)).populate_queue(paths, group_size))


def run_worker(
    s3_client: Any,
    workspace_uri: str,
    processor: Callable[[Any], None],
    *,
    lock_timeout: int = LOCK_TIMEOUT_SECONDS,
    max_groups: int | None = None,
) -> dict:
    """Drain the queue as one olmocr worker (or stop after ``max_groups``); ``processor`` gets each WorkItem (``hash``, ``work_paths``)."""
    wq = work_queue_module()
    queue = wq.WorkQueue(wq.S3Backend(s3_client, workspace_uri))
    report = {"processed": 0, "queued_at_start": 0}

    async def drain() -> None:
        report["queued_at_start"] = await queue.initialize_queue()
        while (item := await queue.get_work(lock_timeout)) is not None:
            await asyncio.to_thread(processor, item)
            await queue.mark_done(item)
            report["processed"] += 1
            if max_groups is not None and report["processed"] >= max_groups:
                return

    asyncio.run(drain())
    return report
