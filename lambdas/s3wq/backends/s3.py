"""S3 (or any S3-compatible endpoint) as the queue's store.

Atomicity comes from S3 conditional writes: ``If-None-Match: *`` for
``create``, ``If-Match: <etag>`` for ``replace`` and ``delete``. S3 answers a
lost race with 412 PreconditionFailed, or 409 ConditionalRequestConflict when
two conditional writes to one key overlap; both are mapped here, at the
boundary, to ObjectExists / ObjectChanged (WriteConflict for 409). Every other error propagates as a
typed StorageError.
"""

from __future__ import annotations

import email.utils
from typing import Any, Iterator

from botocore.exceptions import BotoCoreError, ClientError

from ..errors import BucketNotFound, ObjectChanged, ObjectExists, ObjectNotFound, StorageError, WriteConflict
from .base import StoredObject

_CONDITION_CODES = {"PreconditionFailed", "412"}
# Two conditional writes to one key in flight at once: the loser gets 409.
# One of them may be our own first try, still being applied, that the SDK
# gave up waiting for; callers must not take a 409 as proof of another writer.
_CONFLICT_CODES = {"ConditionalRequestConflict", "409"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}

# Last-Modified and Date both have one-second resolution; subtracting one
# second keeps the computed age a lower bound of the true age, which it then
# trails by up to two seconds.
_CLOCK_RESOLUTION_SECONDS = 1.0


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _server_time(response: dict) -> float | None:
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not date:
        return None
    return email.utils.parsedate_to_datetime(date).timestamp()


class S3Backend:
    clock_resolution_seconds = 2 * _CLOCK_RESOLUTION_SECONDS

    def __init__(self, *, s3_client: Any, bucket: str, prefix: str = ""):
        self.s3 = s3_client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _storage_error(self, exc: Exception, op: str, key: str) -> Exception:
        if isinstance(exc, ClientError) and _error_code(exc) == "NoSuchBucket":
            return BucketNotFound(f"bucket {self.bucket!r} does not exist")
        return StorageError(f"{op} s3://{self.bucket}/{self._key(key)} failed: {exc}")

    def check(self) -> None:
        """Raise BucketNotFound if the bucket is missing, StorageError if unreachable."""
        try:
            self.s3.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _error_code(exc) in {"404", "NoSuchBucket", "NotFound"}:
                raise BucketNotFound(f"bucket {self.bucket!r} does not exist") from exc
            raise StorageError(f"cannot reach bucket {self.bucket!r}: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"cannot reach bucket {self.bucket!r}: {exc}") from exc

    def read(self, key: str) -> StoredObject:
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=self._key(key))
            body = response["Body"].read()
        except ClientError as exc:
            if _error_code(exc) in _MISSING_CODES:
                raise ObjectNotFound(key) from exc
            raise self._storage_error(exc, "GET", key) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, "GET", key) from exc
        now = _server_time(response)
        modified = response["LastModified"].timestamp()
        age = 0.0 if now is None else max(0.0, now - modified - _CLOCK_RESOLUTION_SECONDS)
        return StoredObject(body=body, etag=response["ETag"], age_seconds=age)

    def exists(self, key: str) -> bool:
        try:
            self.s3.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as exc:
            if _error_code(exc) in _MISSING_CODES:
                return False
            raise self._storage_error(exc, "HEAD", key) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, "HEAD", key) from exc

    def _put(self, key: str, body: bytes, op: str, **conditions: str) -> str:
        try:
            response = self.s3.put_object(Bucket=self.bucket, Key=self._key(key), Body=body, **conditions)
        except ClientError as exc:
            code = _error_code(exc)
            if code in _CONFLICT_CODES:
                raise WriteConflict(key) from exc
            if code in _CONDITION_CODES:
                raise (ObjectExists if "IfNoneMatch" in conditions else ObjectChanged)(key) from exc
            if code in _MISSING_CODES:
                raise ObjectNotFound(key) from exc
            raise self._storage_error(exc, op, key) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, op, key) from exc
        return response["ETag"]

    def create(self, key: str, body: bytes) -> str:
        return self._put(key, body, "PUT If-None-Match", IfNoneMatch="*")

    def replace(self, key: str, body: bytes, etag: str) -> str:
        return self._put(key, body, "PUT If-Match", IfMatch=etag)

    def write(self, key: str, body: bytes) -> str:
        return self._put(key, body, "PUT")

    def delete(self, key: str, etag: str | None = None) -> None:
        conditions = {"IfMatch": etag} if etag is not None else {}
        try:
            self.s3.delete_object(Bucket=self.bucket, Key=self._key(key), **conditions)
        except ClientError as exc:
            code = _error_code(exc)
            if code in _CONFLICT_CODES:
                raise WriteConflict(key) from exc
            if code in _CONDITION_CODES:
                raise ObjectChanged(key) from exc
            if code in _MISSING_CODES:
                raise ObjectNotFound(key) from exc
            raise self._storage_error(exc, "DELETE", key) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, "DELETE", key) from exc

    def list_keys(self, prefix: str) -> Iterator[str]:
        full_prefix = self._key(prefix)
        strip = len(self._key(""))
        paginator = self.s3.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full_prefix):
                for item in page.get("Contents", []):
                    yield item["Key"][strip:]
        except ClientError as exc:
            raise self._storage_error(exc, "LIST", prefix) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, "LIST", prefix) from exc
