"""Listing a workspace's groups by state, a page at a time: ``s3wq status WS --list STATE``.

A group's state is judged as :func:`s3wq.ops.status.queue_status` counts it
(done flag; failed flag or a lock marked failed; a live lock; pending
otherwise), and a lock's staleness by :class:`LockReading`, the one judgement
the claim path uses too. The listing is in hash order, so a page ends at a
hash and the next starts after it: the flags are listed by hash prefix
(:func:`flag_partitions`, as a count lists them), from the cursor's prefix
on, and only until the page is full. Memory: one partition's flags (and, for
pending, its groups of the index), never the whole index or every lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.index import WorkIndex
from s3wq.ops.inspection import read_record
from s3wq.ops.status import flag_partitions, index_counts, iter_hashes, partition_digits
from s3wq.protocol.locks import LockReading, read_locks
from s3wq.store import MAX_PARALLEL_REQUESTS, Backend, layout

DEFAULT_LIST_LIMIT = 50


class ListedState(StrEnum):
    """What ``status --list`` lists: the four states a count counts, and two kinds of pending group."""

    LOCKED = "locked"  # a live lock: a worker runs it (or claimed it ahead)
    FAILED = "failed"
    PENDING = "pending"  # the next worker may take it: never run, handed back, or its holder's lease ran out
    DONE = "done"
    RELEASED = "released"  # pending, handed back by its holder (the outcome says why)
    STALE = "stale"  # pending, held by a holder whose lease ran out: the next claim takes it over


@dataclass(frozen=True)
class GroupPage:
    """One page of groups in one state: their rows, in hash order, and the hash to list the next page after (None: the last)."""

    state: ListedState
    groups: list[dict]
    next_after: str | None


@dataclass(frozen=True)
class _Found:
    hash: str
    state: ListedState
    lock: LockReading | None


def _index_hashes(backend: Backend, partition: str) -> set[str]:
    """The hashes of the index's groups under ``partition``: the catalog's segments that may hold one, and olmocr's index streamed."""
    index = WorkIndex(backend)
    catalog, _ = index.read_catalog()
    keys = [s.key for s in catalog.segments if s.prefix.startswith(partition) or partition.startswith(s.prefix)]
    found: set[str] = set()
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-list") as pool:
        # A segment's groups are dropped as soon as its partition's hashes are taken from them.
        for groups in pool.map(lambda k: [g.hash for g in index.load(k) if g.hash.startswith(partition)], keys):
            found.update(groups)
    found.update(g.hash for g in index.legacy_groups() if g.hash.startswith(partition))
    return found


def _pending_state(lock: LockReading | None) -> ListedState:
    if lock is not None and lock.stale:
        return ListedState.STALE
    if lock is not None and lock.released:
        return ListedState.RELEASED
    return ListedState.PENDING


def _partition_states(backend: Backend, partition: str, wanted: ListedState, foreign_lock_timeout: float) -> list[_Found]:
    """Every group under ``partition`` in state ``wanted``, in hash order (a pending one's kind in its ``state``).

    Listed as a count lists a partition: failed flags, then locks, then done
    flags last (a group's done flag is written before its lock goes, so a
    group finishing meanwhile is found done, not pending).
    """
    failed = set(iter_hashes(backend, layout.FAILED_PREFIX, layout.FAILED_SUFFIX, partition))
    lock_hashes = set(iter_hashes(backend, layout.LOCKS_PREFIX, layout.LOCK_SUFFIX, partition))
    done = set(iter_hashes(backend, layout.DONE_PREFIX, layout.DONE_SUFFIX, partition))
    if wanted == ListedState.DONE:
        return [_Found(h, wanted, None) for h in sorted(done)]
    locks = read_locks(backend, sorted(lock_hashes - failed - done), foreign_lock_timeout=foreign_lock_timeout)
    failed = (failed - done) | {h for h, lock in locks.items() if lock.failed}
    if wanted == ListedState.FAILED:
        return [_Found(h, wanted, locks.get(h)) for h in sorted(failed)]
    live = {h for h, lock in locks.items() if lock.live}
    if wanted == ListedState.LOCKED:
        return [_Found(h, wanted, locks[h]) for h in sorted(live)]
    # A lock gone between its listing and its read most often went with its
    # group's completion: such a group is left out unless its done flag is
    # still missing now (it was handed back by deletion).
    vanished = {h for h in lock_hashes - failed - done if h not in locks and backend.exists(layout.done_key(h))}
    pending = _index_hashes(backend, partition) - done - failed - live - vanished
    found = [_Found(h, _pending_state(locks.get(h)), locks.get(h)) for h in sorted(pending)]
    return found if wanted == ListedState.PENDING else [f for f in found if f.state == wanted]


