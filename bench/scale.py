"""Scale: a request-level model of s3wq at 10M paths / 1M groups / 1,000 workers, calibrated from measured runs.

For each phase -- populate, worker start, steady-state drain, ``status``,
and the drain loop (the state machine's rounds) -- the model counts the S3
requests the code sends (read from the code, not guessed: see each function's
docstring), and from them the requests per second on each key prefix against
S3's per-prefix limits, the wall time and the cost. One size is modelled per
``--sizes`` entry (paths:workers); by default 10,000,000:1,000 and, to show
how it scales, 1,000,000:100 (100,000 groups). Each size also gets a sweep of
the processing time per group (``--sweep``).

What is calibrated, and from where:

* requests a collision costs, collisions per worker, and the worker's client
  CPU per group: a contention.py JSON (``--contention FILE``; the ``s3wq`` queue
  on the ``latency`` endpoint at the largest W), or built-in defaults equal to
  the values measured on this project's machine (say so in
  ``calibration.source``);
* populate's CPU, compressed bytes and memory per path: timed here, in
  process, on ``--calibrate-paths`` synthetic paths (make_groups, encode_groups
  and the sorting and splitting around them, as ``WorkIndex.populate`` does),
  and scaled linearly;
* ``status``'s LIST-page and GET latency: a status_scale.py JSON
  (``--status FILE``), or ``--list-page-ms`` and ``--s3-latency-ms``.

Prices, Step Functions transitions and the stack's Lambda settings come from
cost.py. Nothing here talks to S3.

    .venv/bin/python bench/scale.py
    .venv/bin/python bench/scale.py --contention contention.json --status status_scale.json
    .venv/bin/python bench/scale.py --sizes 10000000:1000 --group-seconds 10 --sweep 1,10,60
    .venv/bin/python bench/scale.py --sizes 20000:10 --calibrate-paths 5000     # seconds, for a smoke test
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from common import emit, machine, peak_rss_mb
from cost import (
    DEFAULT_S3_LATENCY_MS,
    MAX_ROUNDS,
    PRICES,
    PRICES_AS_OF,
    SAFETY_MARGIN_SECONDS,
    SFN_PER_EXECUTION,
    SFN_PER_INVOCATION,
    SFN_PER_ROUND,
    STATUS_MEMORY_MB,
    WORKER_MEMORY_MB,
    WORKER_TIMEOUT_SECONDS,
    s3_dollars,
)

from s3wq.config import MIN_RUN_SECONDS
from s3wq.index import PARALLEL_SEGMENT_WRITES, encode_groups, make_groups, prefix_length
from s3wq.ops.status import partition_digits
from s3wq.store import MAX_PARALLEL_REQUESTS, SMALL_BODY_BYTES, layout
from s3wq.store.base import LIST_PAGE_KEYS
from s3wq.worker.walk import LISTING_GROUPS_PER_PAGE

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

# --- the protocol's counts (read from the code) ------------------------------------------------------------

# An uncontended group (claims.ClaimProtocol): the lock created with
# If-None-Match (claim), the done flag checked (is_done), the done flag
# created (mark_done), the lock deleted with If-Match (release).
UNCONTENDED_WHERE = {("PutObject", LOCKS): 1, ("HeadObject", DONE): 1, ("PutObject", DONE): 1, ("DeleteObject", LOCKS): 1}
UNCONTENDED = {op: sum(n for (o, _), n in UNCONTENDED_WHERE.items() if o == op) for op, _ in UNCONTENDED_WHERE}
# A collision's extra requests land on the lock (PUT, GET, DELETE) or on the
# done flags (the HEAD of a group a peer finished, and the LIST that refreshes
# the segment's listing after it; Claimer.next in s3wq.worker.claiming).
COLLISION_WHERE = {"PutObject": LOCKS, "GetObject": LOCKS, "DeleteObject": LOCKS, "HeadObject": DONE, "ListObjectsV2": DONE}
# Round trips a claim waits for: the lock PUT, then the done-flag HEAD.
CLAIM_ROUND_TRIPS = 2
# Lambda: "for each function, your concurrency scaling rate is 1,000 execution
# environment instances every 10 seconds" (AWS Lambda Developer Guide, Lambda
# scaling behavior).
LAMBDA_SCALING_ENVIRONMENTS, LAMBDA_SCALING_SECONDS = 1000, 10.0
# However few workers, a Map and its cold starts spread their starts over about this long.
MIN_START_WINDOW_SECONDS = 1.0
# The stack's populate and status functions (infra/settings.py, infra/functions.py).
POPULATE_MEMORY_MB = 3008
POPULATE_TIMEOUT_SECONDS = WORKER_TIMEOUT_SECONDS
STATUS_TIMEOUT_SECONDS = 300
# WorkIndex.populate encodes its segments on one thread and PUTs them side by side.
POPULATE_SEGMENT_WRITES_IN_FLIGHT = PARALLEL_SEGMENT_WRITES
# A status call during a drain finds about two unflagged locks a worker: the
# group it runs and the one it claimed ahead (Worker._attempt).
LOCKS_PER_LIVE_WORKER = 2
DEFAULT_LIST_PAGE_MS = 100.0
DEFAULT_SIZES = "10000000:1000,1000000:100"
DEFAULT_SWEEP = "0.1,1,10,60"
DEFAULT_CALIBRATE_PATHS = 200_000
MILLION = 1_000_000
USABLE_SECONDS = WORKER_TIMEOUT_SECONDS - SAFETY_MARGIN_SECONDS


# --- calibration -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    source: str
    # Collisions (a lock held by a live peer, or won on a group a peer had
    # finished) per worker, at this many groups per worker.
    collisions_per_worker: float
    groups_per_worker: float
    requests_per_collision: dict
    client_cpu_seconds_per_group: float
    # Checks against the measured one-worker run, where there is one.
    measured_seconds_per_group_one_worker: float | None = None
    measured_marginal_requests_per_group: float | None = None
    measured_start_up_requests: float | None = None
    measured_groups_one_worker: int | None = None


# contention.py on this project's machine, 2026-11-30, commit 5824687: the
# s3wq queue on the latency endpoint, no processing time. W=8, 320 groups:
# 9 groups found finished after their lock was won, 0 held locks, and 1 PUT,
# HEAD, DELETE and LIST more than the uncontended 4 per group and the 5
# start-up requests per worker, for each; W=1, 40 groups: 3.221 s,
# 13.7 ms client CPU per group, 4.0 marginal requests per group, 5.0 start-up.
BUILT_IN = Calibration(
    source="built-in defaults: contention.py, 2026-11-30, commit 5824687, latency endpoint, W=8 and W=1, no processing time",
    collisions_per_worker=9 / 8,
    groups_per_worker=320 / 8,
    requests_per_collision={"DeleteObject": 1.0, "HeadObject": 1.0, "ListObjectsV2": 1.0, "PutObject": 1.0},
    client_cpu_seconds_per_group=0.0137,
    measured_seconds_per_group_one_worker=3.221 / 40,
    measured_marginal_requests_per_group=4.0,
    measured_start_up_requests=5.0,
    measured_groups_one_worker=40,
)


def calibration_from_contention(doc: dict, path: str) -> Calibration:
    """Collisions and client CPU from contention.py's ``s3wq`` runs on the latency endpoint (largest W; W=1 for the checks)."""
    rows = [r for r in doc.get("runs", []) if r.get("endpoint") == "latency" and "s3wq" in r]
    if not rows:
        raise SystemExit(f"{path}: no s3wq run on the latency endpoint")
    quickest = min(r["work_ms"] for r in rows)
    rows = [r for r in rows if r["work_ms"] == quickest]
    widest = max(rows, key=lambda r: r["workers"])
    one = next((r for r in rows if r["workers"] == 1), None)
    run, workers, groups = widest["s3wq"], widest["workers"], widest["s3wq"]["groups"]
    measured = {op: round(n * groups) for op, n in run["requests_per_group_by_operation"].items()}
    start_up = worker_start_requests(groups)
    extra = {}
    for op, n in measured.items():
        expected = UNCONTENDED.get(op, 0) * groups + start_up.get(op, 0) * workers
        extra[op] = max(0, n - expected)
    found = run.get("already_finished", 0) + run.get("conflicts", 0)
    per_collision = {op: round(n / found, 3) for op, n in extra.items() if n} if found else {}
    cpu_run = one["s3wq"] if one else run
    return Calibration(
        source=f"{path}: contention.py, {doc.get('date', '?')}, commit {doc.get('commit', '?')}, latency endpoint, W={workers}"
        + (" and W=1" if one else "")
        + f", work {quickest:g} ms",
        collisions_per_worker=found / workers,
        groups_per_worker=groups / workers,
        requests_per_collision=per_collision,
        client_cpu_seconds_per_group=cpu_run["client_cpu_ms_per_group"] / 1000,
        measured_seconds_per_group_one_worker=one["s3wq"]["wall_seconds"] / one["s3wq"]["groups"] if one else None,
        measured_marginal_requests_per_group=one["s3wq"].get("marginal_requests_per_group") if one else None,
        measured_start_up_requests=one["s3wq"].get("start_up_requests") if one else None,
        measured_groups_one_worker=one["s3wq"]["groups"] if one else None,
    )


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


