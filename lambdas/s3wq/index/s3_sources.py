"""The user's S3 objects named as sources: what an S3 error reading one means, and which of them exist.

An error S3 gives for something the user named (a bucket or key that is not
there, or not readable) is the user's mistake, BadSource; any other is the
store failing, StorageError.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3wq.errors import BadSource, StorageError
from s3wq.store import MAX_PARALLEL_REQUESTS, parse_s3_uri

# S3 answers that mean "the user named something that is not there", as
# opposed to the store failing.
USER_ERROR_CODES = {"NoSuchBucket", "NoSuchKey", "404", "AccessDenied", "403", "InvalidBucketName"}
# Objects of one folder checked one HEAD each, up to this many; more are
# checked by listing the folder from the first of them to the last.
_HEAD_AT_MOST = 4


def s3_read_error(exc: Exception, what: str) -> Exception:
    """The error to raise for ``exc``, from reading ``what`` the user named: BadSource for the user's mistake, else StorageError."""
    if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in USER_ERROR_CODES:
        return BadSource(f"cannot read {what}: {exc.response['Error'].get('Code')}")
    return StorageError(f"cannot read {what}: {exc}")


def missing_objects(s3: Any, uris: list[str]) -> set[str]:
    """Which of ``uris`` (plain ``s3://bucket/key``) name no object this client may read.

    Grouped by folder: up to _HEAD_AT_MOST objects of a folder cost a HEAD
    each; more are found by listing the folder from just before the first of
    them to the last, a thousand keys a page. A listing never costs more
    requests than the HEADs it replaces: past one page per wanted key (a few
    keys scattered over a huge folder) the keys not reached yet are checked
    one HEAD each, as they are when the caller may read but not list.
    Folders are checked MAX_PARALLEL_REQUESTS at a time.
    """
    folders: dict[tuple[str, str], list[str]] = {}
    for uri in uris:
        bucket, key = parse_s3_uri(uri)
        folders.setdefault((bucket, key[: key.rfind("/") + 1]), []).append(key)

    def check(item: tuple[tuple[str, str], list[str]]) -> list[str]:
        (bucket, folder), keys = item
        keys = sorted(keys)
        missing, unknown = ([], keys) if len(keys) <= _HEAD_AT_MOST else _check_by_listing(s3, bucket, folder, keys)
        missing += [k for k in unknown if not _head_exists(s3, bucket, k)]
        return [f"s3://{bucket}/{k}" for k in missing]

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_REQUESTS, len(folders))) as pool:
        return {uri for missing in pool.map(check, folders.items()) for uri in missing}


def _check_by_listing(s3: Any, bucket: str, folder: str, keys: list[str]) -> tuple[list[str], list[str]]:
    """List ``folder`` across ``keys`` (sorted), a page per key at most: (keys listed past and absent, keys not reached)."""
    wanted = set(keys)
    found: set[str] = set()
    listed_to = ""
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder, StartAfter=keys[0][:-1])
        for number, page in enumerate(pages, start=1):
            contents = page.get("Contents", [])
            found.update(item["Key"] for item in contents if item["Key"] in wanted)
            if not page.get("IsTruncated") or not contents:
                listed_to = keys[-1]  # the folder ends here: every key is accounted for
                break
            listed_to = contents[-1]["Key"]
            if listed_to >= keys[-1] or number >= len(keys):
                break
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code == "NoSuchBucket":
            return keys, []
        if code in USER_ERROR_CODES:
            return [], keys  # may read but not list: a HEAD each tells which
        raise StorageError(f"cannot list s3://{bucket}/{folder}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot list s3://{bucket}/{folder}: {exc}") from exc
    absent = [k for k in keys if k not in found and k <= listed_to]
    return absent, [k for k in keys if k > listed_to]


def _head_exists(s3: Any, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in USER_ERROR_CODES:
            return False
        raise StorageError(f"cannot check s3://{bucket}/{key}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot check s3://{bucket}/{key}: {exc}") from exc
