"""Counting a workspace: done, failed, locked, pending, and how long the live locks have left."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from . import layout
from .backends import Backend
from .bodies import FAILED, RELEASED, LockBody
from .config import FOREIGN_LOCK_TIMEOUT_SECONDS
from .errors import ObjectNotFound
from .index import WorkIndex

# Lock reads are independent small GETs; S3 serves thousands per second per prefix.
_PARALLEL_READS = 16


@dataclass(frozen=True)
class LockState:
    """A lock as a reader sees it now."""

    body: LockBody | None  # None: a lock s3wq cannot parse (olmocr's)
    age_seconds: float
    lease_seconds: float
    etag: str

    @property
    def failed(self) -> bool:
        return self.body is not None and self.body.state == FAILED

    @property
    def live(self) -> bool:
        """Held by a holder whose lease has not run out."""
        return (self.body is None or self.body.held) and self.age_seconds <= self.lease_seconds

    @property
    def stale_in(self) -> float:
        """Seconds until the store will call this lock stale, unless its holder renews it."""
        return max(0.0, self.lease_seconds - self.age_seconds)


def read_lock(backend: Backend, hash_: str, *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS) -> LockState | None:
    try:
        stored = backend.read(layout.lock_key(hash_))
    except ObjectNotFound:
        return None
    body = LockBody.decode(stored.body)
    lease = foreign_lock_timeout if body is None else body.lease_seconds
    return LockState(body, stored.age_seconds, lease, stored.etag)


def read_locks(backend: Backend, hashes: list[str], *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS) -> dict[str, LockState]:
    """The current state of each group's lock (groups whose lock vanished meanwhile are left out)."""
    if not hashes:
        return {}
    with ThreadPoolExecutor(max_workers=min(_PARALLEL_READS, len(hashes))) as pool:
        states = pool.map(lambda h: read_lock(backend, h, foreign_lock_timeout=foreign_lock_timeout), hashes)
        return {h: s for h, s in zip(hashes, states) if s is not None}


def listed_hashes(backend: Backend, prefix: str, suffix: str) -> set[str]:
    return {h for key in backend.list_keys(prefix) if (h := layout.hash_from_key(key, prefix, suffix)) is not None}


def queue_status(backend: Backend, *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS) -> dict:
    """Counts for a workspace, and how long the drain loop should wait for live locks.

    A group is done if it has a done flag; failed if it has a failed flag or
    its lock is marked failed; locked if a live holder has it; pending
    otherwise (a stale or released lock is pending: the next worker takes it;
    ``released`` counts the handed-back ones among them).
    The locks of groups with neither flag are read, in parallel: at any time
    there are about as many as there are workers.
    """
    paths_by_hash = {group.hash: len(group.paths) for group in WorkIndex(backend).iter_groups()}
    hashes = set(paths_by_hash)
    done = listed_hashes(backend, layout.DONE_PREFIX, layout.DONE_SUFFIX) & hashes
    failed = (listed_hashes(backend, layout.FAILED_PREFIX, layout.FAILED_SUFFIX) & hashes) - done
    unflagged = sorted((listed_hashes(backend, layout.LOCKS_PREFIX, layout.LOCK_SUFFIX) & hashes) - done - failed)
    locks = read_locks(backend, unflagged, foreign_lock_timeout=foreign_lock_timeout)
    failed |= {h for h, lock in locks.items() if lock.failed}
    live = {h: lock for h, lock in locks.items() if lock.live}
    released = [h for h, lock in locks.items() if lock.body is not None and lock.body.state == RELEASED]
    groups = len(hashes)
    finished = len(done) + len(failed)
    return {
        "groups": groups,
        "paths": sum(paths_by_hash.values()),
        "done": len(done),
        "failed": len(failed),
        "locked": len(live),
        "pending": groups - finished - len(live),
        "remaining": groups - finished,
        "finished": finished,
        # Handed back (a run out of time, a signal, an operator): claimable
        # now, and to the drain loop a reason for another round.
        "released": len(released),
        # Whole seconds (Step Functions' Wait takes integers), rounded up, and
        # past the store's clock resolution: by then every live lock that is
        # not renewed is stale.
        "wait_seconds": math.ceil(max(lock.stale_in for lock in live.values()) + backend.clock_resolution_seconds) + 1 if live else 0,
    }
