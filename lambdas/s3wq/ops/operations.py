"""What an operator asks of a workspace, and the repairs an operator makes.

Reading: which groups failed and why, everything about one group.
Repairs: put failed groups back (``requeue_failed``), hand back the locks of
a worker known to be dead (``release_locks``). Each repair is a conditional
write on the ETag just read, so it never overwrites a change it did not see.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.errors import BadInput, ConditionalDeleteUnsupported, ObjectChanged, ObjectNotFound
from s3wq.index import Group, WorkIndex
from s3wq.ops.status import (
    LockState,
    PartitionFlags,
    catalog_groups,
    flag_partitions,
    iter_hashes,
    listed_hashes,
    read_lock,
    read_locks,
    scan_flags,
)
from s3wq.protocol.bodies import HELD, OPERATOR, RELEASED, REQUEUED, LockBody, error_frame, load_object, now_iso
from s3wq.store import MAX_PARALLEL_REQUESTS, Backend, layout
from s3wq.wording import plural

# Conditional writes that lose to a concurrent change are retried after a
# fresh read; a lock that keeps changing is being worked on: leave it.
_REPAIR_ROUNDS = 5


def _json_or_none(backend: Backend, key: str) -> dict | None:
    try:
        body = backend.read(key).body
    except ObjectNotFound:
        return None
    doc = load_object(body)
    if doc is None and body.strip():
        return {"unparsable": body[:200].decode("utf-8", errors="replace")}
    return doc if doc is not None else {}


def list_failures(backend: Backend) -> list[dict]:
    """Every failed group, by hash: hash, paths, attempts, kind (error, timeout, lost), last error, where, its traceback, when, by whom.

    ``error_frame`` is the deepest line of the processor's own code in the
    traceback ({file, line, function, code}); None for a flag written before
    s3wq recorded it, or one that does not hold what s3wq writes.

    The failed flags are listed by hash prefix and read, MAX_PARALLEL_REQUESTS
    requests at a time. A flag deleted between the listing and its read (a
    requeue meanwhile) is still listed, with what is known: its hash.
    """
    partitions = flag_partitions(backend, catalog_groups(backend))
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-failures") as pool:
        listed = pool.map(lambda p: list(iter_hashes(backend, layout.FAILED_PREFIX, layout.FAILED_SUFFIX, p)), partitions)
        hashes = sorted(h for partition in listed for h in partition)
        docs = pool.map(lambda h: _json_or_none(backend, layout.failed_key(h)) or {}, hashes)
        return [
            {
                "hash": hash_,
                "paths": doc.get("paths", []),
                "attempts": doc.get("attempts"),
                "kind": doc.get("kind", "error"),
                "error": doc.get("error"),
                "failed_at": doc.get("failed_at"),
                "worker_id": doc.get("worker_id"),
                "error_frame": error_frame(doc),
                "traceback": doc.get("traceback"),
            }
            for hash_, doc in zip(hashes, docs)
        ]


def _lock_view(lock: LockState) -> dict:
    view: dict = {"age_seconds": round(lock.age_seconds, 1), "etag": lock.etag, "lease_seconds": lock.lease_seconds}
    if math.isinf(lock.age_seconds):
        # A local directory's lock written before this machine last booted: its writer is gone, whatever its lease.
        del view["age_seconds"]
        view["written_before_last_boot"] = True
    if lock.live:
        view["stale_in_seconds"] = round(lock.stale_in, 1)
    body = lock.body
    if body is None:
        view["body"] = "unparsable (an olmocr lock is empty): honoured as a foreign lock"
        return view
    view.update(
        state=body.state,
        owner=body.owner,
        worker_id=body.worker_id,
        attempt=body.attempt,
        claimed_at=body.claimed_at,
        outcome=body.outcome,
        counted=body.counted if body.state != HELD else None,
        needs_seconds=body.needs_seconds,
        error=body.error,
    )
    return {k: v for k, v in view.items() if v is not None}


def _find_group(backend: Backend, hash_: str) -> Group | None:
    """The group of the index with this hash, reading only the segments whose hash prefix it has, and olmocr's index."""
    index = WorkIndex(backend)
    catalog, _ = index.read_catalog()
    for key in [s.key for s in catalog.segments if hash_.startswith(s.prefix)]:
        group = next((g for g in index.load(key) if g.hash == hash_), None)
        if group is not None:
            return group
    # olmocr's index is optional, and streamed: it can be far bigger than memory.
    return next((g for g in index.legacy_groups() if g.hash == hash_), None)


