"""The workspace bench/status_scale.py fills: which groups are done, failed and locked, and what status must count in it."""

from __future__ import annotations

import json
import random

from s3wq.index import make_groups
from s3wq.model import LockState
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

DONE_FRACTION, FAILED_FRACTION, LOCKS_PER_THOUSAND = 0.60, 0.01, 1.0
LEASE_SECONDS = 900.0
# The kinds of the N/1000 extra locks, in turn: two held, one released, one marked failed (its flag deleted), one olmocr's.
LOCK_KINDS = ("held", "held", "released", "failed-lock-only", "olmocr")
FOREIGN_KEYS = (
    "done_flags/done_not-a-hash.flag",
    "done_flags/notes.txt",
    "worker_locks/worker_" + "A" * 40 + ".lock",
    "failed_flags/x.json",
)


def input_paths(count: int) -> list[str]:
    return [f"s3://bench-inputs/pdfs/batch-{n // 1000:05d}/doc-{n:08d}.pdf" for n in range(count)]


def workspace_objects(paths: list[str], seed: int) -> tuple[dict[str, str], dict]:
    """Every flag and lock of the workspace (key -> body), and the counts ``status`` and ``failures`` must find."""
    groups = make_groups(paths, 1)
    order = list(groups)
    random.Random(seed).shuffle(order)
    n_done = round(len(groups) * DONE_FRACTION)
    n_failed = round(len(groups) * FAILED_FRACTION)
    n_locks = max(1, round(len(groups) * LOCKS_PER_THOUSAND / 1000))
    done, failed, locked = order[:n_done], order[n_done : n_done + n_failed], order[n_done + n_failed : n_done + n_failed + n_locks]
    objects: dict[str, str] = {}
    for group in done:
        objects[layout.done_key(group.hash)] = json.dumps({"worker_id": "w1", "attempt": 1, "owner": f"w1:{group.hash[:8]}"})
    for group in failed:
        doc = {
            "hash": group.hash,
            "paths": list(group.paths),
            "attempts": 3,
            "kind": "error",
            "error": "RuntimeError: bad scan",
            "worker_id": "w2",
        }
        objects[layout.failed_key(group.hash)] = json.dumps(doc)
        objects[layout.lock_key(group.hash)] = lock_body(group.hash, LockState.FAILED)
    kinds = dict.fromkeys(LOCK_KINDS, 0)
    for n, group in enumerate(locked):
        kind = LOCK_KINDS[n % len(LOCK_KINDS)]
        kinds[kind] += 1
        state = {"held": LockState.HELD, "released": LockState.RELEASED, "failed-lock-only": LockState.FAILED}.get(kind)
        objects[layout.lock_key(group.hash)] = "" if kind == "olmocr" else lock_body(group.hash, state)
    objects.update(dict.fromkeys(FOREIGN_KEYS, "{}"))
    failed_total = n_failed + kinds["failed-lock-only"]
    live = kinds["held"] + kinds["olmocr"]
    expected = {
        "groups": len(groups),
        "paths": len(paths),
        "done": n_done,
        "failed": failed_total,
        "locked": live,
        "pending": len(groups) - n_done - failed_total - live,
        "released": kinds["released"],
        "failures_listed": n_failed,
        "lock_keys": n_failed + n_locks,
        "unflagged_locks": n_locks,
    }
    return objects, expected


def lock_body(hash_: str, state: str) -> str:
    return LockBody(owner=f"w3:{hash_[:8]}", worker_id="w3", attempt=3, lease_seconds=LEASE_SECONDS, state=state).encode().decode("utf-8")
