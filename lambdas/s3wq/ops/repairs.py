"""The repairs an operator makes: put failed groups back, make groups run again, hand back a dead worker's locks.

``requeue_failed`` puts failed groups back, ``reset_groups`` makes done or
failed groups pending again, and ``release_locks`` hands back the locks of a
worker known to be dead. Each repair is a conditional write on the ETag just
read, so it never overwrites a change it did not see.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.errors import BadInput, ConditionalDeleteUnsupported, ObjectChanged, ObjectNotFound
from s3wq.model import LockState, Outcome
from s3wq.ops.inspection import failed_groups, find_group
from s3wq.ops.status import listed_hashes
from s3wq.protocol.bodies import LockBody, now_iso
from s3wq.protocol.locks import LockReading, read_lock, read_locks
from s3wq.store import Backend, layout
from s3wq.wording import plural

# Conditional writes that lose to a concurrent change are retried after a
# fresh read; a lock that keeps changing is being worked on: leave it.
_REPAIR_ROUNDS = 5


@dataclass
class RequeueResult:
    requeued: list[str] = field(default_factory=list)
    # Held by a live worker: it is being worked on, so it is not failed any
    # more, or its failure is being recorded right now. Run again later.
    skipped_live: list[str] = field(default_factory=list)


def requeue_failed(
    backend: Backend, hashes: list[str] | None = None, *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS
) -> RequeueResult:
    """Put failed groups back, to be claimed again from attempt 1.

    With ``hashes``, every one must name a failed group, checked before
    anything changes. For each group: if a live worker holds its lock, it is
    left alone (reported as skipped); a lock s3wq cannot read (olmocr's) is
    live for ``foreign_lock_timeout``, as a worker's claim judges it.
    Otherwise the failed flag is deleted first, on the ETag just read, and
    then the lock is rewritten as released at attempt 1, on its ETag: a
    requeue that stops in between leaves a lock still marked failed, which
    ``status`` counts as failed and a second requeue finds. Nothing a worker
    wrote after our reads is overwritten.
    """
    failed = failed_groups(backend, foreign_lock_timeout=foreign_lock_timeout)
    if hashes is not None:
        missing = [layout.check_hash(h) for h in hashes if h not in failed]
        if missing:
            raise BadInput(f"not a failed group: {missing[0]}")
        failed = set(hashes)
    result = RequeueResult()
    for hash_ in sorted(failed):
        if _requeue_one(backend, hash_, foreign_lock_timeout):
            result.requeued.append(hash_)
        else:
            result.skipped_live.append(hash_)
    return result


def _delete_as_read(backend: Backend, key: str) -> bool:
    """Delete ``key`` on the ETag just read (gone already is fine); False if it changed in between.

    A flag is only ever created, never rewritten, and the caller has just
    seen that no live worker holds the group: on a store that cannot delete
    on a condition, deleting it outright deletes the flag that was read.
    """
    try:
        backend.delete(key, backend.read(key).etag)
    except ObjectNotFound:
        pass
    except ObjectChanged:
        return False
    except ConditionalDeleteUnsupported:
        backend.delete(key)
    return True


def _requeue_one(backend: Backend, hash_: str, foreign_lock_timeout: float) -> bool:
    key = layout.lock_key(hash_)
    for _ in range(_REPAIR_ROUNDS):
        lock = read_lock(backend, hash_, foreign_lock_timeout=foreign_lock_timeout)
        if lock is not None and lock.live:
            return False
        if not _delete_as_read(backend, layout.failed_key(hash_)):
            continue
        if lock is None:
            return True
        previous = lock.body
        body = LockBody(
            owner=f"requeue:{now_iso()}",
            worker_id="requeue-failed",
            attempt=1,
            lease_seconds=previous.lease_seconds if previous else foreign_lock_timeout,
            state=LockState.RELEASED,
            outcome=Outcome.REQUEUED,
            counted=False,
            error=None if previous is None else previous.error,
        )
        try:
            backend.replace(key, body.encode(), lock.etag)
            return True
        except ObjectNotFound:
            return True
        except ObjectChanged:
            continue
    return False


@dataclass
class ResetResult:
    reset: list[str] = field(default_factory=list)
    skipped_live: list[str] = field(default_factory=list)  # held by a live worker: run again once it is done


def reset_groups(
    backend: Backend, hashes: list[str], *, named: bool = True, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS
) -> ResetResult:
    """Make groups pending again, done or failed, so that they run again from attempt 1.

    ``named``: the hashes come from the user, and each must name a group of
    the index, checked before anything changes (hashes listed from the
    workspace's own flags need no such check, which reads a segment each).
    For each group: a live lock (a foreign one: younger than
    ``foreign_lock_timeout``) means it is being worked on, and it is left
    alone; otherwise its input-error list is deleted, then its done flag on
    the ETag just read (until then no worker runs it, so nothing it writes is
    lost), and then it is requeued as a failed group is (failed flag
    deleted, lock rewritten as released at attempt 1, each on its ETag). Its
    result stays until the next run replaces it. Workers already running may
    have listed its done flag: they pass it by, and a later worker (or the
    next round of a Lambda run) takes it.
    """
    for hash_ in hashes:
        layout.check_hash(hash_)
        if named and find_group(backend, hash_) is None:
            raise BadInput(f"no group {hash_} in the index of {backend.uri}")
    result = ResetResult()
    for hash_ in sorted(set(hashes)):
        if _reset_one(backend, hash_, foreign_lock_timeout):
            result.reset.append(hash_)
        else:
            result.skipped_live.append(hash_)
    return result


def _reset_one(backend: Backend, hash_: str, foreign_lock_timeout: float) -> bool:
    for _ in range(_REPAIR_ROUNDS):
        lock = read_lock(backend, hash_, foreign_lock_timeout=foreign_lock_timeout)
        if lock is not None and lock.live:
            return False
        backend.delete(layout.input_errors_key(hash_))
        if not _delete_as_read(backend, layout.done_key(hash_)):
            continue
        return _requeue_one(backend, hash_, foreign_lock_timeout)
    return False


# Owner tokens a refused release-locks names, at most (one a worker instance).
_OWNERS_NAMED = 3


def _held_by(locks: dict[str, LockReading], *, worker_id: str | None, owner: str | None) -> dict[str, LockReading]:
    """The held locks of a worker id, or of the one claim ``owner`` and the claim its worker made ahead of it."""
    held = {h: lock for h, lock in locks.items() if lock.body is not None and lock.body.state == LockState.HELD}
    if owner is None:
        return {h: lock for h, lock in held.items() if lock.body is not None and lock.body.worker_id == worker_id}
    named = {h: lock for h, lock in held.items() if lock.body is not None and lock.body.owner == owner}
    # A claim ahead names the claim its worker was running: while that one is
    # held, both are this one instance's (once it is not, a claim ahead naming
    # it may be running in a live worker that went on).
    ahead = {h: lock for h, lock in held.items() if named and lock.body is not None and lock.body.behind_owner == owner}
    return {**named, **ahead}


def release_locks(backend: Backend, *, worker_id: str | None = None, owner: str | None = None, force: bool = False) -> list[str]:
    """Hand back the groups whose locks one worker holds, named by its id or by one claim's owner token; return their hashes.

    For a worker known to be dead: its groups become claimable at once, at
    no attempt, rather than when its leases run out. A worker id is a name,
    not one worker (a machine that rebooted and started again under it holds
    its new groups under it), so a live lease of that id is released only
    with ``force``; without it BadInput names the owner tokens to use, and
    nothing changes. ``owner`` (what ``inspect`` shows) names one instance:
    that claim's lock and the one the instance claimed ahead behind it go,
    live or not. A worker that is in fact alive runs on until its next
    renewal finds the lock changed, or its run ends. Each rewrite is
    conditional on the ETag just read: a lock renewed meanwhile stays.
    """
    if (worker_id is None) == (owner is None) or not (worker_id or owner):
        raise BadInput("name the worker: a worker id, or one claim's owner token")
    hashes = sorted(listed_hashes(backend, layout.LOCKS_PREFIX, layout.LOCK_SUFFIX))
    matched = _held_by(read_locks(backend, hashes), worker_id=worker_id, owner=owner)
    live = {h: lock for h, lock in matched.items() if lock.live}
    if live and owner is None and not force:
        # One token an instance: the claim it runs, not the one it made ahead behind it.
        live_owners = {lock.body.owner for lock in live.values() if lock.body is not None}
        owners = sorted(lock.body.owner for lock in live.values() if lock.body is not None and lock.body.behind_owner not in live_owners)
        named = ", ".join(f"--owner {o}" for o in owners[:_OWNERS_NAMED]) + (", ..." if len(owners) > _OWNERS_NAMED else "")
        raise BadInput(
            f"{plural(len(live), 'lock')} held by worker id {worker_id} {'has' if len(live) == 1 else 'have'} a live lease "
            f"(a worker restarted under that id holds its groups under it too): nothing released; name the dead instance "
            f"({named}, as s3wq inspect shows it), or give --force to release every lock of {worker_id}"
        )
    released = []
    for hash_, lock in matched.items():
        assert lock.body is not None
        handed_back = lock.body.rewritten(
            state=LockState.RELEASED, outcome=Outcome.OPERATOR, counted=False, error=f"released by an operator at {now_iso()}"
        )
        try:
            backend.replace(layout.lock_key(hash_), handed_back.encode(), lock.etag)
        except (ObjectChanged, ObjectNotFound):
            continue  # changed since we read it: its holder is alive, or it was finished
        released.append(hash_)
    return sorted(released)