def inspect_group(backend: Backend, hash_: str) -> dict:
    """A group's paths, lock (holder, attempt, lease, when it goes stale), done and failed state, and result object."""
    layout.check_hash(hash_)
    group = _find_group(backend, hash_)
    if group is None:
        raise BadInput(f"no group {hash_} in the index of {backend.uri}")
    lock = read_lock(backend, hash_)
    done = _json_or_none(backend, layout.done_key(hash_))
    failed = _json_or_none(backend, layout.failed_key(hash_))
    if failed is not None and "error_frame" in failed:
        failed["error_frame"] = error_frame(failed)  # as strictly as failures reads it
    input_errors = _json_or_none(backend, layout.input_errors_key(hash_))
    result_key = layout.result_key(hash_)
    result = None
    if backend.exists(result_key):
        stored = backend.read(result_key)
        result = {"uri": f"{backend.uri.rstrip('/')}/{result_key}", "bytes": len(stored.body), "records": stored.body.count(b"\n")}
    if done is not None:
        state = "done"
    elif failed is not None or (lock is not None and lock.failed):
        state = "failed"
    elif lock is not None and lock.live:
        state = "locked"
    else:
        state = "pending"
    lock_view = None if lock is None else _lock_view(lock)
    if state == "locked" and lock.body is not None and lock.body.behind is not None:
        # Claimed ahead by a worker that still holds the group in front (running it, or
        # waiting out its retry backoff): this group has not started. Once the group in
        # front has its flag this one runs, though the lock in front may still be held
        # (its release goes out beside the next run). A few reads more.
        front_hash = lock.body.behind
        front = read_lock(backend, front_hash)
        if (
            front is not None
            and front.live
            and front.body is not None
            and front.body.owner == lock.body.behind_owner
            and not backend.exists(layout.done_key(front_hash))
            and not backend.exists(layout.failed_key(front_hash))
        ):
            lock_view["claimed_ahead_of"] = front_hash
    return {
        "hash": hash_,
        "state": state,
        "paths": list(group.paths),
        "lock": lock_view,
        "done": done,
        "failed": failed,
        "input_errors": input_errors,
        "result": result,
    }


@dataclass
class RequeueResult:
    requeued: list[str] = field(default_factory=list)
    # Held by a live worker: it is being worked on, so it is not failed any
    # more, or its failure is being recorded right now. Run again later.
    skipped_live: list[str] = field(default_factory=list)


def failed_groups(backend: Backend, *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS) -> set[str]:
    """Groups with a failed flag, or with a lock marked failed (a flag deleted by hand), and no done flag.

    The flags are listed by hash prefix, as ``status`` lists them (:func:`status.scan_flags`).
    """
    failed: set[str] = set()
    partitions = flag_partitions(backend, catalog_groups(backend))
    for item in scan_flags(backend, partitions, foreign_lock_timeout=foreign_lock_timeout):
        if isinstance(item, PartitionFlags):
            failed |= item.failed
        elif item.state.failed:
            failed.add(item.hash)
    return failed


def requeue_failed(backend: Backend, hashes: list[str] | None = None) -> RequeueResult:
    """Put failed groups back, to be claimed again from attempt 1.

    With ``hashes``, every one must name a failed group, checked before
    anything changes. For each group: if a live worker holds its lock, it is
    left alone (reported as skipped). Otherwise the failed flag is deleted
    first, on the ETag just read, and then the lock is rewritten as released
    at attempt 1, on its ETag: a requeue that stops in between leaves a lock
    still marked failed, which ``status`` counts as failed and a second
    requeue finds. Nothing a worker wrote after our reads is overwritten.
    """
    failed = failed_groups(backend)
    if hashes is not None:
        missing = [layout.check_hash(h) for h in hashes if h not in failed]
        if missing:
            raise BadInput(f"not a failed group: {missing[0]}")
        failed = set(hashes)
    result = RequeueResult()
    for hash_ in sorted(failed):
        if _requeue_one(backend, hash_):
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


