"""Open a workspace URI as a backend (``s3://bucket/prefix`` or a local directory); parse S3 URIs; make and count S3 clients."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from s3wq.errors import BadWorkspace
from s3wq.store.base import Backend, StoredObject
from s3wq.store.local import LocalBackend
from s3wq.store.s3 import S3Backend

__all__ = [
    "MAX_PARALLEL_REQUESTS",
    "Backend",
    "LocalBackend",
    "S3Backend",
    "StoredObject",
    "counting_requests",
    "make_s3_client",
    "open_backend",
    "parse_s3_uri",
    "request_counts",
    "uri_mistake",
]

# The S3 bucket naming rules (general purpose buckets), checked before any
# request so a typo is a one-line error rather than a signature failure.
# Matched whole (re.fullmatch): "$" would let a trailing newline through.
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split ``s3://bucket/key`` into (bucket, key); raise BadWorkspace, and nothing else, if malformed.

    The bucket is everything up to the first "/", the key everything after it,
    as written: ``s3://{bucket}/{key}`` is ``uri`` again (``s3://bucket`` has
    the key ""). Not urlsplit: it drops tabs and newlines, ends the bucket at
    "?" or "#", and raises ValueError of its own ("Invalid IPv6 URL"), so the
    path shown would not be the object read.
    """
    if not uri.startswith("s3://"):
        raise BadWorkspace(f"not an S3 URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise BadWorkspace(f"no bucket in {uri!r} (expected s3://bucket/...)")
    if not _BUCKET_RE.fullmatch(bucket):
        raise BadWorkspace(f"invalid bucket name {bucket!r} in {uri!r}")
    return bucket, key


# What other tools call S3 (Hadoop's s3a and s3n; "S3" in capitals, which
# the AWS CLI does not take either): suggested as s3://.
_S3_SCHEMES = re.compile(r"s3[an]?", re.IGNORECASE)
# "s3:" with one slash, none, or backslashes (a Windows habit), and "s3//"
# without its colon. "s3/x" is left alone: a folder named s3.
_MISTYPED_S3 = re.compile(r"(s3[an]?)(?::+[/\\]*|[/\\]{2,}|\\+)(.*)", re.IGNORECASE | re.DOTALL)
# Another scheme with "://" mistyped ("gs:/b", "https:\\h"); one letter is a Windows drive ("C:\\data").
_MISTYPED_URI = re.compile(r"([a-z][a-z0-9+.-]+):[/\\].*", re.IGNORECASE | re.DOTALL)
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*", re.IGNORECASE)
# An S3 object's https:// address: virtual-hosted (bucket.s3.region.amazonaws.com/key) or path style (s3.region.amazonaws.com/bucket/key).
_S3_URL_HOST = re.compile(r"(?:(?P<bucket>[a-z0-9][a-z0-9.-]*)\.)?s3(?:[.-][a-z0-9-]+)*\.amazonaws\.com(?:\.cn)?", re.IGNORECASE)


def _as_s3_uri(rest: str) -> str:
    rest = rest.replace("\\", "/").lstrip("/")
    return f"s3://{rest}" if rest else "s3://BUCKET/..."


def uri_mistake(text: str) -> str | None:
    """Why ``text``, named as a workspace or a source, looks like a mistyped or unsupported URI; None if it does not.

    Every ``scheme://`` but ``s3://`` is one, and so is something that is
    nearly ``s3://`` (``s3:/x``, ``s3:x``, ``s3//x``, ``s3:\\x``, ``S3://x``,
    ``s3a://x``): taken as a local path it would make a folder named ``s3:``
    and look like success. The reason suggests the URI meant, when there is
    one. A local path that starts like that is named with ``./`` in front.
    """
    if "://" in text:
        scheme, rest = text.split("://", 1)
        if scheme == "s3":
            return None  # parse_s3_uri judges the bucket and key
        if _S3_SCHEMES.fullmatch(scheme.rstrip(":")):
            return f"not an s3:// URI: did you mean {_as_s3_uri(rest)}?"
        if scheme.lower() in ("http", "https"):
            host, _, path = rest.partition("/")
            s3_host = _S3_URL_HOST.fullmatch(host)
            if s3_host:
                suggested = f"{s3_host['bucket']}/{path}" if s3_host["bucket"] else path
                return f"an {scheme.lower()}:// URL, and s3wq reads s3:// URIs: did you mean {_as_s3_uri(suggested)}?"
        if scheme.lower() == "file":
            return f"unsupported scheme 'file' (s3wq reads s3:// URIs and local paths: name the path itself, {rest or '/'})"
        if _SCHEME.fullmatch(scheme):
            return f"unsupported scheme {scheme!r} (s3wq reads s3:// URIs and local paths)"
        return "'://' after something that is not a scheme (s3wq reads s3:// URIs and local paths)"
    mistyped = _MISTYPED_S3.fullmatch(text)
    if mistyped:
        return f"looks like a mistyped S3 URI: did you mean {_as_s3_uri(mistyped[2])}? (a local path that starts so: ./{text})"
    mistyped = _MISTYPED_URI.fullmatch(text)
    if mistyped:
        return (
            f"looks like a {mistyped[1]}:// URI with its '//' mistyped; s3wq reads s3:// URIs and local paths "
            f"(a local path that starts so: ./{text})"
        )
    return None


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
    counts: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        counts[event_name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-send.s3", count)
    client.meta.s3wq_request_counts = counts
    return client


def request_counts(client: Any) -> dict[str, int]:
    """Requests sent so far by a client from :func:`make_s3_client`, by S3 operation."""
    return dict(sorted(getattr(client.meta, "s3wq_request_counts", {}).items()))


def open_backend(uri: str, *, s3_client: Any = None) -> LocalBackend | S3Backend:
    """Return the backend for a workspace URI; raise BadWorkspace for an unknown scheme."""
    if not uri:
        raise BadWorkspace("workspace is empty")
    if uri.startswith("file://"):
        # A local directory, said unambiguously.
        return LocalBackend(urlsplit(uri).path)
    mistake = uri_mistake(uri)
    if mistake:
        # Before anything is created: a mistyped s3:// would otherwise become a local folder.
        raise BadWorkspace(f"workspace {uri!r}: {mistake}")
    if "://" not in uri:
        return LocalBackend(uri)
    bucket, prefix = parse_s3_uri(uri)
    if ".." in prefix.split("/"):
        raise BadWorkspace(f"workspace prefix may not contain '..': {uri!r}")
    return S3Backend(s3_client=s3_client or make_s3_client(), bucket=bucket, prefix=prefix)