def synthetic_paths(count: int) -> list[str]:
    return [f"s3://bench-inputs/pdfs/batch-{n // 1000:05d}/doc-{n:08d}.pdf" for n in range(count)]


def calibrate_populate(paths_count: int, group_size: int) -> dict:
    """CPU, compressed bytes and memory per path of populate's in-process work, timed on synthetic paths.

    The steps WorkIndex.populate takes for a fresh workspace: dedupe and sort
    the paths, keep those not indexed, make_groups, sort the groups by hash,
    split them by hash prefix (prefix_length), encode_groups each and take its
    SHA-1 (its key). Run before anything else in this process, so that the
    peak RSS growth is this work's (the paths included, as populate holds them).
    """
    rss_before = peak_rss_mb()
    paths = synthetic_paths(paths_count)
    began = time.process_time()
    unique = set(paths)
    wanted = sorted(unique)
    indexed: set[str] = set()  # a fresh workspace
    fresh = [p for p in wanted if p not in indexed]
    groups = make_groups(fresh, group_size)
    digits = prefix_length(len(groups))
    by_prefix: dict[str, list] = {}
    for group in sorted(groups, key=lambda g: g.hash):
        by_prefix.setdefault(group.hash[:digits], []).append(group)
    compressed = 0
    for _, members in sorted(by_prefix.items()):
        body = encode_groups(members)
        hashlib.sha1(body).hexdigest()
        compressed += len(body)
    cpu = time.process_time() - began
    rss_growth = round(max(0.0, peak_rss_mb() - rss_before), 1)
    return {
        "paths": paths_count,
        "path_chars": round(sum(map(len, paths)) / len(paths), 1),
        "group_size": group_size,
        "cpu_seconds": round(cpu, 3),
        "cpu_us_per_path": round(1e6 * cpu / paths_count, 3),
        "compressed_bytes_per_path": round(compressed / paths_count, 2),
        "peak_rss_growth_mb": rss_growth,
        "memory_bytes_per_path": round(rss_growth * 2**20 / paths_count, 1),
    }