def _requeue_one(backend: Backend, hash_: str) -> bool:
    key = layout.lock_key(hash_)
    for _ in range(_REPAIR_ROUNDS):
        lock = read_lock(backend, hash_)
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
            lease_seconds=previous.lease_seconds if previous else FOREIGN_LOCK_TIMEOUT_SECONDS,
            state=RELEASED,
            outcome=REQUEUED,
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


def done_groups(backend: Backend) -> set[str]:
    return set(listed_hashes(backend, layout.DONE_PREFIX, layout.DONE_SUFFIX))


def reset_groups(backend: Backend, hashes: list[str], *, named: bool = True) -> ResetResult:
    """Make groups pending again, done or failed, so that they run again from attempt 1.

    ``named``: the hashes come from the user, and each must name a group of
    the index, checked before anything changes (hashes listed from the
    workspace's own flags need no such check, which reads a segment each).
    For each group: a live lock means it is being worked on, and it is left
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
        if named and _find_group(backend, hash_) is None:
            raise BadInput(f"no group {hash_} in the index of {backend.uri}")
    result = ResetResult()
    for hash_ in sorted(set(hashes)):
        if _reset_one(backend, hash_):
            result.reset.append(hash_)
        else:
            result.skipped_live.append(hash_)
    return result


def _reset_one(backend: Backend, hash_: str) -> bool:
    for _ in range(_REPAIR_ROUNDS):
        lock = read_lock(backend, hash_)
        if lock is not None and lock.live:
            return False
        backend.delete(layout.input_errors_key(hash_))
        if not _delete_as_read(backend, layout.done_key(hash_)):
            continue
        return _requeue_one(backend, hash_)
    return False


def list_input_errors(backend: Backend) -> list[dict]:
    """Every group done with inputs its processor could not use: hash, how many, and the inputs with their errors."""
    hashes = sorted(listed_hashes(backend, layout.INPUT_ERRORS_PREFIX, layout.INPUT_ERRORS_SUFFIX))
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-inputs") as pool:
        docs = pool.map(lambda h: _json_or_none(backend, layout.input_errors_key(h)) or {}, hashes)
        return [{"hash": h, "input_errors": d.get("input_errors"), "inputs": d.get("inputs", [])} for h, d in zip(hashes, docs)]


# Manifests whose bad lines status reads and shows, at most.
_MANIFEST_ERRORS_SHOWN = 20
# Bad lines of each of them shown (its record lists up to a thousand), and how much of each reason.
BAD_LINES_SHOWN = 3
_REASON_CHARS = 200


def manifest_error_keys(backend: Backend) -> list[str]:
    """The keys of the records the deployed populate wrote under manifest_errors/, sorted: one LIST a thousand records."""
    return sorted(k for k in backend.list_keys(layout.MANIFEST_ERRORS_PREFIX) if k.endswith(".json"))


def read_manifest_errors(backend: Backend, key: str) -> dict:
    """One manifest's error record: its manifest, how many bad lines, the first BAD_LINES_SHOWN of them, the record's URI.

    The record is read strictly as data: anything else than populate's
    shape (written by hand, cut short) leaves the fields it lacks None.
    """
    doc = _json_or_none(backend, key) or {}
    listed = doc.get("bad_lines")
    first = [
        {"line": b.get("line"), "reason": str(b.get("reason"))[:_REASON_CHARS]}
        for b in (listed if isinstance(listed, list) else [])[:BAD_LINES_SHOWN]
        if isinstance(b, dict)
    ]
    return {
        "manifest": doc.get("manifest"),
        "bad_lines": doc.get("bad_line_count"),
        "first_bad_lines": first,
        "record": f"{backend.uri.rstrip('/')}/{key}",
    }


def manifest_problems(backend: Backend, keys: list[str] | None = None) -> dict:
    """How many manifests have bad lines, and the first _MANIFEST_ERRORS_SHOWN records (one GET each)."""
    keys = manifest_error_keys(backend) if keys is None else keys
    shown = [read_manifest_errors(backend, k) for k in keys[:_MANIFEST_ERRORS_SHOWN]]
    return {"manifests_with_bad_lines": len(keys), "manifest_errors": shown}


class ManifestErrorWatch:
    """The manifest-error records as a watch finds them: one LIST a poll, and one GET for each record not seen yet.

    A record rewritten under the same name while watching (the manifest
    uploaded again, still with bad lines) is not read again; one that goes
    (an upload with no bad line clears it) is forgotten, so that a later one
    under its name is shown.
    """

    def __init__(self, backend: Backend):
        self.backend = backend
        self.count = 0
        self._records: dict[str, dict] = {}

    def poll(self) -> list[dict]:
        """The records that appeared since the last poll."""
        keys = manifest_error_keys(self.backend)
        self.count = len(keys)
        shown = keys[:_MANIFEST_ERRORS_SHOWN]
        for gone in set(self._records) - set(shown):
            del self._records[gone]
        new = [k for k in shown if k not in self._records]
        for key in new:
            self._records[key] = read_manifest_errors(self.backend, key)
        return [self._records[k] for k in new]

    def problems(self) -> dict:
        """As :func:`manifest_problems`, from what the polls found."""
        return {"manifests_with_bad_lines": self.count, "manifest_errors": [self._records[k] for k in sorted(self._records)]}


def workspace_problems(backend: Backend) -> dict:
    """What a count of groups does not show: groups done with input errors, manifests with bad lines.

    Two listings, and a read of each manifest's error record (the first
    _MANIFEST_ERRORS_SHOWN).
    """
    input_error_groups = sum(1 for _ in listed_hashes(backend, layout.INPUT_ERRORS_PREFIX, layout.INPUT_ERRORS_SUFFIX))
    return {"input_error_groups": input_error_groups, **manifest_problems(backend)}


# Owner tokens a refused release-locks names, at most (one a worker instance).
_OWNERS_NAMED = 3


def _held_by(locks: dict[str, LockState], *, worker_id: str | None, owner: str | None) -> dict[str, LockState]:
    """The held locks of a worker id, or of the one claim ``owner`` and the claim its worker made ahead of it."""
    held = {h: lock for h, lock in locks.items() if lock.body is not None and lock.body.state == HELD}
    if owner is None:
        return {h: lock for h, lock in held.items() if lock.body.worker_id == worker_id}
    named = {h: lock for h, lock in held.items() if lock.body.owner == owner}
    # A claim ahead names the claim its worker was running: while that one is
    # held, both are this one instance's (once it is not, a claim ahead naming
    # it may be running in a live worker that went on).
    ahead = {h: lock for h, lock in held.items() if named and lock.body.behind_owner == owner}
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
        live_owners = {lock.body.owner for lock in live.values()}
        owners = sorted(lock.body.owner for lock in live.values() if lock.body.behind_owner not in live_owners)
        named = ", ".join(f"--owner {o}" for o in owners[:_OWNERS_NAMED]) + (", ..." if len(owners) > _OWNERS_NAMED else "")
        raise BadInput(
            f"{plural(len(live), 'lock')} held by worker id {worker_id} {'has' if len(live) == 1 else 'have'} a live lease "
            f"(a worker restarted under that id holds its groups under it too): nothing released; name the dead instance "
            f"({named}, as s3wq inspect shows it), or give --force to release every lock of {worker_id}"
        )
    released = []
    for hash_, lock in matched.items():
        handed_back = lock.body.rewritten(state=RELEASED, outcome=OPERATOR, counted=False, error=f"released by an operator at {now_iso()}")
        try:
            backend.replace(layout.lock_key(hash_), handed_back.encode(), lock.etag)
        except (ObjectChanged, ObjectNotFound):
            continue  # changed since we read it: its holder is alive, or it was finished
        released.append(hash_)
    return sorted(released)
