"""S3 as bench/scale.py models it: its per-prefix request limits, where each request lands, its latency, and a phase's rates.

A tally counts requests by (operation, prefix); ``phase`` turns one into the
rates per prefix and class that S3's limits are judged on.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from s3wq.store import layout
from s3wq.store.base import LIST_PAGE_KEYS

# --- S3's limits -----------------------------------------------------------------------------------------

# "Your application can achieve at least 3,500 PUT/COPY/POST/DELETE or 5,500
# GET/HEAD requests per second per partitioned Amazon S3 prefix": AWS, "Best
# practices design patterns: optimizing Amazon S3 performance" (S3 User Guide,
# optimizing-performance.html). LIST is in neither list. It is priced in the
# PUT/COPY/POST/LIST tier (cost.S3_TIER), and the same guidance until mid-2018
# counted it with the writes ("100 PUT/LIST/DELETE or 300 GET requests per
# second"), so LIST is counted here against the 3,500 a prefix's writes share:
# the cautious reading. Every rate is also given by operation, for a reader
# who counts LIST otherwise.
WRITE_CLASS = "PUT/COPY/POST/DELETE+LIST"
READ_CLASS = "GET/HEAD"
RATE_LIMITS = {WRITE_CLASS: 3500, READ_CLASS: 5500}
RATE_CLASS = {
    "PutObject": WRITE_CLASS,
    "CopyObject": WRITE_CLASS,
    "PostObject": WRITE_CLASS,
    "DeleteObject": WRITE_CLASS,
    "ListObjectsV2": WRITE_CLASS,
    "GetObject": READ_CLASS,
    "HeadObject": READ_CLASS,
}
# Above the limit S3 answers 503 Slow Down until it has split the prefix;
# s3wq's client (s3wq.store.make_s3_client) uses the SDK's standard retry
# mode, up to 8 attempts, which retries 503 Slow Down with jittered backoff.
SLOWDOWN_NOTE = (
    "above the limit S3 answers 503 SlowDown until it splits the prefix; the SDK's standard retry mode "
    "(make_s3_client: up to 8 attempts) retries them with backoff, so the phase slows rather than fails"
)


def _top(prefix: str) -> str:
    return prefix.split("/", 1)[0] + "/"


# Where each request lands. The hashes in these keys are uniform hex, so S3
# can split each prefix by the next hex digits; a single key cannot be split.
LOCKS = _top(layout.LOCKS_PREFIX)
DONE = _top(layout.DONE_PREFIX)
FAILED = _top(layout.FAILED_PREFIX)
SEGMENTS = layout.INDEX_SEGMENTS_PREFIX
CATALOG = layout.INDEX_CATALOG_KEY
LEGACY = layout.LEGACY_INDEX_KEY
SINGLE_KEYS = (CATALOG, LEGACY)


@dataclass(frozen=True)
class Latency:
    request: float  # a small S3 request (a lock, a flag, a HEAD), seconds
    list_page: float  # a full LIST page of 1,000 keys
    status_get: float  # a lock read by status
    source: str

    def listing(self, keys: float) -> float:
        """One LIST page holding ``keys`` keys: a small request, plus a share of a full page's extra time."""
        return self.request + min(1.0, keys / LIST_PAGE_KEYS) * max(0.0, self.list_page - self.request)


def latency_from_args(s3_latency_ms: float, list_page_ms: float, status_file: str | None) -> Latency:
    request = s3_latency_ms / 1000
    if status_file is None:
        source = f"--s3-latency-ms {s3_latency_ms:g} and --list-page-ms {list_page_ms:g} (assumed, not measured on AWS)"
        return Latency(request, list_page_ms / 1000, request, source)
    doc = json.loads(Path(status_file).read_text())
    try:
        measured = doc["latency"]
        list_page, get = float(measured["list_page_seconds"]), float(measured["get_seconds"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SystemExit(f"{status_file}: not a status_scale.py result (no latency.list_page_seconds / get_seconds): {exc}") from None
    source = (
        f"--s3-latency-ms {s3_latency_ms:g}; LIST page and status's lock GET from {status_file}: status_scale.py, "
        f"{doc.get('date', '?')}, {doc.get('endpoint', '?')}"
    )
    return Latency(request, list_page, get, source)


# --- tallies: requests by (operation, prefix) ----------------------------------------------------------


def add_to(tally: dict, op: str, where: str, n: float) -> None:
    if n:
        tally[(op, where)] = tally.get((op, where), 0.0) + n


def scaled(tally: dict, factor: float) -> dict:
    return {k: n * factor for k, n in tally.items()}


def merged(*tallies: dict) -> dict:
    merged: dict = {}
    for tally in tallies:
        for (op, where), n in tally.items():
            add_to(merged, op, where, n)
    return merged


def by_operation(tally: dict) -> dict[str, float]:
    ops: dict[str, float] = {}
    for (op, _), n in tally.items():
        ops[op] = ops.get(op, 0.0) + n
    return {op: round(n, 3) for op, n in sorted(ops.items())}


def phase(wall_seconds: float, tally: dict, rate_seconds: float, **extra) -> dict:
    """A phase's requests, and their rate on each prefix and class against S3's per-prefix limit."""
    by_prefix: dict[str, dict[str, float]] = {}
    rates: dict[str, dict[str, float]] = {}
    for (op, where), n in tally.items():
        rate = n / rate_seconds if rate_seconds > 0 else 0.0
        by_prefix.setdefault(where, {}).setdefault(RATE_CLASS[op], 0.0)
        by_prefix[where][RATE_CLASS[op]] += rate
        rates.setdefault(where, {})[op] = round(rate, 2)
    hottest = None
    for where, classes in by_prefix.items():
        for cls, rate in classes.items():
            if hottest is None or rate / RATE_LIMITS[cls] > hottest["rate_per_second"] / hottest["limit"]:
                hottest = {"prefix": where, "class": cls, "rate_per_second": rate, "limit": RATE_LIMITS[cls]}
    bucket = {cls: sum(c.get(cls, 0.0) for c in by_prefix.values()) for cls in RATE_LIMITS}
    if hottest is not None:
        hottest["partitions_needed"] = max(1, math.ceil(hottest["rate_per_second"] / hottest["limit"]))
        hottest["single_key"] = hottest["prefix"] in SINGLE_KEYS
        hottest["rate_per_second"] = round(hottest["rate_per_second"], 2)
    return {
        "wall_seconds": round(wall_seconds, 3),
        "requests": by_operation(tally),
        "requests_total": round(sum(tally.values()), 1),
        "rates_per_second": {where: dict(sorted(ops.items())) for where, ops in sorted(rates.items())},
        "rates_over_seconds": round(rate_seconds, 3),
        "hottest": hottest,
        "exceeds_limit": bool(hottest and hottest["rate_per_second"] > hottest["limit"]),
        # If S3 kept the whole bucket in one partition (a fresh bucket may): every prefix's rates together.
        "bucket_partitions_needed": {cls: max(1, math.ceil(rate / RATE_LIMITS[cls])) for cls, rate in bucket.items()},
        **extra,
    }
