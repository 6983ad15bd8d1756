"""Reading what an operator asks of a workspace: which groups failed and why, which are done, everything about one group.

Reads only; the repairs that act on what these find are in :mod:`s3wq.ops.repairs`.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.errors import BadInput, ObjectNotFound
from s3wq.index import WorkIndex
from s3wq.model import Group, LockState
from s3wq.ops.status import PartitionFlags, catalog_groups, flag_partitions, iter_hashes, listed_hashes, scan_flags
from s3wq.protocol.bodies import error_frame, load_object
from s3wq.protocol.locks import LockReading, read_lock
from s3wq.store import MAX_PARALLEL_REQUESTS, Backend, layout


def read_record(backend: Backend, key: str) -> dict | None:
    """The JSON object at ``key``, read strictly as data: None if there is none, ``{"unparsable": ...}`` if it is not one."""
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
        docs = pool.map(lambda h: read_record(backend, layout.failed_key(h)) or {}, hashes)
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


def done_groups(backend: Backend) -> set[str]:
    return set(listed_hashes(backend, layout.DONE_PREFIX, layout.DONE_SUFFIX))


def _lock_view(lock: LockReading) -> dict:
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
        counted=body.counted if body.state != LockState.HELD else None,
        needs_seconds=body.needs_seconds,
        error=body.error,
    )
    return {k: v for k, v in view.items() if v is not None}


def find_group(backend: Backend, hash_: str) -> Group | None:
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
    group = find_group(backend, hash_)
    if group is None:
        raise BadInput(f"no group {hash_} in the index of {backend.uri}")
    lock = read_lock(backend, hash_)
    done = read_record(backend, layout.done_key(hash_))
    failed = read_record(backend, layout.failed_key(hash_))
    if failed is not None and "error_frame" in failed:
        failed["error_frame"] = error_frame(failed)  # as strictly as failures reads it
    input_errors = read_record(backend, layout.input_errors_key(hash_))
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
    if state == "locked" and lock is not None and lock.body is not None and lock.body.behind is not None:
        # Claimed ahead by a worker that still holds the group in front (running it, or
        # waiting out its retry backoff): this group has not started. Once the group in
        # front has its flag this one runs, though the lock in front may still be held
        # (its release goes out beside the next run). A few reads more.
        front_hash = lock.body.behind
        front = read_lock(backend, front_hash)
        if (
            lock_view is not None
            and front is not None
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
