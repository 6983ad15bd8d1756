"""Open a workspace URI as a backend: ``s3://bucket/prefix`` or a local directory."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from ..errors import BadWorkspace
from .base import Backend, StoredObject
from .local import LocalBackend
from .s3 import S3Backend

__all__ = [
    "Backend",
    "StoredObject",
    "LocalBackend",
    "MAX_PARALLEL_REQUESTS",
    "S3Backend",
    "counting_requests",
    "open_backend",
    "parse_s3_uri",
    "make_s3_client",
    "request_counts",
]

# The S3 bucket naming rules (general purpose buckets), checked before any
# request so a typo is a one-line error rather than a signature failure.
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split ``s3://bucket/key`` into (bucket, key); raise BadWorkspace if malformed."""
    parts = urlsplit(uri)
    if parts.scheme != "s3":
        raise BadWorkspace(f"not an S3 URI: {uri!r}")
    bucket = parts.netloc
    if not _BUCKET_RE.match(bucket):
        raise BadWorkspace(f"invalid bucket name {bucket!r} in {uri!r}")
    key = uri[len("s3://") + len(bucket) :].lstrip("/")
    return bucket, key


# Connections a client from make_s3_client keeps open: code that runs
# requests on threads runs at most this many at once (botocore opens and drops
# extra connections past its pool, with a warning for each).
MAX_PARALLEL_REQUESTS = 32

# Up to this size a PUT goes out whole, without first asking "Expect:
# 100-continue": a lock, a flag or a catalog is far smaller than one round
# trip's worth of bandwidth, so waiting for the server's go-ahead only adds
# that round trip (measured on the local S3 server: 10.5 ms a PUT with it,
# 5.4 ms without). Bigger bodies (index segments) keep asking.
SMALL_BODY_BYTES = 64 * 1024


def _send_small_bodies_at_once(request: Any, **_: Any) -> None:
    body = request.body
    if isinstance(body, (bytes, bytearray)) and len(body) <= SMALL_BODY_BYTES:
        request.headers.pop("Expect", None)  # not a signed header (botocore leaves it out of SigV4)


def make_s3_client() -> Any:
    """A boto3 S3 client with standard retries; honours AWS_ENDPOINT_URL like every AWS SDK.

    It counts the HTTP requests it sends, by operation, retries included:
    see :func:`request_counts`. Checksums are computed for uploads only where
    S3 requires them: s3wq's objects are small, and its index segments carry
    their own (their key is the SHA-1 of their body, checked on every read).
    """
    import boto3
    from botocore.config import Config

    config = Config(
        retries={"mode": "standard", "max_attempts": 8},
        max_pool_connections=MAX_PARALLEL_REQUESTS,
        request_checksum_calculation="when_required",
    )
    client = counting_requests(boto3.client("s3", config=config))
    client.meta.events.register("before-send.s3.PutObject", _send_small_bodies_at_once)
    return client


def counting_requests(client: Any) -> Any:
    """``client``, counting the HTTP requests it sends by operation (see :func:`request_counts`)."""
    counts: Counter = Counter()

    def count(event_name: str, **_: Any) -> None:
        counts[event_name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-send.s3", count)
    client.meta.s3wq_request_counts = counts
    return client


def request_counts(client: Any) -> dict[str, int]:
    """Requests sent so far by a client from :func:`make_s3_client`, by S3 operation."""
    return dict(sorted(getattr(client.meta, "s3wq_request_counts", {}).items()))


def open_backend(uri: str, *, s3_client: Any = None) -> Backend:
    """Return the backend for a workspace URI; raise BadWorkspace for an unknown scheme."""
    if not uri:
        raise BadWorkspace("workspace is empty")
    if "://" not in uri:
        return LocalBackend(uri)
    scheme = uri.split("://", 1)[0].lower()
    if scheme == "s3":
        bucket, prefix = parse_s3_uri(uri)
        if ".." in prefix.split("/"):
            raise BadWorkspace(f"workspace prefix may not contain '..': {uri!r}")
        return S3Backend(s3_client=s3_client or make_s3_client(), bucket=bucket, prefix=prefix)
    if scheme == "file":
        return LocalBackend(urlsplit(uri).path)
    raise BadWorkspace(f"unknown workspace scheme {scheme!r} in {uri!r} (use s3://bucket/prefix or a local directory)")
