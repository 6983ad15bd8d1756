"""The benchmarks' processor, as ``s3wq work --processor bench_processor:mark`` runs it (in a processor host).

It sleeps S3WQ_BENCH_WORK_MS, then leaves one marker file per run of a group
in S3WQ_BENCH_MARK_DIR, so that a group processed twice is counted, not guessed.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

WORK_MS_ENV = "S3WQ_BENCH_WORK_MS"
MARK_DIR_ENV = "S3WQ_BENCH_MARK_DIR"


def mark(group, ctx=None) -> None:
    work_ms = float(os.environ.get(WORK_MS_ENV) or 0)
    if work_ms:
        time.sleep(work_ms / 1000)
    Path(os.environ[MARK_DIR_ENV], f"{group.hash}.{uuid.uuid4().hex}").touch()
