"""Processors for worker processes started by the integration tests (imported through PYTHONPATH).

Every call leaves one empty file ``<hash>.<worker_id>.<uuid4>`` in the
directory named by S3WQ_TEST_RECORD_DIR, so a test counts how often each
group was processed, by whom, from the files alone -- whatever process made
the call.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

RECORD_DIR_ENV = "S3WQ_TEST_RECORD_DIR"


def record(group, ctx) -> None:
    directory = Path(os.environ[RECORD_DIR_ENV])
    # Exclusive create: a name clash would be a lost record, so make it an error.
    with open(directory / f"{group.hash}.{ctx.worker_id}.{uuid.uuid4().hex}", "x"):
        pass
