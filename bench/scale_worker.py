"""What one s3wq worker sends in bench/scale.py's model, read from the code: a group's requests, its start, its cycle, its collisions.

The calibration (``Calibration``) is what the model takes from a measured
run of workers; bench/scale_calibration.py builds one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cost import SAFETY_MARGIN_SECONDS, WORKER_TIMEOUT_SECONDS
from scale_s3 import CATALOG, DONE, FAILED, LEGACY, LOCKS, SEGMENTS, Latency, add_to, by_operation, merged

from s3wq.config import MIN_RUN_SECONDS
from s3wq.index import prefix_length
from s3wq.store.base import LIST_PAGE_KEYS
from s3wq.worker.walk import LISTING_GROUPS_PER_PAGE

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
USABLE_SECONDS = WORKER_TIMEOUT_SECONDS - SAFETY_MARGIN_SECONDS


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
    add_to(tally, "GetObject", SEGMENTS, 1)
    if seg.listed:
        add_to(tally, "ListObjectsV2", FAILED, 1)
        add_to(tally, "ListObjectsV2", DONE, seg.done_pages)
    return tally


def worker_start_requests(groups: int) -> dict[str, float]:
    """A worker's start-up requests in a workspace of ``groups`` groups, by operation (to check a calibration run)."""
    return by_operation(worker_start(segments_for(groups)))


def worker_start(seg: Segments) -> dict:
    """A worker invocation's start (Worker.run): segment_refs -- the catalog GET, a ranged GET of olmocr's
    index (a 404 in an s3wq-only workspace) -- then its first segment's load."""
    tally: dict = {}
    add_to(tally, "GetObject", CATALOG, 1)
    add_to(tally, "GetObject", LEGACY, 1)
    return merged(tally, segment_load(seg))


def worker_start_seconds(seg: Segments, lat: Latency) -> float:
    """Each of the start's requests waits for the one before it; then the first claim (not overlapped)."""
    listing = lat.listing(seg.groups_each) if seg.listed else 0.0
    lists = (1 + seg.done_pages) if seg.listed else 0
    return 3 * lat.request + lists * listing + CLAIM_ROUND_TRIPS * lat.request


def per_group(seg: Segments) -> dict:
    """An uncontended group's requests by operation and prefix; a segment not listed also HEADs the failed flag."""
    tally = {key: float(n) for key, n in UNCONTENDED_WHERE.items()}
    if not seg.listed:
        add_to(tally, "HeadObject", FAILED, 1)
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
        add_to(tally, op, COLLISION_WHERE.get(op, LOCKS), n * count)
    return tally