def _after(found: list[_Found], after: str | None) -> list[_Found]:
    return found if after is None else [f for f in found if f.hash > after]


def _matching(backend: Backend, wanted: ListedState, after: str | None, foreign_lock_timeout: float) -> Iterator[_Found]:
    groups, _ = index_counts(backend)
    # Partitioned by the workspace's size whatever the store: a page lists only the partitions it reaches.
    for partition in flag_partitions(backend, groups, partition_digits(groups)):
        if after is not None and partition < after[: len(partition)]:
            continue
        yield from _after(_partition_states(backend, partition, wanted, foreign_lock_timeout), after)


def _age(lock: LockReading) -> dict:
    # A local lock written before this machine last booted has no age (its writer is gone).
    if lock.age_seconds == float("inf"):
        return {"written_before_last_boot": True}
    return {"age_seconds": round(lock.age_seconds, 1)}


def _lock_row(lock: LockReading) -> dict:
    row: dict = {"lease_seconds": lock.lease_seconds, **_age(lock)}
    if lock.live:
        row["stale_in_seconds"] = round(lock.stale_in, 1)
    body = lock.body
    if body is None:
        return {**row, "owner": None, "foreign": True}  # olmocr's lock is empty: honoured for the foreign timeout
    row.update(owner=body.owner, worker_id=body.worker_id, attempt=body.attempt, claimed_at=body.claimed_at)
    if body.outcome is not None:
        row["outcome"] = body.outcome
    if not body.held:
        row["counted"] = body.counted
    return row


def _first_line(text: object) -> str | None:
    return None if not isinstance(text, str) else (text.strip().splitlines() or [""])[0]


def _row(backend: Backend, found: _Found) -> dict:
    """What a user needs of one listed group: one or two reads of its records."""
    row: dict = {"hash": found.hash, "state": str(found.state)}
    lock = None if found.lock is None else _lock_row(found.lock)
    if found.state == ListedState.DONE:
        doc = read_record(backend, layout.done_key(found.hash)) or {}
        row.update(finished_at=doc.get("finished_at"), attempt=doc.get("attempt"), worker_id=doc.get("worker_id"))
        row["input_errors"] = doc.get("input_errors", 0)
    elif found.state == ListedState.FAILED:
        flag = read_record(backend, layout.failed_key(found.hash))
        if flag is None and found.lock is not None and found.lock.body is not None:
            # A lock marked failed whose flag was deleted by hand: the lock says what it knows.
            body = found.lock.body
            flag = {"attempts": body.attempt, "error": body.error, "worker_id": body.worker_id, "kind": body.outcome}
        doc = flag or {}
        row.update(attempts=doc.get("attempts"), kind=doc.get("kind", "error"), failed_at=doc.get("failed_at"))
        row.update(worker_id=doc.get("worker_id"), error=_first_line(doc.get("error")))
    elif found.state == ListedState.LOCKED:
        row.update(lock or {})
        row["lease"] = "live"
    else:
        row["state"] = str(ListedState.PENDING)
        row["lock"] = None if lock is None else {"lease": "stale" if found.state == ListedState.STALE else "released", **lock}
        row["never_run"] = found.lock is None
    return row


def list_groups(
    backend: Backend,
    state: ListedState,
    *,
    limit: int = DEFAULT_LIST_LIMIT,
    after: str | None = None,
    foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS,
) -> GroupPage:
    """The first ``limit`` groups in ``state`` whose hash sorts after ``after``, and the cursor for the next page.

    A page reads one more group than it shows, to know whether another page
    follows. BadGroupHash (a BadInput) if ``after`` is not a group hash.
    """
    if after is not None:
        layout.check_hash(after)
    found: list[_Found] = []
    for item in _matching(backend, ListedState(state), after, foreign_lock_timeout):
        found.append(item)
        if len(found) > limit:
            break
    shown = found[:limit]
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-list") as pool:
        rows = list(pool.map(lambda f: _row(backend, f), shown))
    return GroupPage(ListedState(state), rows, shown[-1].hash if len(found) > limit else None)
