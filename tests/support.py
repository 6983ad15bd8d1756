"""Helpers shared by test modules (conftest.py holds only fixtures: pytest may load several conftests under one name)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from localstack_s3 import STORE_ENV

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.index import WorkIndex
from s3wq.model import LockState, Outcome
from s3wq.protocol.bodies import LockBody
from s3wq.store import Backend, layout

# The checkout the tests run from: the one place the tests find the repository's own files.
REPO_ROOT = Path(__file__).resolve().parent.parent
# Buckets named so answer a conditional DELETE with 501, as LocalStack's S3 does (see s3wq.dev.local_s3).
NO_CONDITIONAL_DELETE_BUCKETS = "nocd-"
# Buckets named so ignore If-None-Match and If-Match on writes (the moto server only): a store s3wq must refuse.
IGNORING_CONDITIONS_BUCKETS = "nocond-"
# The session's S3 server: moto (the default), or LocalStack's S3 (the optional tier, see localstack_s3.py).
STORES = ("moto", "localstack")
TEST_STORE = os.environ.get(STORE_ENV) or "moto"


def run_cli(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run ``python -m s3wq`` as a user would, in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "s3wq", *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy(), **kwargs
    )


def recount_status(backend: Backend) -> tuple[dict, set[str]]:
    """The count, group by group of the index (each group's own flags and lock), and the failed groups."""
    groups = {g.hash: len(g.paths) for g in WorkIndex(backend).iter_groups()}
    states: Counter = Counter()
    failed: set[str] = set()
    stale_in = []
    holders: dict[str, str] = {}
    ahead: list[tuple[str, str | None]] = []
    for hash_ in groups:
        lock_key = layout.lock_key(hash_)
        lock = body = None
        if backend.exists(lock_key):
            lock = backend.read(lock_key)
            body = LockBody.decode(lock.body)
        lease = FOREIGN_LOCK_TIMEOUT_SECONDS if body is None else body.lease_seconds
        if backend.exists(layout.done_key(hash_)):
            states["done"] += 1
        elif backend.exists(layout.failed_key(hash_)) or (body is not None and body.state == LockState.FAILED):
            failed.add(hash_)
        elif lock is not None and (body is None or body.held) and lock.age_seconds <= lease:
            states["locked"] += 1
            stale_in.append(lease - lock.age_seconds)
            if body is not None:
                holders[hash_] = body.owner
                if body.behind is not None:
                    ahead.append((body.behind, body.behind_owner))
        else:
            states["pending"] += 1
            states["released"] += body is not None and body.state == LockState.RELEASED
            states["unavailable"] += body is not None and body.state == LockState.RELEASED and body.outcome == Outcome.UNAVAILABLE
    total = len(groups)
    finished = states["done"] + len(failed)
    status = {
        "groups": total,
        "paths": sum(groups.values()),
        "done": states["done"],
        "failed": len(failed),
        "locked": states["locked"],
        "claimed_ahead": sum(1 for h, owner in ahead if owner is not None and holders.get(h) == owner),
        "pending": states["pending"],
        "remaining": total - finished,
        "finished": finished,
        "released": states["released"],
        "unavailable": states["unavailable"],
        "wait_seconds": math.ceil(max(stale_in) + backend.clock_resolution_seconds) + 1 if stale_in else 0,
    }
    return status, failed


def deletes_on_a_condition(workspace: str) -> bool:
    """Whether the store behind ``workspace`` deletes on an ETag, rather than answering 501 (ConditionalDeleteUnsupported).

    A local directory and the moto server do, but for the moto server's
    ``nocd-`` buckets; LocalStack's S3 does not, in any bucket.
    """
    if not workspace.startswith("s3://"):
        return True
    return TEST_STORE != "localstack" and not workspace.startswith(f"s3://{NO_CONDITIONAL_DELETE_BUCKETS}")


def assert_no_lock_left(backend: Backend, workspace: str, context: str = "") -> None:
    """Every group finished: nothing in the locks' folder; where the store cannot delete on a condition, only locks released as finished."""
    keys = list(backend.list_keys("worker_locks/"))
    if deletes_on_a_condition(workspace):
        assert keys == [], context
        return
    locks = [LockBody.decode(backend.read(key).body) for key in keys]
    assert all(lock is not None and (lock.state, lock.outcome) == (LockState.RELEASED, Outcome.FINISHED) for lock in locks), (
        f"{locks}; {context}"
    )


# The counts of `s3wq status --json`, whatever the workspace.
STATUS_KEYS = {
    "groups",
    "paths",
    "done",
    "failed",
    "locked",
    "claimed_ahead",
    "pending",
    "remaining",
    "finished",
    "released",
    "unavailable",
    "wait_seconds",
}
