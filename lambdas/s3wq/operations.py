"""What an operator asks of a workspace: which groups failed and why, and everything about one group."""

from __future__ import annotations

import json

from . import layout
from .backends import Backend
from .errors import BadInput, ObjectNotFound
from .index import WorkIndex
from .queue import LockBody


def _json_or_none(backend: Backend, key: str) -> dict | None:
    try:
        body = backend.read(key).body
    except ObjectNotFound:
        return None
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        return {"unparsable": body[:200].decode("utf-8", errors="replace")}
    return doc if isinstance(doc, dict) else {"value": doc}


def list_failures(backend: Backend) -> list[dict]:
    """Every failed group: hash, paths, attempts, last error, when, by whom."""
    failures = []
    for key in backend.list_keys(layout.FAILED_PREFIX):
        hash_ = layout.hash_from_key(key, layout.FAILED_PREFIX, layout.FAILED_SUFFIX)
        if hash_ is None:
            continue
        doc = _json_or_none(backend, key) or {}
        failures.append(
            {
                "hash": hash_,
                "paths": doc.get("paths", []),
                "attempts": doc.get("attempts"),
                "error": doc.get("error"),
                "failed_at": doc.get("failed_at"),
                "worker_id": doc.get("worker_id"),
            }
        )
    return failures


def inspect_group(backend: Backend, hash_: str) -> dict:
    """A group's paths, lock (owner, attempt, age), done and failed state, and result object."""
    layout.check_hash(hash_)
    group = next((g for g in WorkIndex(backend).iter_groups() if g.hash == hash_), None)
    if group is None:
        raise BadInput(f"no group {hash_} in the index of {backend.uri}")
    lock = None
    try:
        stored = backend.read(layout.lock_key(hash_))
        body = LockBody.decode(stored.body)
        lock = {"age_seconds": round(stored.age_seconds, 1), "etag": stored.etag}
        if body is None:
            lock["body"] = "unparsable (an olmocr lock is empty): held until stale"
        else:
            lock.update(owner=body.owner, worker_id=body.worker_id, attempt=body.attempt, claimed_at=body.claimed_at, released=body.released, failed=body.failed, error=body.error)
    except ObjectNotFound:
        pass
    done = _json_or_none(backend, layout.done_key(hash_))
    failed = _json_or_none(backend, layout.failed_key(hash_))
    result_key = layout.result_key(hash_)
    result = None
    if backend.exists(result_key):
        stored = backend.read(result_key)
        result = {"uri": f"{backend.uri.rstrip('/')}/{result_key}", "bytes": len(stored.body), "records": stored.body.count(b"\n")}
    state = "done" if done is not None else "failed" if failed is not None else "locked" if lock and not lock.get("released") else "pending"
    return {"hash": hash_, "state": state, "paths": list(group.paths), "lock": lock, "done": done, "failed": failed, "result": result}
