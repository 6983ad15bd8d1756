"""A workspace in this process's memory, for property tests that make thousands of writes.

It implements the storage contract (``s3wq.store.base.Backend``) with one
lock around every operation, so create, replace and delete on an ETag are
atomic, and passes the contract's single-process tests
(tests/unit/test_memory_store.py runs them). It is not a store any worker
could share: tests whose subject is the claim protocol or the lease, not
the disk, use it so that each example costs no file, no fsync and no
directory to remove. Ages are on the monotonic clock, counted from each
write, as S3 counts them from Last-Modified.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Iterator

from s3wq.errors import BadKey, ObjectChanged, ObjectExists, ObjectNotFound
from s3wq.store.base import StoredObject

_NAMES = itertools.count(1)


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


def _check_key(key: str) -> None:
    # The keys the local directory refuses, so that a test cannot pass here on a key no real store takes.
    if not key or key.startswith("/") or any(part in ("", ".", "..") for part in key.split("/")) or "\x00" in key:
        raise BadKey(f"unsafe key {key!r}")


class MemoryBackend:
    clock_resolution_seconds = 0.0
    narrow_listing_is_cheap = True
    conditions_are_our_own = True

    def __init__(self) -> None:
        self.uri = f"memory://{next(_NAMES)}"
        self._objects: dict[str, tuple[bytes, float]] = {}  # key -> (body, when written, on time.monotonic)
        self._lock = threading.Lock()

    def age(self, key: str, seconds: float) -> None:
        """Make the object ``seconds`` older, as if it had been written that long before (a test's clock moving)."""
        with self._lock:
            body, written = self._get(key)
            self._objects[key] = (body, written - seconds)

    def _get(self, key: str) -> tuple[bytes, float]:
        _check_key(key)
        try:
            return self._objects[key]
        except KeyError:
            raise ObjectNotFound(key) from None

    def _stored(self, body: bytes, written: float) -> StoredObject:
        return StoredObject(body=body, etag=_etag(body), age_seconds=max(0.0, time.monotonic() - written))

    def _put(self, key: str, body: bytes) -> str:
        self._objects[key] = (bytes(body), time.monotonic())
        return _etag(body)

    def read(self, key: str) -> StoredObject:
        with self._lock:
            return self._stored(*self._get(key))

    def read_range(self, key: str, start: int, length: int, etag: str | None = None) -> StoredObject:
        with self._lock:
            body, written = self._get(key)
        if etag is not None and _etag(body) != etag:
            raise ObjectChanged(key)
        stored = self._stored(body, written)
        return StoredObject(body=body[start : start + length], etag=stored.etag, age_seconds=stored.age_seconds)

    def exists(self, key: str) -> bool:
        with self._lock:
            return key in self._objects

    def create(self, key: str, body: bytes) -> str:
        with self._lock:
            try:
                self._get(key)
            except ObjectNotFound:
                return self._put(key, body)
            raise ObjectExists(key)

    def replace(self, key: str, body: bytes, etag: str) -> str:
        with self._lock:
            current, _ = self._get(key)
            if _etag(current) != etag:
                raise ObjectChanged(key)
            return self._put(key, body)

    def write(self, key: str, body: bytes) -> str:
        with self._lock:
            _check_key(key)
            return self._put(key, body)

    def delete(self, key: str, etag: str | None = None) -> None:
        with self._lock:
            if etag is None:
                _check_key(key)
                self._objects.pop(key, None)
                return
            current, _ = self._get(key)
            if _etag(current) != etag:
                raise ObjectChanged(key)
            del self._objects[key]

    def list_keys(self, prefix: str) -> Iterator[str]:
        with self._lock:
            keys = sorted(key for key in self._objects if key.startswith(prefix))
        yield from keys