# --- the model ---------------------------------------------------------------------------------------------


def _add(tally: dict, op: str, where: str, n: float) -> None:
    if n:
        tally[(op, where)] = tally.get((op, where), 0.0) + n


def _scaled(tally: dict, factor: float) -> dict:
    return {k: n * factor for k, n in tally.items()}


def _merge(*tallies: dict) -> dict:
    merged: dict = {}
    for tally in tallies:
        for (op, where), n in tally.items():
            _add(merged, op, where, n)
    return merged


def by_operation(tally: dict) -> dict[str, float]:
    ops: dict[str, float] = {}
    for (op, _), n in tally.items():
        ops[op] = ops.get(op, 0.0) + n
    return {op: round(n, 3) for op, n in sorted(ops.items())}


@dataclass(frozen=True)
class Segments:
    """The index one populate of ``groups`` groups writes, as a worker sees it."""

    digits: int
    count: int
    groups_each: float
    listed: bool  # SegmentLoader.load lists the prefix's flags instead of checking each group
    done_pages: int  # LIST pages of one prefix's done flags once all are done


def segments_for(groups: int) -> Segments:
    """prefix_length's digits; the prefixes a uniform hash fills; SegmentLoader.load's rule for listing them."""
    digits = prefix_length(groups)
    prefixes = 16**digits
    # Expected non-empty prefixes of ``groups`` uniform hashes.
    count = max(1, round(prefixes * (1 - math.exp(-groups / prefixes)))) if digits else 1
    groups_each = groups / count
    flags_under_prefix = groups / prefixes
    listed = flags_under_prefix / LIST_PAGE_KEYS <= max(1.0, groups_each / LISTING_GROUPS_PER_PAGE)
    return Segments(digits, count, groups_each, listed, max(1, math.ceil(flags_under_prefix / LIST_PAGE_KEYS)))


def segment_load(seg: Segments) -> dict:
    """Loading one segment (SegmentLoader.load): its GET, then (listed) one LIST of failed flags and the done flags' pages."""
    tally: dict = {}
    _add(tally, "GetObject", SEGMENTS, 1)
    if seg.listed:
        _add(tally, "ListObjectsV2", FAILED, 1)
        _add(tally, "ListObjectsV2", DONE, seg.done_pages)
    return tally


def worker_start_requests(groups: int) -> dict[str, float]:
    """A worker's start-up requests in a workspace of ``groups`` groups, by operation (to check a calibration run)."""
    return by_operation(worker_start(segments_for(groups)))


def worker_start(seg: Segments) -> dict:
    """A worker invocation's start (Worker.run): segment_refs -- the catalog GET, a ranged GET of olmocr's
    index (a 404 in an s3wq-only workspace) -- then its first segment's load."""
    tally: dict = {}
    _add(tally, "GetObject", CATALOG, 1)
    _add(tally, "GetObject", LEGACY, 1)
    return _merge(tally, segment_load(seg))


def worker_start_seconds(seg: Segments, lat: Latency) -> float:
    """Each of the start's requests waits for the one before it; then the first claim (not overlapped)."""
    listing = lat.listing(seg.groups_each) if seg.listed else 0.0
    lists = (1 + seg.done_pages) if seg.listed else 0
    return 3 * lat.request + lists * listing + CLAIM_ROUND_TRIPS * lat.request


def per_group(seg: Segments) -> dict:
    """An uncontended group's requests by operation and prefix; a segment not listed also HEADs the failed flag."""
    tally = {key: float(n) for key, n in UNCONTENDED_WHERE.items()}
    if not seg.listed:
        _add(tally, "HeadObject", FAILED, 1)
    return tally


def claim_round_trips(seg: Segments) -> float:
    return CLAIM_ROUND_TRIPS + (0 if seg.listed else 1)


