"""Conditional writes whose response may be lost, and how to tell that ours landed.

The store can apply a conditional request and lose its response; the SDK
then retries it, and the retry fails its condition against our own first
write. A 409 (WriteConflict) may likewise be our own earlier try, still in
flight. So a refused condition is not yet an answer: read the key back, and
if what is stored is ours, our write landed. Each function here does that
for one kind of conditional write. What "ours" means is the caller's to
say: every lock body and flag s3wq writes carries the token of the claim
that wrote it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from s3wq.errors import ObjectChanged, ObjectExists, ObjectNotFound, WriteConflict
from s3wq.protocol import clock
from s3wq.store import Backend, StoredObject

# How long a 409 (another write to the key in flight, perhaps ours) is given to settle before we read.
_CONFLICT_SETTLE_SECONDS = 1.0
_REPLACE_ROUNDS = 3


@dataclass(frozen=True)
class Landed:
    """Our write is stored: its ETag, and the object as read back if that is how we learned it."""

    etag: str
    found: StoredObject | None = None


@dataclass(frozen=True)
class Refused:
    """Another writer's object holds the key: as read back, and when (on our clock) that read was sent."""

    found: StoredObject
    read_sent_at: float


def create(backend: Backend, key: str, data: bytes, *, is_ours: Callable[[StoredObject], bool], rounds: int) -> Landed | Refused | None:
    """Create ``key`` (If-None-Match: *): Landed if our create is stored, Refused if another's object is.

    None if, in every one of ``rounds`` rounds, the key was gone again when
    we read it after our create was refused (it was deleted in between).
    """
    for _ in range(rounds):
        try:
            return Landed(backend.create(key, data))
        except WriteConflict:
            # Perhaps our own first try, not yet applied: give it a moment before reading.
            time.sleep(_CONFLICT_SETTLE_SECONDS)
        except ObjectExists:
            pass
        read_sent_at = clock.now()
        try:
            found = backend.read(key)
        except ObjectNotFound:
            continue
        if is_ours(found):
            return Landed(found.etag, found)
        return Refused(found, read_sent_at)
    return None


def replace(backend: Backend, key: str, data: bytes, etag: str) -> str | None:
    """Replace the version of ``key`` whose ETag is ``etag`` with ``data`` (If-Match); the new ETag, or None if another write got there first.

    ``data`` must be unique to this write (a lock body carries a write id),
    so that finding exactly it stored means our write landed.
    """
    for _ in range(_REPLACE_ROUNDS):
        try:
            return backend.replace(key, data, etag)
        except WriteConflict:
            time.sleep(_CONFLICT_SETTLE_SECONDS)
        except (ObjectChanged, ObjectNotFound):
            pass
        try:
            current = backend.read(key)
        except ObjectNotFound:
            return None
        if current.body == data:
            return current.etag
        if current.etag != etag:
            return None
        # Unchanged: the 409 was a write of ours still in flight that did not apply. Again.
    return None


def delete(backend: Backend, key: str, etag: str) -> bool:
    """Delete the version of ``key`` whose ETag is ``etag`` (If-Match); False if the key holds another write.

    A key already gone counts as deleted: our own earlier delete whose
    response was lost, or an operator's cleanup. ConditionalDeleteUnsupported
    (the store cannot delete on a condition) is the caller's to handle.
    """
    try:
        backend.delete(key, etag)
    except ObjectChanged:
        return False
    except ObjectNotFound:
        return True
    return True
