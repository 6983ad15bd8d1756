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
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote_plus

import botocore.handlers
from botocore.exceptions import BotoCoreError, ClientError

from s3wq.errors import (
    BucketNotFound,
    ConditionalDeleteUnsupported,
    ConditionFailed,
    ObjectChanged,
    ObjectExists,
    ObjectNotFound,
    StorageError,
    WriteConflict,
)
from s3wq.store.base import StoredObject

_CONDITION_CODES = {"PreconditionFailed", "412"}
# Two conditional writes to one key in flight at once: the loser gets 409.
# One of them may be our own first try, still being applied, that the SDK
# gave up waiting for; callers must not take a 409 as proof of another writer.
_CONFLICT_CODES = {"ConditionalRequestConflict", "409"}
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
_RANGE_PAST_END_CODES = {"InvalidRange", "416"}

# Last-Modified and Date both have one-second resolution; subtracting one
# second keeps the computed age a lower bound of the true age, which it then
# trails by up to two seconds.
_CLOCK_RESOLUTION_SECONDS = 1.0


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _server_time(response: dict[str, Any]) -> float | None:
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if not date:
        return None
    return email.utils.parsedate_to_datetime(date).timestamp()


def _age_seconds(response: dict[str, Any]) -> float:
    now = _server_time(response)
    modified = response["LastModified"].timestamp()
    return 0.0 if now is None else max(0.0, now - modified - _CLOCK_RESOLUTION_SECONDS)


# --- listing keys without parsing what list_keys does not use ---------------------------------------------
#
# For a page of 1,000 keys botocore spends ~90 ms of CPU parsing every field
# (every LastModified into a datetime), plus a few ms parsing the whole page
# once more to look for an error in a 200 response, and URL-decodes every
# key; under the GIL, where the keys alone take well under 1 ms. A count of
# a million groups lists ~600 full pages. So on a page that list_keys asked
# for, a before-parse hook takes the keys out and hands botocore the page
# without its <Contents> elements: botocore then parses, and checks for an
# error, only the pagination fields. A page in any other shape (another
# element between two <Contents>, escaped characters in a key, a count that
# does not match) is left whole to botocore.

_KEYS_ONLY_HOOK_ID = "s3wq-list-keys-only"
_LISTING_KEYS = threading.local()
_KEY_RE = re.compile(rb"<Contents>\s*<Key>([^<&]*)</Key>")
_BETWEEN_CONTENTS_RE = re.compile(rb"</Contents>\s*<Contents>")
_KEY_COUNT_RE = re.compile(rb"<KeyCount>(\d+)</KeyCount>")
_URL_ENCODED = b"<EncodingType>url</EncodingType>"
_CONTENTS, _END_CONTENTS = b"<Contents>", b"</Contents>"


@contextmanager
def _listing_keys_only() -> Iterator[None]:
    _LISTING_KEYS.active = True
    try:
        yield
    finally:
        _LISTING_KEYS.active = False


def _keys_and_rest(body: bytes) -> tuple[list[str], bytes] | None:
    """The keys of a ListObjectsV2 page (as sent: URL-encoded if asked) and the page without them; None if not S3's plain shape.

    The plain shape: the <Contents> elements side by side (whitespace at most
    between them), each opening with its <Key>, as many as <KeyCount> says (no
    common prefixes: list_keys sets no delimiter).
    """
    first, last = body.find(_CONTENTS), body.rfind(_END_CONTENTS)
    if first < 0 or last < first:
        return None  # no keys: nothing to save
    contents = body[first : last + len(_END_CONTENTS)]
    keys = _KEY_RE.findall(contents)
    rest = body[:first] + body[last + len(_END_CONTENTS) :]
    counted = _KEY_COUNT_RE.search(rest)
    elements = contents.count(_CONTENTS)
    # S3's own pages have no whitespace between elements: the quick count first.
    side_by_side = contents.count(_END_CONTENTS + _CONTENTS) == elements - 1 or len(_BETWEEN_CONTENTS_RE.findall(contents)) == elements - 1
    if counted is None or not side_by_side or int(counted.group(1)) != len(keys) or elements != len(keys):
        return None
    return [key.decode("utf-8") for key in keys], rest


def _parse_keys_only(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any] | None = None, operation_model: Any = None, **_: Any
) -> None:
    if not getattr(_LISTING_KEYS, "active", False) or getattr(operation_model, "name", None) != "ListObjectsV2":
        return
    if customized_response_dict is None or response_dict.get("status_code") != 200 or not isinstance(response_dict.get("body"), bytes):
        return
    split = _keys_and_rest(response_dict["body"])
    if split is not None:
        keys, response_dict["body"] = split
        # Merged by botocore into what it parses of the rest.
        customized_response_dict["Contents"] = [{"Key": key} for key in keys]


