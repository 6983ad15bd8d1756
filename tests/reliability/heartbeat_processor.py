"""A processor that says, from its own clock, exactly when it was running (``reliability.heartbeat_processor:process``).

Each call writes, in the directory named by ``S3WQ_TEST_MARK_DIR``::

    <hash>.<worker_id>.<attempt>.<call>.start   the time it started (ns)
    <hash>.<worker_id>.<attempt>.<call>.beat    the last time it was running, rewritten every BEAT_SECONDS
    <hash>.<worker_id>.<attempt>.<call>.end     the time it returned
    <hash>.<worker_id>.<attempt>.<call>.deadline  ctx.deadline (ns): when the worker meant to stop the run

A call that was stopped (killed) has no end: it ran until at most one beat
after its last beat. Two calls on one group overlap if one started before
the other had certainly stopped -- the measure the lease tests assert is 0.

``S3WQ_TEST_GROUP_SECONDS`` is how long a call takes ("hang": until it is
stopped); ``S3WQ_TEST_SECONDS_FOR`` (JSON, path substring -> seconds) gives
some groups their own time. With ``S3WQ_TEST_ONLY_FIRST_CALL_SLOW`` set, only a group's first
call takes that long, and later calls take ``QUICK_SECONDS``: the first call
leaves a marker object in the workspace (a create that only one call can win).

With ``S3WQ_TEST_RUN_UNTIL_FILE`` a call also returns as soon as that file
exists: a test ties a run's length to events (other workers have come and
gone), not to a guess of how long they take on a loaded machine.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from s3wq.errors import ObjectExists

MARK_DIR_ENV = "S3WQ_TEST_MARK_DIR"
SECONDS_ENV = "S3WQ_TEST_GROUP_SECONDS"
SECONDS_FOR_ENV = "S3WQ_TEST_SECONDS_FOR"
ONLY_FIRST_ENV = "S3WQ_TEST_ONLY_FIRST_CALL_SLOW"
RUN_UNTIL_ENV = "S3WQ_TEST_RUN_UNTIL_FILE"
BEAT_SECONDS = 0.02
QUICK_SECONDS = 0.2
BEAT_NS = int(BEAT_SECONDS * 1e9)


def _mark(base: Path, kind: str) -> Path:
    return base.parent / f"{base.name}.{kind}"


def _write(path: Path, ns: int) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(str(ns))
    os.replace(temporary, path)  # a reader sees the old beat or the new one, never half of one


def _seconds(group, ctx) -> float:
    raw = os.environ.get(SECONDS_ENV, "0")
    for part, seconds in json.loads(os.environ.get(SECONDS_FOR_ENV, "{}")).items():
        if any(part in path for path in group.paths):
            raw = str(seconds)
    if os.environ.get(ONLY_FIRST_ENV):
        try:
            ctx.backend.create(f"test-markers/first-{group.hash}", b"")
        except ObjectExists:
            return QUICK_SECONDS
    return float("inf") if raw == "hang" else float(raw)


def process(group, ctx) -> None:
    base = Path(os.environ[MARK_DIR_ENV]) / f"{group.hash}.{ctx.worker_id}.{ctx.attempt}.{os.urandom(6).hex()}"
    # Seconds first: a worker killed once "start" exists must already have
    # claimed the first call's marker, or its taker would take the slow call.
    seconds = _seconds(group, ctx)
    if math.isfinite(ctx.deadline):  # before "start": a reader that sees a run sees its deadline
        _write(_mark(base, "deadline"), int(ctx.deadline * 1e9))
    _write(_mark(base, "start"), time.time_ns())
    until = time.monotonic() + seconds
    release = os.environ.get(RUN_UNTIL_ENV)
    while time.monotonic() < until and not (release and os.path.exists(release)):
        _write(_mark(base, "beat"), time.time_ns())
        time.sleep(BEAT_SECONDS)
    _write(_mark(base, "end"), time.time_ns())


@dataclass
class Run:
    hash: str
    worker: str
    attempt: int
    call: str
    start_ns: int
    beat_ns: int | None = None
    end_ns: int | None = None
    deadline_ns: int | None = None  # when the worker meant to stop the run (its ctx.deadline)

    @property
    def running_until_ns(self) -> int:
        """When the call had certainly stopped: its end, or one beat after its last beat."""
        if self.end_ns is not None:
            return self.end_ns
        return (self.beat_ns or self.start_ns) + BEAT_NS

    @property
    def seconds(self) -> float:
        return (self.running_until_ns - self.start_ns) / 1e9


def read_runs(directory: Path) -> list[Run]:
    """Every call recorded in ``directory``, by start time."""
    runs: dict[str, Run] = {}
    marks: list[tuple[str, str, int]] = []
    for path in directory.iterdir():
        if path.name.endswith(".tmp"):
            continue
        stem, kind = path.name.rsplit(".", 1)
        hash_, worker, attempt, call = stem.split(".")
        ns = int(path.read_text())
        if kind == "start":
            runs[call] = Run(hash_, worker, int(attempt), call, ns)
        else:
            marks.append((call, kind, ns))
    for call, kind, ns in marks:
        if call in runs:  # a deadline is written just before its start
            setattr(runs[call], f"{kind}_ns", ns)
    return sorted(runs.values(), key=lambda r: r.start_ns)


def overlap_seconds(runs: list[Run]) -> float:
    """Total time during which two calls on the same group were running at once."""
    total = 0
    for i, earlier in enumerate(runs):
        for later in runs[i + 1 :]:
            if later.hash == earlier.hash:
                total += max(0, min(earlier.running_until_ns, later.running_until_ns) - later.start_ns)
    return total / 1e9
