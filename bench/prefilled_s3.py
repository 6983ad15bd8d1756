"""The local S3 server, with a bucket filled before it starts serving, and listed as S3 lists: for benchmarks of big workspaces.

Two things the local server (``s3wq.dev.local_s3``: moto) does far slower than
S3, and that a benchmark of a big workspace would otherwise measure instead
of the client:

* **Writing.** It takes about 250 PUTs a second over HTTP (its own CPU is
  the limit, however many clients write), so 60,000 flags would take four
  minutes. This process puts the objects into moto's store through moto's
  in-process API before it serves (tens of thousands a second).
* **Listing.** For every ListObjectsV2 page, moto copies and scans the whole
  bucket, sorts what matches and renders a template: about 0.2 s of CPU for
  a page of 1,000 keys in a bucket of 60,000, growing with the bucket, on one
  GIL. S3 answers from a sorted index in tens of milliseconds whatever the
  bucket holds. So here a plain listing of the bucket (a prefix, pages, no
  delimiter) is answered from a sorted list of its keys, rebuilt after any
  write, in S3's XML; anything else goes to moto.

Everything else is moto, served as ``s3wq.dev.local_s3`` serves it. The objects
read back over HTTP are what was filled, with the Last-Modified of the fill.
A benchmark checks what it reads back against what it filled.

The objects come from a file of JSON lines, ``[key, body]`` (body as UTF-8 text).

    .venv/bin/python bench/prefilled_s3.py --port 5000 --bucket my-bucket --objects objects.jsonl
"""

from __future__ import annotations

import argparse
import base64
import bisect
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, quote
from xml.sax.saxutils import escape

from s3wq.dev.local_s3 import FAKE_CREDENTIALS, LocalServer

# Filling 100,000 objects takes a few seconds; starting the server after it, one more.
START_TIMEOUT_SECONDS = 600.0
MAX_KEYS = 1000  # S3's most keys a page
_READS = ("GET", "HEAD")


class PrefilledS3(LocalServer):
    """``with PrefilledS3(bucket, objects_file) as server:`` -- the bucket exists and holds the objects once it answers."""

    name = "prefilled local S3 server"

    def __init__(self, bucket: str, objects_file: Path, port: int | None = None):
        super().__init__(port)
        self.bucket = bucket
        self.objects_file = objects_file

    def command(self) -> list[str]:
        return [sys.executable, __file__, "--port", str(self.port), "--bucket", self.bucket, "--objects", str(self.objects_file)]

    def __enter__(self) -> Self:
        self.start(timeout=START_TIMEOUT_SECONDS)
        return self


def moto_store() -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    return s3_backends[DEFAULT_ACCOUNT_ID]["aws"]


def fill(bucket: str, objects_file: Path) -> int:
    store = moto_store()
    store.create_bucket(bucket, FAKE_CREDENTIALS["AWS_DEFAULT_REGION"])
    count = 0
    with open(objects_file, encoding="utf-8") as lines:
        for line in lines:
            key, body = json.loads(line)
            store.put_object(bucket, key, body.encode("utf-8"), disable_notification=True)
            count += 1
    return count


class SortedListing:
    """A WSGI wrapper that answers plain ListObjectsV2 requests for ``bucket`` from a sorted list of its keys."""

    def __init__(self, app: Any, bucket: str):
        self.app = app
        self.bucket = bucket
        self.lock = threading.Lock()
        self.names: list[str] | None = None  # None: rebuild before the next listing

    def __call__(self, environ: dict, start_response: Any) -> Any:
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        plain_listing = (
            environ.get("REQUEST_METHOD") == "GET"
            and environ.get("PATH_INFO") == f"/{self.bucket}"
            and query.get("list-type") == ["2"]
            and not {"delimiter", "fetch-owner", "start-after"} & set(query)
        )
        if not plain_listing:
            if environ.get("REQUEST_METHOD") not in _READS:
                with self.lock:
                    self.names = None
            return self.app(environ, start_response)
        body = self.page(query)
        start_response("200 OK", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def sorted_names(self) -> list[str]:
        with self.lock:
            if self.names is None:
                self.names = sorted(moto_store().get_bucket(self.bucket).keys.keys())
            return self.names

    def page(self, query: dict[str, list[str]]) -> bytes:
        names = self.sorted_names()
        prefix = query.get("prefix", [""])[0]
        max_keys = min(MAX_KEYS, int(query.get("max-keys", [str(MAX_KEYS)])[0]))
        url = query.get("encoding-type") == ["url"]
        token = query.get("continuation-token", [None])[0]
        after = base64.urlsafe_b64decode(token.encode()).decode("utf-8") if token else None
        start = bisect.bisect_right(names, after) if after is not None else bisect.bisect_left(names, prefix)
        keys = moto_store().get_bucket(self.bucket).keys
        chosen = []
        for name in names[start:]:
            if not name.startswith(prefix) or len(chosen) > max_keys:
                break
            chosen.append(name)
        truncated = len(chosen) > max_keys
        chosen = chosen[:max_keys]

        def text(value: str) -> str:
            return escape(quote(value, safe="/") if url else value)

        parts = [
            '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
            f"<Name>{escape(self.bucket)}</Name><Prefix>{text(prefix)}</Prefix><MaxKeys>{max_keys}</MaxKeys><KeyCount>{len(chosen)}</KeyCount>",
            "<EncodingType>url</EncodingType>" if url else "",
            f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>",
            f"<ContinuationToken>{escape(token)}</ContinuationToken>" if token else "",
        ]
        if truncated:
            parts.append(f"<NextContinuationToken>{base64.urlsafe_b64encode(chosen[-1].encode()).decode()}</NextContinuationToken>")
        for name in chosen:
            key = keys[name]
            etag = escape(key.etag, {'"': "&quot;"})
            parts.append(
                f"<Contents><Key>{text(name)}</Key><LastModified>{key.last_modified_ISO8601}</LastModified>"
                f"<ETag>{etag}</ETag><Size>{key.size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
            )
        parts.append("</ListBucketResult>")
        return "".join(parts).encode("utf-8")


def serve(host: str, port: int, bucket: str) -> None:
    """As ``s3wq.dev.local_s3.serve``, with the bucket's plain listings answered by SortedListing."""
    import signal

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    from s3wq.dev.local_s3 import dispatch_without_rescanning, serialized_writes

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    dispatch_without_rescanning()
    app = SortedListing(serialized_writes(DomainDispatcherApplication(create_backend_app)), bucket)
    run_simple(host, port, app, threaded=True, request_handler=MotoRequestHandler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--objects", type=Path, required=True, help="JSON lines: [key, body]")
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))
    fill(args.bucket, args.objects)
    serve(args.host, args.port, args.bucket)


if __name__ == "__main__":
    main()
