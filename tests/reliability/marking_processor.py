"""Processors for the worker processes of the reliability tests (``reliability.marking_processor:process``).

Each call leaves empty files in the directory named by ``S3WQ_TEST_MARK_DIR``,
and everything a test needs is in their names::

    <hash>.<worker_id>.<attempt>.<call>.<start_ns>.start   when the call begins
    <hash>.<worker_id>.<attempt>.<call>.<end_ns>.end       when it returns
    <hash>.<worker_id>.<attempt>.<call>.<end_ns>.raised    when it raises (a poisoned group)

A worker killed mid-group leaves a start marker without an end. Names, not
contents, so that a reader never sees a half-written marker.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

MARK_DIR_ENV = "S3WQ_TEST_MARK_DIR"
SECONDS_ENV = "S3WQ_TEST_PROCESS_SECONDS"  # "low,high": each call sleeps a uniform time in between
POISON_ENV = "S3WQ_TEST_POISON_HASHES"  # comma-separated hashes whose every call raises


def _mark(group, ctx, call: str, what: str) -> None:
    name = f"{group.hash}.{ctx.worker_id}.{ctx.attempt}.{call}.{time.time_ns()}.{what}"
    os.close(os.open(Path(os.environ[MARK_DIR_ENV]) / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))


def process(group, ctx) -> None:
    call = uuid.uuid4().hex
    _mark(group, ctx, call, "start")
    low, high = (float(x) for x in os.environ.get(SECONDS_ENV, "0,0").split(","))
    time.sleep(random.uniform(low, high))
    if group.hash in os.environ.get(POISON_ENV, "").split(","):
        _mark(group, ctx, call, "raised")
        raise RuntimeError(f"poisoned input in group {group.hash}")
    _mark(group, ctx, call, "end")


@dataclass
class Call:
    hash: str
    worker: str
    attempt: int
    call: str
    start_ns: int
    end_ns: int | None = None
    outcome: str | None = None  # "end", "raised", or None while running (or killed)


def read_calls(directory: Path) -> list[Call]:
    """Every call recorded in ``directory``, by start time."""
    calls: dict[str, Call] = {}
    ends = []
    for name in os.listdir(directory):
        hash_, worker, attempt, call, ns, what = name.split(".")
        if what == "start":
            calls[call] = Call(hash_, worker, int(attempt), call, int(ns))
        else:
            ends.append((call, int(ns), what))
    for call, ns, what in ends:
        calls[call].end_ns, calls[call].outcome = ns, what
    return sorted(calls.values(), key=lambda c: c.start_ns)
