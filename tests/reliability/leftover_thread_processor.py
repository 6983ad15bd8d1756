"""A processor that leaves a thread running behind its run, and the embedded worker process that runs it.

``process`` records its run in the format of :mod:`heartbeat_processor`, in
the directory named by ``S3WQ_TEST_MARK_DIR``: the run itself as call
``<run>-main``, and a thread it starts as call ``<run>-thread``, which beats
for ``THREAD_SECONDS`` from its own clock (``S3WQ_TEST_THREAD_SECONDS``:
that long instead, "inf" for ever). The run waits for the thread's
first beat, then raises, so that the group is tried again. A group whose
paths contain ``CHECKS_MARK`` has a thread that stops as soon as
``ctx.claim_is_held()`` is False; any other group's thread never looks. On
a later attempt the run beats for ``RETRY_SECONDS``, leaves nothing and
returns, so the group ends done.

``main`` is an embedded worker as a user writes one, ``Worker(backend, fn,
settings).run()``, in a process of its own: ``python -c "from
reliability.leftover_thread_processor import main; main()" WORKSPACE
WORKER_ID SETTINGS_JSON REPORT_PATH GO_FILE``. It starts its worker once
``GO_FILE`` exists, so that workers started one after another contend.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

from .heartbeat_processor import BEAT_SECONDS, MARK_DIR_ENV, Run, _mark, _write

THREAD_SECONDS = 1.0
THREAD_SECONDS_ENV = "S3WQ_TEST_THREAD_SECONDS"
RETRY_SECONDS = 0.5  # long enough to be seen beside a thread the first run left
CHECKS_MARK = "checks"
_MAIN = "main"
_THREAD = "thread"
_GO_POLL_SECONDS = 0.01
_GO_TIMEOUT_SECONDS = 60.0


def _beat_for(base: Path, seconds: float, go_on=lambda: True) -> None:
    _write(_mark(base, "start"), time.time_ns())
    until = time.monotonic() + seconds
    while time.monotonic() < until and go_on():
        _write(_mark(base, "beat"), time.time_ns())
        time.sleep(BEAT_SECONDS)
    _write(_mark(base, "end"), time.time_ns())


def process(group, ctx) -> None:
    run = os.urandom(6).hex()
    stem = Path(os.environ[MARK_DIR_ENV]) / f"{group.hash}.{ctx.worker_id}.{ctx.attempt}.{run}"
    main = stem.with_name(f"{stem.name}-{_MAIN}")
    if ctx.attempt > 1:
        _beat_for(main, RETRY_SECONDS)
        return
    checks = any(CHECKS_MARK in path for path in group.paths)
    beating = threading.Event()

    def beat() -> None:
        beating.set()
        seconds = float(os.environ.get(THREAD_SECONDS_ENV, THREAD_SECONDS))
        _beat_for(stem.with_name(f"{stem.name}-{_THREAD}"), seconds, ctx.claim_is_held if checks else lambda: True)

    _write(_mark(main, "start"), time.time_ns())
    threading.Thread(target=beat, name="beat", daemon=True).start()
    beating.wait()
    _write(_mark(main, "beat"), time.time_ns())
    _write(_mark(main, "end"), time.time_ns())
    raise RuntimeError("failed, leaving a thread behind")


def run_of(record: Run) -> str:
    """Which run a record belongs to: its main call and its thread share it."""
    return record.call.rsplit("-", 1)[0]


def is_thread(record: Run) -> bool:
    return record.call.endswith(f"-{_THREAD}")


def overlap_between_runs(records: list[Run]) -> float:
    """Total time during which records of two different runs on one group were running at once (a run's thread beside its own run is not overlap)."""
    total = 0
    records = sorted(records, key=lambda r: r.start_ns)
    for i, earlier in enumerate(records):
        for later in records[i + 1 :]:
            if later.hash == earlier.hash and run_of(later) != run_of(earlier):
                total += max(0, min(earlier.running_until_ns, later.running_until_ns) - later.start_ns)
    return total / 1e9


def main() -> None:
    workspace, worker_id, settings, report_path, go_file = sys.argv[1:]
    from s3wq import Worker, WorkerSettings, open_backend

    backend = open_backend(workspace)
    give_up = time.monotonic() + _GO_TIMEOUT_SECONDS
    while not os.path.exists(go_file):
        if time.monotonic() > give_up:
            raise SystemExit(f"{worker_id}: no go file after {_GO_TIMEOUT_SECONDS:.0f} s")
        time.sleep(_GO_POLL_SECONDS)
    report = Worker(backend, process, WorkerSettings(**json.loads(settings)), worker_id=worker_id).run()
    Path(report_path).write_text(json.dumps(asdict(report)))
