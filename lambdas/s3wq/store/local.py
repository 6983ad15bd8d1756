"""A local directory as the queue's store, with the same semantics as S3.

``create`` publishes a fully written temporary file with ``os.link``, which
fails if the target exists (the O_EXCL guarantee without a half-written file
ever being visible). ``replace`` and conditional ``delete`` compare the ETag
and act while holding an ``flock`` on a per-key lock file, so a concurrent
writer cannot slip in between the comparison and the action; the kernel drops
the flock if the process dies. ETags are MD5 of the content, as S3's are for
single-part uploads. Ages are on this machine's boot clock where it has one
(local_ages: Linux), else on its wall clock; a directory other machines can
write (NFS and the like, see mounts) is refused, since neither holds there.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from s3wq.errors import BadKey, BadWorkspace, ObjectChanged, ObjectExists, ObjectNotFound, StorageError
from s3wq.store.base import StoredObject
from s3wq.store.local_ages import FileAge, WallClockAges, default_ages
from s3wq.store.mounts import network_filesystem

_INTERNAL_DIR = ".s3wq-local"
_TEMP_PREFIX = ".tmp-"


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


# ETags of files read a range at a time, by the file's identity. Every write
# here publishes a new file (a new inode), so an unchanged identity means
# unchanged bytes, and a big object is hashed once rather than once per range.
_RANGE_ETAGS: OrderedDict[tuple[int, int, int, int], str] = OrderedDict()
_RANGE_ETAGS_KEPT = 16


def _open_file_etag(f: BinaryIO) -> str:
    stat = os.fstat(f.fileno())
    identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    etag = _RANGE_ETAGS.get(identity)
    if etag is None:
        digest = hashlib.md5(usedforsecurity=False)
        f.seek(0)
        while block := f.read(1 << 20):
            digest.update(block)
        etag = _RANGE_ETAGS[identity] = '"' + digest.hexdigest() + '"'
        while len(_RANGE_ETAGS) > _RANGE_ETAGS_KEPT:
            _RANGE_ETAGS.popitem(last=False)
    return etag


class LocalBackend:
    # Ages are read in nanoseconds (a boot clock) or float mtimes (the wall clock).
    clock_resolution_seconds = 0.0
    # list_keys reads the prefix's whole directory, however narrow the prefix.
    narrow_listing_is_cheap = False
    # create/replace/delete are atomic under s3wq's own locks.
    conditions_are_our_own = True

    def __init__(self, root: str | os.PathLike[str], *, ages: WallClockAges | None = None):
        """``ages``: the clock the files' ages are read on (local_ages.default_ages: this platform's best)."""
        self.root = Path(root).resolve()
        self.uri = str(self.root)
        self._locks = self.root / _INTERNAL_DIR / "locks"
        self._ages = ages or default_ages()
        shared = network_filesystem(self.root)
        if shared:
            raise BadWorkspace(
                f"workspace {self.root} is on a network filesystem ({shared}): a local-directory workspace holds on one "
                "machine's own disk only, and a workspace shared between machines must be on S3 (s3://bucket/prefix)"
            )

    def check(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StorageError(f"workspace {self.root} exists and is not a directory")

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in key:
            raise BadKey(f"unsafe key {key!r}")
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise BadKey(f"key {key!r} escapes the workspace")
        return path

    @contextmanager
    def _key_lock(self, key: str) -> Iterator[None]:
        self._locks.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha1(key.encode("utf-8")).hexdigest()
        fd = os.open(self._locks / name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _temp_file(self, path: Path, body: bytes) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_TEMP_PREFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            # Recorded before the file is published (a link or a rename keeps it): a reader never sees it without.
            self._ages.stamp(f.fileno())
            os.fsync(f.fileno())
        return tmp

    def read(self, key: str) -> StoredObject:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                body = f.read()
                age = self._age(f)
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc
        except OSError as exc:
            raise StorageError(f"read {path} failed: {exc}") from exc
        return StoredObject(body=body, etag=_etag(body), age_seconds=age.seconds)

    def _age(self, f: BinaryIO) -> FileAge:
        return self._ages.age(f.fileno(), os.fstat(f.fileno()))

    def age_of(self, key: str) -> FileAge:
        """How old the object is, and on which clock that was read (what ``read`` puts in ``age_seconds``)."""
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                return self._age(f)
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc
        except OSError as exc:
            raise StorageError(f"read {path} failed: {exc}") from exc

    def read_range(self, key: str, start: int, length: int, etag: str | None = None) -> StoredObject:
        path = self._path(key)
        try:
            # One open file throughout: a write replaces the file, not its
            # bytes, so the ETag and the range both come from this version.
            with open(path, "rb") as f:
                current = _open_file_etag(f)
                if etag is not None and current != etag:
                    raise ObjectChanged(key)
                f.seek(start)
                body = f.read(length)
                age = self._age(f)
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc
        except OSError as exc:
            raise StorageError(f"read {path} failed: {exc}") from exc
        return StoredObject(body=body, etag=current, age_seconds=age.seconds)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def create(self, key: str, body: bytes) -> str:
        path = self._path(key)
        try:
            with self._key_lock(key):
                tmp = self._temp_file(path, body)
                try:
                    os.link(tmp, path)
                except FileExistsError as exc:
                    raise ObjectExists(key) from exc
                finally:
                    os.unlink(tmp)
        except OSError as exc:
            raise StorageError(f"create {path} failed: {exc}") from exc
        return _etag(body)

    def _current_etag(self, key: str, path: Path) -> str:
        try:
            return _etag(path.read_bytes())
        except FileNotFoundError as exc:
            raise ObjectNotFound(key) from exc

    def replace(self, key: str, body: bytes, etag: str) -> str:
        path = self._path(key)
        try:
            with self._key_lock(key):
                if self._current_etag(key, path) != etag:
                    raise ObjectChanged(key)
                os.replace(self._temp_file(path, body), path)
        except OSError as exc:
            raise StorageError(f"replace {path} failed: {exc}") from exc
        return _etag(body)

    def write(self, key: str, body: bytes) -> str:
        path = self._path(key)
        try:
            with self._key_lock(key):
                os.replace(self._temp_file(path, body), path)
        except OSError as exc:
            raise StorageError(f"write {path} failed: {exc}") from exc
        return _etag(body)

    def delete(self, key: str, etag: str | None = None) -> None:
        path = self._path(key)
        try:
            with self._key_lock(key):
                if etag is not None and self._current_etag(key, path) != etag:
                    raise ObjectChanged(key)
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    if etag is not None:
                        raise ObjectNotFound(key) from None
        except OSError as exc:
            raise StorageError(f"delete {path} failed: {exc}") from exc

    def list_keys(self, prefix: str) -> Iterator[str]:
        # Walk only the deepest directory the prefix names, then filter by the
        # rest of the prefix, as S3 filters by a key prefix.
        directory = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        base = self._path(directory) if directory else self.root
        if not base.is_dir():
            return
        keys = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != _INTERNAL_DIR]
            rel = Path(dirpath).relative_to(self.root).as_posix()
            for name in filenames:
                if name.startswith(_TEMP_PREFIX):
                    continue
                key = name if rel == "." else f"{rel}/{name}"
                if key.startswith(prefix):
                    keys.append(key)
        yield from sorted(keys)
