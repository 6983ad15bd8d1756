"""A processor that always fails on one group, named by S3WQ_TEST_POISON_HASH, and records every call."""

from __future__ import annotations

import os

from recording_processor import record

POISON_HASH_ENV = "S3WQ_TEST_POISON_HASH"


def process(group, ctx) -> None:
    record(group, ctx)
    if group.hash == os.environ[POISON_HASH_ENV]:
        raise RuntimeError(f"poisoned input in group {group.hash}")