def cycle_seconds(group_seconds: float, seg: Segments, lat: Latency, cal: Calibration) -> float:
    """One group's turn on a pipelined worker.

    While the processor runs, helper threads claim the next group (lock PUT,
    done-flag HEAD, and now and then a segment's load) and release the last
    one's lock; when it returns, the done flag is written, beside whatever is
    left of that claim (Worker._attempt, Finisher.complete). So a group costs
    max(processor + one round trip, the claim's round trips), plus the
    worker's own CPU for its requests.
    """
    load = lat.request + ((1 + seg.done_pages) * lat.listing(seg.groups_each) if seg.listed else 0.0)
    claim = claim_round_trips(seg) * lat.request + load / seg.groups_each
    return max(group_seconds + lat.request, claim) + cal.client_cpu_seconds_per_group


def groups_per_invocation(group_seconds: float, cycle: float, start_seconds: float) -> int:
    """Groups a worker finishes in one invocation: it starts (or claims ahead) a group only with the group's time left."""
    room = USABLE_SECONDS - start_seconds
    if room < max(group_seconds, MIN_RUN_SECONDS):
        return 0
    return int((room - group_seconds) // cycle) + 1


def collisions(groups_done: float, cal: Calibration) -> float:
    """Collisions of one worker that did ``groups_done`` groups: as calibrated, grown with the log of its groups.

    A worker that runs into a peer jumps into the largest stretch nobody has
    finished (s3wq.worker.walk.jump_into_largest_gap), so collisions grow with the log
    of the groups, not with the groups. An upper bound while each worker's
    share outlasts its invocation: workers then never meet.
    """
    if groups_done <= 0 or cal.groups_per_worker <= 0:
        return 0.0
    return cal.collisions_per_worker * math.log2(1 + groups_done) / math.log2(1 + cal.groups_per_worker)


def collision_tally(count: float, cal: Calibration) -> dict:
    tally: dict = {}
    for op, n in cal.requests_per_collision.items():
        _add(tally, op, COLLISION_WHERE.get(op, LOCKS), n * count)
    return tally


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


def model_populate(paths: int, groups: int, seg: Segments, lat: Latency, populate_cal: dict) -> dict:
    """One populate of ``paths`` fresh paths (WorkIndex.populate on an empty workspace).

    Reads: the catalog (a 404), olmocr's index (a ranged GET, a 404), no
    segment yet. Writes: every segment (create, If-None-Match),
    POPULATE_SEGMENT_WRITES_IN_FLIGHT at a time while the next ones are
    encoded, then the catalog (create). A segment body above SMALL_BODY_BYTES
    waits for S3's 100-continue first: one more round trip. Not counted: the
    input itself (one manifest GET; a glob source would list its objects,
    1,000 a page).
    """
    tally: dict = {}
    _add(tally, "GetObject", CATALOG, 1)
    _add(tally, "GetObject", LEGACY, 1)
    _add(tally, "PutObject", SEGMENTS, seg.count)
    _add(tally, "PutObject", CATALOG, 1)
    segment_bytes = populate_cal["compressed_bytes_per_path"] * paths / seg.count
    put_seconds = lat.request * (2 if segment_bytes > SMALL_BODY_BYTES else 1)
    writing = seg.count * put_seconds / POPULATE_SEGMENT_WRITES_IN_FLIGHT
    cpu = populate_cal["cpu_us_per_path"] * paths / 1e6
    wall = 3 * lat.request + max(cpu, writing)  # the two GETs first, the catalog's PUT last; encoding overlaps the writes
    memory_mb = populate_cal["memory_bytes_per_path"] * paths / 2**20
    return phase(
        wall,
        tally,
        writing,
        cpu_seconds=round(cpu, 1),
        segment_writes_seconds=round(writing, 1),
        segments=seg.count,
        segment_bytes=round(segment_bytes),
        memory_mb=round(memory_mb),
        memory_limit_mb=POPULATE_MEMORY_MB,
        fits_memory=memory_mb < POPULATE_MEMORY_MB,
        fits_timeout=wall < POPULATE_TIMEOUT_SECONDS,
    )


def start_window(workers: int) -> float:
    return max(MIN_START_WINDOW_SECONDS, LAMBDA_SCALING_SECONDS * workers / LAMBDA_SCALING_ENVIRONMENTS)


def model_worker_start(workers: int, seg: Segments, lat: Latency) -> dict:
    """N invocations start over Lambda's scaling window; each reads the index and makes its first claim."""
    tally = _scaled(_merge(worker_start(seg), per_group(seg)), workers)
    # The first claim's done flag and release come later, in the drain.
    tally.pop(("PutObject", DONE), None)
    tally.pop(("DeleteObject", LOCKS), None)
    window = start_window(workers)
    return phase(
        window + worker_start_seconds(seg, lat),
        tally,
        window,
        start_window_seconds=window,
        per_worker_seconds=round(worker_start_seconds(seg, lat), 3),
    )


def model_drain(groups: int, workers: int, group_seconds: float, seg: Segments, lat: Latency, cal: Calibration) -> dict:
    """The steady state: every worker turning groups over at its cycle."""
    cycle = cycle_seconds(group_seconds, seg, lat, cal)
    rate = workers / cycle
    per_invocation = groups_per_invocation(group_seconds, cycle, worker_start_seconds(seg, lat))
    share = min(per_invocation, math.ceil(groups / workers)) or 1
    one = _merge(
        per_group(seg),
        _scaled(segment_load(seg), 1 / seg.groups_each),
        collision_tally(collisions(share, cal) / share, cal),
    )
    seconds = groups / rate
    return phase(
        seconds,
        _scaled(one, groups),
        seconds,
        cycle_seconds=round(cycle, 4),
        coordination_seconds_per_group=round(cycle - group_seconds, 4),
        groups_per_second=round(rate, 2),
        requests_per_group=by_operation(one),
        uncontended_requests_per_group=by_operation(per_group(seg)),
        collisions_per_worker_invocation=round(collisions(share, cal), 2),
    )


def status_call(groups: int, live_locks: int, lat: Latency) -> tuple[dict, float, dict]:
    """One ``status`` (status.queue_status): requests, seconds, and how they split.

    The catalog GET and a ranged GET of olmocr's index (index_counts), one
    after the other; then, over MAX_PARALLEL_REQUESTS threads, every
    partition (16 ** partition_digits) lists its failed flags, its locks and
    its done flags, and each lock with neither flag is read. Counted at the
    most: every group done, few failed, ``live_locks`` unflagged locks.
    Seconds as status_scale.py models them: the busier of the threads' share
    of all requests and the longest partition's chain.
    """
    partitions = 16 ** partition_digits(groups)
    done_pages = max(1, math.ceil(groups / partitions / LIST_PAGE_KEYS))
    lock_pages = max(1, math.ceil(live_locks / partitions / LIST_PAGE_KEYS))
    tally: dict = {}
    _add(tally, "GetObject", CATALOG, 2)  # before the flags (the partitions) and after them (the counts)
    _add(tally, "GetObject", LEGACY, 1)
    _add(tally, "ListObjectsV2", FAILED, partitions)
    _add(tally, "ListObjectsV2", LOCKS, partitions * lock_pages)
    _add(tally, "ListObjectsV2", DONE, partitions * done_pages)
    _add(tally, "GetObject", LOCKS, live_locks)
    lists = partitions * (1 + lock_pages + done_pages)
    page = lat.listing(min(LIST_PAGE_KEYS, groups / partitions))
    busy = (lists * page + live_locks * lat.status_get) / MAX_PARALLEL_REQUESTS
    chain = (1 + lock_pages + done_pages) * page + (lat.status_get if live_locks else 0.0)
    scan = max(busy, chain)
    return tally, 3 * lat.request + scan, {"partitions": partitions, "list_pages": lists, "lock_reads": live_locks, "scan_seconds": scan}


def model_status(groups: int, workers: int, lat: Latency) -> dict:
    tally, seconds, detail = status_call(groups, LOCKS_PER_LIVE_WORKER * workers, lat)
    return phase(
        seconds,
        tally,
        detail["scan_seconds"],
        **{k: v for k, v in detail.items() if k != "scan_seconds"},
        threads=MAX_PARALLEL_REQUESTS,
        timeout_seconds=STATUS_TIMEOUT_SECONDS,
        fits_timeout=seconds < STATUS_TIMEOUT_SECONDS,
    )


def model_loop(groups: int, workers: int, group_seconds: float, seg: Segments, lat: Latency, cal: Calibration) -> tuple[dict, dict]:
    """The state machine's rounds (infra/orchestration.py): CountBefore, then NextRound -> RunWorkers (a Map of N
    worker invocations) -> CountAfter -> MoreRounds while groups remain and the round finished some, at most
    MAX_ROUNDS rounds an execution (then another execution is needed).

    Each invocation: its start, its groups at the cycle, a last release. Every
    round runs all N items; in the last round each worker has the groups left
    divided among them. Worker i enters the index at i/N each round and walks
    its own stretch; each segment it crosses, done or not, is loaded again.
    Returns the loop's figures and its requests (status calls included).
    """
    cycle = cycle_seconds(group_seconds, seg, lat, cal)
    start_seconds = worker_start_seconds(seg, lat)
    per_invocation = groups_per_invocation(group_seconds, cycle, start_seconds)
    if per_invocation == 0:
        return {"finishes": False, "why": f"a group of {group_seconds:g} s does not fit a worker's {USABLE_SECONDS} usable seconds"}, {}
    status_tally, status_seconds, _ = status_call(groups, LOCKS_PER_LIVE_WORKER * workers, lat)
    window = start_window(workers)
    share = groups / workers
    rounds = math.ceil(groups / (workers * per_invocation))
    executions = math.ceil(rounds / MAX_ROUNDS)
    status_calls = rounds + executions  # CountAfter per round, CountBefore per execution
    tally: dict = _scaled(status_tally, status_calls)
    worker_seconds = 0.0
    wall = executions * status_seconds
    left = groups
    round_walls = []
    for r in range(1, rounds + 1):
        each = min(per_invocation, math.ceil(left / workers))
        done_here = min(left, each * workers)
        left -= done_here
        walked = min(share, r * per_invocation)
        loads = max(1, math.ceil(walked / seg.groups_each))
        invocation = _merge(worker_start(seg), _scaled(segment_load(seg), loads - 1), collision_tally(collisions(each, cal), cal))
        tally = _merge(tally, _scaled(invocation, workers), _scaled(per_group(seg), done_here))
        billed = start_seconds + each * cycle + lat.request
        worker_seconds += billed * workers
        round_wall = window + billed + status_seconds
        round_walls.append(round(round_wall, 1))
        wall += round_wall
    invocations = rounds * workers
    return {
        "finishes": True,
        "wall_seconds": round(wall, 1),
        "rounds": rounds,
        "executions": executions,
        "needs_more_executions": executions > 1,
        "groups_per_invocation": per_invocation,
        "invocations": invocations,
        "status_calls": status_calls,
        "status_seconds_each": round(status_seconds, 2),
        "round_wall_seconds": round_walls if len(round_walls) <= 12 else [*round_walls[:6], "...", *round_walls[-3:]],
        # A round's cost beyond its groups: the Map's start window, a worker's start, its last release, CountAfter.
        "round_overhead_seconds": round(window + start_seconds + lat.request + status_seconds, 2),
        "transitions": SFN_PER_EXECUTION * executions + SFN_PER_ROUND * rounds + SFN_PER_INVOCATION * invocations,
        "worker_seconds": round(worker_seconds, 1),
    }, tally


def model_cost(groups: int, group_seconds: float, populate: dict, loop: dict) -> dict:
    """Dollars: the queue's (S3 requests, Step Functions, Lambda requests, coordination, status, populate) and the processing's."""
    s3_ops = dict(loop["requests"])
    for op, n in populate["requests"].items():
        s3_ops[op] = s3_ops.get(op, 0.0) + n
    gb_second = PRICES["lambda_arm64_per_gb_second"]
    processing_gb_s = groups * group_seconds * WORKER_MEMORY_MB / 1024
    worker_gb_s = loop["worker_seconds"] * WORKER_MEMORY_MB / 1024
    status_gb_s = loop["status_calls"] * loop["status_seconds_each"] * STATUS_MEMORY_MB / 1024
    populate_gb_s = populate["wall_seconds"] * POPULATE_MEMORY_MB / 1024
    queue = {
        "s3_requests": s3_dollars(s3_ops),
        "step_functions": loop["transitions"] * PRICES["step_functions_standard_per_1000_transitions"] / 1000,
        "lambda_requests": (loop["invocations"] + loop["status_calls"] + 1) * PRICES["lambda_per_million_requests"] / MILLION,
        "lambda_worker_coordination": max(0.0, worker_gb_s - processing_gb_s) * gb_second,
        "lambda_status": status_gb_s * gb_second,
        "lambda_populate": populate_gb_s * gb_second,
    }
    queue_total = sum(queue.values())
    processing = processing_gb_s * gb_second
    millions = groups / MILLION
    return {
        "queue_usd": {k: round(v, 4) for k, v in queue.items()},
        "queue_usd_total": round(queue_total, 2),
        "processing_usd": round(processing, 2),
        "total_usd": round(queue_total + processing, 2),
        "queue_usd_per_million_groups": round(queue_total / millions, 2),
        "processing_usd_per_million_groups": round(processing / millions, 2),
        "lambda_gb_seconds": {
            "workers_total": round(worker_gb_s),
            "workers_coordination": round(max(0.0, worker_gb_s - processing_gb_s)),
            "status": round(status_gb_s),
            "populate": round(populate_gb_s),
        },
        "s3_requests": {op: round(n) for op, n in sorted(s3_ops.items())},
    }


def model_size(paths: int, group_size: int, workers: int, group_seconds: float, lat: Latency, cal: Calibration, populate_cal: dict) -> dict:
    groups = math.ceil(paths / group_size)
    seg = segments_for(groups)
    populate = model_populate(paths, groups, seg, lat, populate_cal)
    loop, loop_requests = model_loop(groups, workers, group_seconds, seg, lat, cal)
    phases = {
        "populate": populate,
        "worker_start": model_worker_start(workers, seg, lat),
        "drain": model_drain(groups, workers, group_seconds, seg, lat, cal),
        "status": model_status(groups, workers, lat),
    }
    result = {
        "paths": paths,
        "groups": groups,
        "workers": workers,
        "group_seconds": group_seconds,
        "index": {
            "prefix_digits": seg.digits,
            "segments": seg.count,
            "groups_per_segment": round(seg.groups_each, 1),
            "flags_listed": seg.listed,
        },
        "phases": phases,
    }
    if loop["finishes"]:
        wall = loop.pop("wall_seconds")
        phases["drain_loop"] = phase(wall, loop_requests, wall, **loop)
        result["cost"] = model_cost(groups, group_seconds, populate, phases["drain_loop"])
        result["job_wall_hours"] = round((populate["wall_seconds"] + wall) / 3600, 2)
    else:
        phases["drain_loop"] = loop
    result["flags"] = flags(result)
    return result


def flags(size: dict) -> list[dict]:
    found = []
    for name, ph in size["phases"].items():
        hot = ph.get("hottest")
        if hot and hot["rate_per_second"] > hot["limit"]:
            found.append({
                "phase": name, "prefix": hot["prefix"], "class": hot["class"], "rate_per_second": hot["rate_per_second"],
                "limit": hot["limit"], "partitions_needed": hot["partitions_needed"],
                "note": ("one key: S3 cannot split it; " if hot["single_key"] else f"S3 must split {hot['prefix']} into {hot['partitions_needed']}; ") + SLOWDOWN_NOTE,
            })  # fmt: skip
        for limit in ("fits_timeout", "fits_memory"):
            if ph.get(limit) is False:
                found.append({"phase": name, "problem": limit.replace("fits_", "exceeds its function's ")})
        if ph.get("needs_more_executions"):
            found.append(
                {
                    "phase": name,
                    "problem": f"{ph['rounds']} rounds: the state machine stops after {MAX_ROUNDS}; {ph['executions']} executions needed",
                }
            )
        if ph.get("finishes") is False:
            found.append({"phase": name, "problem": ph["why"]})
    return found


def sweep(
    paths: int, group_size: int, workers: int, seconds_list: list[float], lat: Latency, cal: Calibration, populate_cal: dict
) -> list[dict]:
    rows = []
    for group_seconds in seconds_list:
        size = model_size(paths, group_size, workers, group_seconds, lat, cal, populate_cal)
        drain, loop = size["phases"]["drain"], size["phases"]["drain_loop"]
        rows.append({
            "group_seconds": group_seconds,
            "groups_per_second": drain["groups_per_second"],
            "hottest": drain["hottest"],
            "exceeds_limit": drain["exceeds_limit"],
            "rounds": loop.get("rounds"),
            "executions": loop.get("executions"),
            "loop_wall_seconds": loop["wall_seconds"] if loop.get("finishes") else None,
            "queue_usd_per_million_groups": size["cost"]["queue_usd_per_million_groups"] if "cost" in size else None,
            "processing_usd_per_million_groups": size["cost"]["processing_usd_per_million_groups"] if "cost" in size else None,
            # Only the drain's depend on the processing time.
            "flags": [f for f in size["flags"] if f["phase"] in ("drain", "drain_loop")],
        })  # fmt: skip
    return rows


def run(
    sizes: list[tuple[int, int]],
    group_size: int,
    group_seconds: float,
    seconds_list: list[float],
    lat: Latency,
    cal: Calibration,
    populate_cal: dict,
) -> dict:
    modelled = []
    for paths, workers in sizes:
        size = model_size(paths, group_size, workers, group_seconds, lat, cal, populate_cal)
        size["sweep"] = sweep(paths, group_size, workers, seconds_list, lat, cal, populate_cal)
        modelled.append(size)
    one = cal.measured_groups_one_worker
    check = None
    if one:
        seg = segments_for(one)
        check = {
            "what": "one worker, no processing time, at the calibration run's size (on this machine the local S3 server's CPU shares its cores)",
            "modelled_seconds_per_group": round(cycle_seconds(0.0, seg, lat, cal), 4),
            "measured_seconds_per_group": round(cal.measured_seconds_per_group_one_worker, 4)
            if cal.measured_seconds_per_group_one_worker
            else None,
            "modelled_marginal_requests_per_group": sum(UNCONTENDED.values()),
            "measured_marginal_requests_per_group": cal.measured_marginal_requests_per_group,
            "modelled_start_up_requests": sum(worker_start_requests(one).values()),
            "measured_start_up_requests": cal.measured_start_up_requests,
        }
    return {
        "benchmark": "scale",
        **machine(),
        "prices_as_of": PRICES_AS_OF,
        "limits": {
            "per_partitioned_prefix": RATE_LIMITS,
            "source": "AWS, Best practices design patterns: optimizing Amazon S3 performance (S3 User Guide)",
            "list": "LIST is in neither documented list; counted with PUT/COPY/POST/DELETE (its price tier), the cautious reading",
            "partitions": "each of worker_locks/, done_flags/, failed_flags/, index/segments/ counted as one partition until S3 splits it "
            "(partitions needed = ceil(rate / limit)); bucket_partitions_needed: if the whole bucket were one",
        },
        "calibration": {
            **{k: v for k, v in asdict(cal).items() if not k.startswith("measured_")},
            "s3_latency": {
                "request_seconds": lat.request,
                "list_page_seconds": lat.list_page,
                "status_get_seconds": lat.status_get,
                "source": lat.source,
            },
            "populate": populate_cal,
            "check": check,
        },
        "assumptions": {
            "cycle": "max(processor + 1 round trip (done flag), claim round trips) + client CPU per group",
            "worker_usable_seconds": USABLE_SECONDS,
            "worker_memory_mb": WORKER_MEMORY_MB,
            "start_window": f"max({MIN_START_WINDOW_SECONDS:g} s, {LAMBDA_SCALING_SECONDS:g} s x workers / {LAMBDA_SCALING_ENVIRONMENTS}) "
            "(Lambda's scaling rate); cold-start init time not counted",
            "collisions": "as calibrated per worker, grown with log2(1 + groups a worker does) (an upper bound)",
            "status": f"every group done, {LOCKS_PER_LIVE_WORKER} unflagged locks a worker, {MAX_PARALLEL_REQUESTS} threads",
            "populate": f"one populate of every path, segments encoded on one core as timed here and written {POPULATE_SEGMENT_WRITES_IN_FLIGHT} at a time",
        },
        "sizes": modelled,
        "flags": [{"paths": s["paths"], "workers": s["workers"], "group_seconds": group_seconds, **f} for s in modelled for f in s["flags"]]
        + [
            {"paths": s["paths"], "workers": s["workers"], "group_seconds": row["group_seconds"], **f}
            for s in modelled
            for row in s["sweep"]
            if row["group_seconds"] != group_seconds
            for f in row["flags"]
        ],
    }


def table(result: dict) -> list[list]:
    rows = []
    for size in result["sizes"]:
        label = f"{size['groups']:,} groups / {size['workers']:,} W"
        for name, ph in size["phases"].items():
            hot = ph.get("hottest") or {}
            rows.append([
                label, name, ph.get("wall_seconds", ""), ph.get("requests_total", ""), hot.get("prefix", ""), hot.get("class", ""),
                hot.get("rate_per_second", ""), hot.get("partitions_needed", ""), "FLAG" if ph.get("exceeds_limit") else "",
            ])  # fmt: skip
        if "cost" in size:
            cost = size["cost"]
            rows.append(
                [label, "cost", "", "", f"queue ${cost['queue_usd_total']:,.2f}", f"processing ${cost['processing_usd']:,.2f}", "", "", ""]
            )
        for row in size["sweep"]:
            hot = row["hottest"]
            rows.append([
                label, f"drain @ {row['group_seconds']:g} s/group", row["loop_wall_seconds"], "",
                hot["prefix"], hot["class"], hot["rate_per_second"], hot["partitions_needed"], "FLAG" if row["exceeds_limit"] else "",
            ])  # fmt: skip
    return rows


def sizes_arg(text: str) -> list[tuple[int, int]]:
    """``"10000000:1000,1000000:100"`` -> [(10000000, 1000), (1000000, 100)], for argparse."""
    sizes = []
    for part in text.split(","):
        paths, _, workers = part.partition(":")
        sizes.append((int(paths), int(workers)))
    if not sizes or min(min(s) for s in sizes) < 1:
        raise ValueError(f"expected paths:workers pairs of positive integers, got {text!r}")
    return sizes


def seconds_arg(text: str) -> list[float]:
    values = [float(part) for part in text.split(",") if part.strip()]
    if not values or min(values) < 0:
        raise ValueError(f"expected seconds separated by commas, got {text!r}")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes", type=sizes_arg, default=DEFAULT_SIZES, help=f"paths:workers to model, the first the headline (default {DEFAULT_SIZES})"
    )
    parser.add_argument("--group-size", type=int, default=10, help="paths per group (default 10)")
    parser.add_argument("--group-seconds", type=float, default=2.0, help="processing time of one group (default 2)")
    parser.add_argument(
        "--sweep", type=seconds_arg, default=DEFAULT_SWEEP, help=f"processing times to sweep at each size (default {DEFAULT_SWEEP})"
    )
    parser.add_argument("--contention", metavar="FILE", help="a contention.py JSON; without it, built-in defaults measured the same way")
    parser.add_argument("--status", metavar="FILE", help="a status_scale.py JSON, for the LIST-page and GET latencies")
    parser.add_argument(
        "--s3-latency-ms", type=float, default=DEFAULT_S3_LATENCY_MS, help=f"a small S3 request (default {DEFAULT_S3_LATENCY_MS:g})"
    )
    parser.add_argument(
        "--list-page-ms",
        type=float,
        default=DEFAULT_LIST_PAGE_MS,
        help=f"a full LIST page of 1,000 keys (default {DEFAULT_LIST_PAGE_MS:g})",
    )
    parser.add_argument(
        "--calibrate-paths",
        type=int,
        default=DEFAULT_CALIBRATE_PATHS,
        help=f"synthetic paths populate's CPU is timed on (default {DEFAULT_CALIBRATE_PATHS:,})",
    )
    args = parser.parse_args()
    if args.group_size < 1 or args.group_seconds < 0 or args.s3_latency_ms <= 0 or args.list_page_ms <= 0 or args.calibrate_paths < 100:
        parser.error("group size at least 1, latencies positive, group seconds not negative, --calibrate-paths at least 100")
    populate_cal = calibrate_populate(args.calibrate_paths, args.group_size)
    cal = (
        BUILT_IN if args.contention is None else calibration_from_contention(json.loads(Path(args.contention).read_text()), args.contention)
    )
    lat = latency_from_args(args.s3_latency_ms, args.list_page_ms, args.status)
    result = run(args.sizes, args.group_size, args.group_seconds, args.sweep, lat, cal, populate_cal)
    emit(result, table(result), ["size", "phase", "wall s", "S3 requests", "hottest prefix", "class", "req/s", "partitions", ""])


if __name__ == "__main__":
    main()
