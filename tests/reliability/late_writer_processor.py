"""A processor whose module-level thread writes for a group after its run has ended (``reliability.late_writer_processor:process``).

Each run writes its result, sleeps ``RUN_SECONDS``, hands its ``ctx`` to a
thread the module started at import (the module's own, kept between runs)
and returns. The thread, ``LATE_SECONDS`` after a run
handed it a ctx -- while the next group runs -- asks ``claim_is_held()`` and
tries ``write_result`` and ``ctx.backend.write`` with it, and writes what it
saw as one JSON line in ``S3WQ_TEST_MARK_DIR``.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from pathlib import Path

RUN_SECONDS = 1.0
LATE_SECONDS = 0.5
LATE_KEY = "late-writes/{hash}"

_handed: queue.Queue = queue.Queue()


def _try_writes(ctx) -> dict:
    """What a late writer sees: whether the claim is held, and what each write raised."""
    seen = {"hash": ctx.group.hash, "held": ctx.claim_is_held(), "refused": []}
    writes = (
        ("write_result", lambda: ctx.write_result([{"source": "late"}])),
        ("backend.write", lambda: ctx.backend.write(LATE_KEY.format(hash=ctx.group.hash), b"late")),
    )
    for name, write in writes:
        try:
            write()
        except Exception as exc:  # noqa: BLE001 -- what the write raised is what the test reads
            seen["refused"].append(f"{name}: {type(exc).__name__}: {exc}")
    return seen


def _write_late() -> None:
    while True:
        ctx, handed_at = _handed.get()
        time.sleep(max(0.0, handed_at + LATE_SECONDS - time.monotonic()))
        Path(os.environ["S3WQ_TEST_MARK_DIR"], f"{ctx.group.hash}.late.json").write_text(json.dumps(_try_writes(ctx)))


threading.Thread(target=_write_late, daemon=True, name="late-writer").start()


def process(group, ctx) -> None:
    ctx.write_result([{"source": path, "on_time": True} for path in group.paths])
    time.sleep(RUN_SECONDS)
    _handed.put((ctx, time.monotonic()))  # as the run returns: the thread writes during the next one
