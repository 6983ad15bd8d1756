"""The storage contract every backend implements.

The queue's correctness rests on three operations being atomic in the store
itself -- ``create``, ``replace`` and ``delete`` with an ETag -- so that of
several racing callers exactly one wins. Everything else (``read``,
``exists``, ``list_keys``, ``write``) needs only read-after-write
consistency, which S3 has had since December 2020.

Keys are relative to the workspace root, '/'-separated, and are built only
by :mod:`s3wq.store.layout`, never from unchecked input.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

# S3's ListObjectsV2 returns at most 1,000 keys a page: what a listing costs is counted in these pages.
LIST_PAGE_KEYS = 1000


@dataclass(frozen=True)
class StoredObject:
    body: bytes
    etag: str
    # Age by the store's own clock (its Last-Modified against the time of the
    # response), rounded *down* to stay conservative: a lock must never look
    # older than it is, or two live workers could hold it. math.inf for a
    # file a local directory's own machine wrote before it last booted (see
    # local_ages): whoever wrote it is gone, whatever lease it names.
    age_seconds: float


@runtime_checkable
class Backend(Protocol):
    uri: str
    # How far ``StoredObject.age_seconds`` may trail the true age: waiting
    # this much longer than a lease guarantees the store calls a lock stale.
    clock_resolution_seconds: float
    # Whether ``list_keys`` of a narrow prefix costs less than of a wide one:
    # true for S3, which lists from its sorted index only the keys that match;
    # false for a directory, which is read whole whatever the prefix. Readers
    # that could list a keyspace in many narrow prefixes list it whole when
    # this is false.
    narrow_listing_is_cheap: bool
    # Whether s3wq itself makes create/replace/delete atomic (a directory,
    # under its own locks): then nothing is to be learnt by probing the store
    # (see protocol.probe).
    conditions_are_our_own: bool

    def read(self, key: str) -> StoredObject:
        """Return the object's body, ETag and age.

        Raise ObjectNotFound if the key does not exist.
        """

    def read_range(self, key: str, start: int, length: int, etag: str | None = None) -> StoredObject:
        """Return bytes ``start`` to ``start + length`` of the object (fewer only at its end, none past it), its ETag and age.

        The bytes and the ETag come from one version of the object. With
        ``etag``, only if the object's ETag still is ``etag``: raise
        ObjectChanged otherwise, so that a reader fetching an object a piece
        at a time never mixes two versions. Raise ObjectNotFound if the key
        does not exist.
        """

    def exists(self, key: str) -> bool:
        """Whether the key exists now."""

    def create(self, key: str, body: bytes) -> str:
        """Atomically write ``body`` only if ``key`` does not exist; return the new ETag.

        Raise ObjectExists if the key is already present -- including when
        it was created by this very call whose first response was lost, so
        callers that need to know must compare the stored body. Raise
        WriteConflict (an ObjectExists) when another conditional write to the
        key was in flight, which may be this call's own first try.
        """

    def replace(self, key: str, body: bytes, etag: str) -> str:
        """Atomically overwrite ``key`` only if its current ETag is ``etag``; return the new ETag.

        Raise ObjectChanged if the ETag differs, ObjectNotFound if the key is
        gone, WriteConflict (an ObjectChanged) as for ``create``.
        """

    def delete(self, key: str, etag: str | None = None) -> None:
        """Delete ``key``; with ``etag``, atomically and only if its ETag still matches.

        Raise ObjectChanged on an ETag mismatch and ObjectNotFound if a
        conditional delete finds no object. An unconditional delete of a
        missing key succeeds, as in S3. A store that cannot delete on a
        condition (it answers 501) raises ConditionalDeleteUnsupported and
        deletes nothing: callers fall back to a conditional rewrite.
        """

    def write(self, key: str, body: bytes) -> str:
        """Unconditionally write ``key`` (readers see the old or the new body, never a mix)."""

    def list_keys(self, prefix: str) -> Iterator[str]:
        """Yield every key starting with ``prefix``, in ascending order, page by page."""
