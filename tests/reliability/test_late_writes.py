"""A ctx ends with its run in the processor host: a thread the module keeps cannot write for a group once its run is over.

The module's own thread (:mod:`late_writer_processor`) is handed each run's
ctx and writes with it while the next group runs. Before, every ctx shared
the host's "a run is in progress" state, so ``claim_is_held()`` answered
True and the late write replaced a done group's result. Now the run's end
ends its ctx: it answers False, and every write through it is refused.
"""

from __future__ import annotations

import json

from s3wq.store import layout

from .late_writer_processor import LATE_KEY
from .test_containment import populate
from .worker_processes import start_worker

GROUPS = 3


def test_a_thread_holding_an_old_ctx_can_write_nothing(s3_workspace, s3_backend, child_env, mark_dir, tmp_path):
    hashes = populate(s3_backend, GROUPS)
    worker = start_worker(s3_workspace, "A", processor="reliability.late_writer_processor:process", env=child_env, log_dir=tmp_path)
    assert worker.wait() == 0, worker.stderr()
    report = worker.report()
    assert (report["processed"], report["leftovers"]) == (GROUPS, 0), report

    seen = [json.loads(path.read_text()) for path in mark_dir.glob("*.late.json")]
    # The last group's thread may not get its turn before the host ends: the groups before it did, during a later run.
    assert len(seen) >= GROUPS - 1, seen
    for late in seen:
        assert late["held"] is False, late
        assert len(late["refused"]) == 2 and all("LeaseLost" in r and "has ended" in r for r in late["refused"]), late
    for hash_ in hashes:
        [record] = [json.loads(line) for line in s3_backend.read(layout.result_key(hash_)).body.splitlines()]
        assert record.get("on_time") is True, record
        assert not s3_backend.exists(LATE_KEY.format(hash=hash_))