def _install_keys_only(events: Any) -> None:
    """Hook _parse_keys_only into a client's events, ahead of botocore's check for errors in 200 responses.

    That check (registered first for every S3 response) parses the whole
    page; run after ours, it parses only the rest. If botocore no longer has
    it under that name, ours runs after it, which is correct, only slower.
    """
    check_200 = getattr(botocore.handlers, "_handle_200_error", None)
    if check_200 is not None:
        events.unregister("before-parse.s3.*", check_200)
    events.register_first("before-parse.s3.*", _parse_keys_only, unique_id=_KEYS_ONLY_HOOK_ID)
    if check_200 is not None:
        events.register_first("before-parse.s3.*", check_200)


class S3Backend:
    clock_resolution_seconds = 2 * _CLOCK_RESOLUTION_SECONDS
    narrow_listing_is_cheap = True
    # Whatever the store at the endpoint does: probed before a worker claims.
    conditions_are_our_own = False

    def __init__(self, *, s3_client: Any, bucket: str, prefix: str = ""):
        self.s3 = s3_client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        # Acts only on list_keys' own pages (see _parse_keys_only).
        _install_keys_only(s3_client.meta.events)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _conditional_error(
        self, exc: ClientError, op: str, key: str, *, writes: bool, on_condition: type[ConditionFailed] = ObjectChanged
    ) -> Exception:
        """The typed error for a failed request that named a condition: conflicts (writes only), condition, missing, else storage."""
        code = _error_code(exc)
        if writes and code in _CONFLICT_CODES:
            return WriteConflict(key)
        if code in _CONDITION_CODES:
            return on_condition(key)
        if code in _MISSING_CODES:
            return ObjectNotFound(key)
        return self._storage_error(exc, op, key)

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
        return StoredObject(body=body, etag=response["ETag"], age_seconds=_age_seconds(response))

    def read_range(self, key: str, start: int, length: int, etag: str | None = None) -> StoredObject:
        conditions = {"IfMatch": etag} if etag is not None else {}
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=self._key(key), Range=f"bytes={start}-{start + length - 1}", **conditions)
            body = response["Body"].read()
        except ClientError as exc:
            if _error_code(exc) in _RANGE_PAST_END_CODES:
                # S3 answers a range past the end (any range of an empty
                # object) with 416, which carries no ETag: a HEAD names the version.
                return self._nothing_past_end(key, conditions)
            raise self._conditional_error(exc, "GET range", key, writes=False) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, "GET range", key) from exc
        return StoredObject(body=body, etag=response["ETag"], age_seconds=_age_seconds(response))

    def _nothing_past_end(self, key: str, conditions: dict[str, str]) -> StoredObject:
        try:
            response = self.s3.head_object(Bucket=self.bucket, Key=self._key(key), **conditions)
        except ClientError as exc:
            raise self._conditional_error(exc, "HEAD", key, writes=False) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, "HEAD", key) from exc
        return StoredObject(body=b"", etag=response["ETag"], age_seconds=_age_seconds(response))

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
            on_condition = ObjectExists if "IfNoneMatch" in conditions else ObjectChanged
            raise self._conditional_error(exc, op, key, writes=True, on_condition=on_condition) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, op, key) from exc
        etag: str = response["ETag"]
        return etag

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
            if etag is not None and _error_code(exc) in ("NotImplemented", "501"):
                raise ConditionalDeleteUnsupported(f"the store cannot delete s3://{self.bucket}/{self._key(key)} on a condition") from exc
            raise self._conditional_error(exc, "DELETE", key, writes=True) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, "DELETE", key) from exc

    def list_keys(self, prefix: str) -> Iterator[str]:
        full_prefix = self._key(prefix)
        strip = len(self._key(""))
        # EncodingType asked for here, not left to botocore: botocore would then
        # URL-decode every key of every page; here only a key with an escape
        # ("%", or "+" for a space, as botocore decodes them) is.
        pages = iter(self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full_prefix, EncodingType="url"))
        try:
            while True:
                # Only while this thread fetches the page: the caller may list or read through the same client between pages.
                with _listing_keys_only():
                    page = next(pages, None)
                if page is None:
                    return
                # A page at a time, in comprehensions: a count lists up to a million keys.
                keys = [item["Key"] for item in page.get("Contents", ())]
                if page.get("EncodingType") == "url":
                    keys = [unquote_plus(key) if "%" in key or "+" in key else key for key in keys]
                yield from (keys if not strip else [key[strip:] for key in keys])
        except ClientError as exc:
            raise self._storage_error(exc, "LIST", prefix) from exc
        except BotoCoreError as exc:
            raise self._storage_error(exc, "LIST", prefix) from exc
