"""Processors for ``s3wq work -j`` tests: each run is recorded (see recording_processor) before it does anything else.

``meets`` holds each worker's first group until as many workers as
S3WQ_TEST_JOBS have each started one, so that every worker of the run is
seen whatever the machine's load; it then reports two pages and writes its
worker id as the group's result. ``holds`` runs until it is stopped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from recording_processor import RECORD_DIR_ENV, record

JOBS_ENV = "S3WQ_TEST_JOBS"
MEET_TIMEOUT_SECONDS = 120.0


def workers_seen() -> set[str]:
    return {name.split(".")[1] for name in os.listdir(Path(os.environ[RECORD_DIR_ENV]))}


def meets(group, ctx) -> None:
    record(group, ctx)
    deadline = time.monotonic() + MEET_TIMEOUT_SECONDS
    while len(workers_seen()) < int(os.environ.get(JOBS_ENV, "3")) and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx.pages_done(2)
    ctx.write_result([{"hash": group.hash, "worker_id": ctx.worker_id}])


def holds(group, ctx) -> None:
    record(group, ctx)
    time.sleep(600)
