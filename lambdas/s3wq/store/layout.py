"""Every key s3wq reads or writes, relative to the workspace root.

The names under the workspace root are olmocr's, so either tool can work on a
workspace the other created. Keys that embed a group hash are built only
after the hash is checked to be 40 lowercase hex characters: a hash read from
an index object is untrusted input.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Iterator

from s3wq.errors import BadGroupHash, BadKey

# olmocr's names.
LEGACY_INDEX_KEY = "work_index_list.csv.zstd"
LOCKS_PREFIX = "worker_locks/worker_"
DONE_PREFIX = "done_flags/done_"
# s3wq's additions.
FAILED_PREFIX = "failed_flags/failed_"
RESULTS_PREFIX = "results/output_"
INDEX_CATALOG_KEY = "index/catalog.json"
INDEX_SEGMENTS_PREFIX = "index/segments/"
# A group done with inputs the processor could not use (missing, unreadable, unsupported).
INPUT_ERRORS_PREFIX = "input_errors/input_errors_"
# Lines of an uploaded manifest that populate could not use. Not under
# manifests/: a write there would trigger populate again.
MANIFEST_ERRORS_PREFIX = "manifest_errors/"
MANIFESTS_DIR = "manifests/"
# Where a deployment reads inputs when it is told no other place (S3WQ_INPUT_LOCATIONS unset; a stack in an existing bucket without inputBuckets).
INPUTS_DIR = "inputs/"

LOCK_SUFFIX = ".lock"
DONE_SUFFIX = ".flag"
FAILED_SUFFIX = ".json"
RESULT_SUFFIX = ".jsonl"
INPUT_ERRORS_SUFFIX = ".json"

_HASH_RE = re.compile(r"[0-9a-f]{40}")
_HEX_PREFIX_RE = re.compile(r"[0-9a-f]{0,40}")


def group_hash(paths: Iterable[str]) -> str:
    """SHA-1 of the group's sorted paths, exactly as olmocr computes it.

    olmocr feeds each path's UTF-8 bytes to one SHA-1 with no separator; any
    change here would make the two tools disagree on every lock and flag.
    """
    sha1 = hashlib.sha1()
    for path in sorted(paths):
        sha1.update(path.encode("utf-8"))
    return sha1.hexdigest()


def check_hash(value: str) -> str:
    # fullmatch, not match: "$" would also accept a trailing newline.
    if not is_hash(value):
        raise BadGroupHash(f"group hash must be 40 lowercase hex characters, got {value!r:.60}")
    return value


def is_hash(value: object) -> bool:
    """Whether ``value`` is a group hash as s3wq and olmocr write it: 40 lowercase hex characters."""
    return isinstance(value, str) and _HASH_RE.fullmatch(value) is not None


def check_hex_prefix(value: str) -> str:
    if not isinstance(value, str) or not _HEX_PREFIX_RE.fullmatch(value):
        raise BadGroupHash(f"hash prefix must be lowercase hex, got {value!r:.60}")
    return value


def lock_key(hash_: str) -> str:
    return f"{LOCKS_PREFIX}{check_hash(hash_)}{LOCK_SUFFIX}"


def done_key(hash_: str) -> str:
    return f"{DONE_PREFIX}{check_hash(hash_)}{DONE_SUFFIX}"


def failed_key(hash_: str) -> str:
    return f"{FAILED_PREFIX}{check_hash(hash_)}{FAILED_SUFFIX}"


def result_key(hash_: str) -> str:
    return f"{RESULTS_PREFIX}{check_hash(hash_)}{RESULT_SUFFIX}"


# Where a worker probes the store's conditional writes at start: under the
# locks' folder (the lifecycle rule expires a probe left behind), named by no hash.
PROBE_PREFIX = "worker_locks/probe_"


def probe_key(token: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{8,32}", token):
        raise BadKey(f"not a probe token: {token[:40]!r}")
    return f"{PROBE_PREFIX}{token}.json"


def input_errors_key(hash_: str) -> str:
    return f"{INPUT_ERRORS_PREFIX}{check_hash(hash_)}{INPUT_ERRORS_SUFFIX}"


_MANIFEST_NAME_RE = re.compile(r"[^\x00-\x1f\x7f]{1,512}")


def manifest_errors_key(manifest_name: str) -> str:
    """Where the bad lines of manifest ``manifest_name`` (its key under manifests/) are recorded."""
    parts = manifest_name.split("/")
    if not _MANIFEST_NAME_RE.fullmatch(manifest_name) or any(p in ("", ".", "..") for p in parts):
        raise BadKey(f"not a usable manifest name: {manifest_name[:80]!r}")
    return f"{MANIFEST_ERRORS_PREFIX}{manifest_name}.json"


def segment_key(digest: str) -> str:
    return f"{INDEX_SEGMENTS_PREFIX}{check_hash(digest)}.csv.zstd"


@functools.lru_cache(maxsize=32)
def _hash_key_re(prefix: str, suffix: str) -> re.Pattern[str]:
    return re.compile(re.escape(prefix) + "([0-9a-f]{40})" + re.escape(suffix))


def hash_from_key(key: str, prefix: str, suffix: str) -> str | None:
    """The group hash in a listed flag/lock key, or None for a foreign object."""
    # One compiled match per key: a count of a million groups calls this for every done flag.
    matched = _hash_key_re(prefix, suffix).fullmatch(key)
    return matched.group(1) if matched else None


def hashes_in_keys(keys: Iterable[str], prefix: str, suffix: str) -> Iterator[str]:
    """The group hash in each listed key that names one (as :func:`hash_from_key`), foreign objects skipped."""
    match = _hash_key_re(prefix, suffix).fullmatch
    for key in keys:
        if matched := match(key):
            yield matched.group(1)
