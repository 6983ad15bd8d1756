"""An olmocr-style worker beside s3wq's: ``python -m reliability.olmocr_neighbour WORKSPACE FOREIGN_TIMEOUT SIGNALS_DIR``.

It does what olmocr's work queue does with a lock, scaled down to a
foreign timeout of a few seconds: list ``worker_locks/``, and take any lock
older than the timeout -- by its LastModified against this process's clock
-- with an unconditional PUT of an empty lock; run the group (the heartbeat
processor, as worker ``olmocr``), write the done flag, delete the lock.
Check, then act: nothing stops an s3wq worker from writing between the two.

Its runs leave their heartbeats in ``S3WQ_TEST_MARK_DIR``. In SIGNALS_DIR it
leaves ``took.<hash>`` when it takes a lock and ``passes`` (how many
listings it finished), so that a test can tie its own steps to the
neighbour's; it stops once a file ``stop`` appears there.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from s3wq import WorkIndex, open_backend
from s3wq.store import layout

from .heartbeat_processor import process

POLL_SECONDS = 0.02
# S3's LastModified is whole seconds: a write may have come up to a second later. Scaled down to a foreign
# timeout of seconds, that second matters as it never does at olmocr's 1,800 s (s3wq stops 5 s early), so
# the neighbour gives it back.
LAST_MODIFIED_RESOLUTION_SECONDS = 1.0


def main(workspace: str, foreign_timeout: float, signals: Path) -> None:
    backend = open_backend(workspace)
    groups = {g.hash: g for g in WorkIndex(backend).iter_groups()}
    root = workspace.removeprefix("s3://").partition("/")[2].strip("/") + "/"
    passes = 0
    while not (signals / "stop").exists():
        listed = backend.s3.list_objects_v2(Bucket=backend.bucket, Prefix=root + layout.LOCKS_PREFIX).get("Contents", [])
        for item in listed:
            hash_ = layout.hash_from_key(item["Key"].removeprefix(root), layout.LOCKS_PREFIX, layout.LOCK_SUFFIX)
            age = time.time() - item["LastModified"].timestamp() - LAST_MODIFIED_RESOLUTION_SECONDS
            if hash_ is None or hash_ not in groups or age <= foreign_timeout:
                continue
            if backend.exists(layout.done_key(hash_)):
                continue
            backend.write(layout.lock_key(hash_), b"")  # olmocr's lock: empty, and written without a condition
            (signals / f"took.{hash_}").write_text(str(time.time_ns()))
            process(groups[hash_], SimpleNamespace(worker_id="olmocr", attempt=1, deadline=float("inf"), backend=backend))
            backend.write(layout.done_key(hash_), b"")
            backend.delete(layout.lock_key(hash_))
        passes += 1
        (signals / "passes.tmp").write_text(str(passes))
        os.replace(signals / "passes.tmp", signals / "passes")
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), Path(sys.argv[3]))
