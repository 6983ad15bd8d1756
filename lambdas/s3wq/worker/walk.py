"""The walk over the index: where a worker starts, the segments it loads, and where it jumps after running into a peer.

Workers spread out instead of all starting at the top: worker ``i`` of ``n``
starts ``i/n`` of the way through the index (a worker that does not know its
index picks a place from its id) and walks on from there, wrapping around;
after running into a peer it jumps into the largest stretch nobody has
finished. Each then mostly finds groups nobody else has touched.
"""

from __future__ import annotations

import hashlib
import random
from collections import deque
from dataclasses import dataclass, field

from s3wq.index import SegmentRef, WorkIndex
from s3wq.model import Group
from s3wq.store import Backend, layout
from s3wq.store.base import LIST_PAGE_KEYS
from s3wq.worker.report import WorkerReport

# A segment's done flags are listed (instead of checked one by one) when the
# listing is expected to cost at most one request per this many groups.
LISTING_GROUPS_PER_PAGE = 50


def start_position(worker_id: str) -> float:
    """A stable, uniformly spread place in [0, 1) for a worker that does not know its index."""
    digest = hashlib.sha1(worker_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass
class SegmentView:
    """A loaded segment and what this worker knows of its finished groups."""

    ref: SegmentRef
    groups: list[Group]
    listed: bool
    finished: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)  # listed once, at load


@dataclass
class Walk:
    """Where a worker is in its walk over the index."""

    refs: list[SegmentRef]
    total_groups: int
    spot: float  # where in [0, len(refs)) this worker entered
    next_segment: int = 0
    view: SegmentView | None = None
    # The groups still to come on the walk, the next first.
    upcoming: deque = field(default_factory=deque)
    # Groups to come back to after the walk: held by others, or handed back by this worker unfinished.
    waiting: dict[str, Group] = field(default_factory=dict)
    # Groups left because this worker had too little time for them (its time only shrinks).
    short: dict[str, Group] = field(default_factory=dict)

    @property
    def first(self) -> int:
        return int(self.spot)


def jump_into_largest_gap(upcoming: deque, finished: set[str], rng: random.Random) -> None:
    """Rotate ``upcoming`` to a point near the middle of its longest run of unfinished groups.

    Peers that collide split what is left between them, as work stealing
    halves the largest interval: collisions grow with the log of the
    groups, not with the groups. The point is drawn from the middle third
    so that two workers colliding at once do not land on the same group.
    """
    best_start, best_length, start, length = 0, 0, 0, 0
    for i, group in enumerate(upcoming):
        if group.hash in finished:
            length = 0
            continue
        if length == 0:
            start = i
        length += 1
        if length > best_length:
            best_start, best_length = start, length
    if best_length:
        upcoming.rotate(-(best_start + int(best_length * rng.uniform(1 / 3, 2 / 3))))


class SegmentLoader:
    """Loads the walk's segments, with what a listing of their flags tells of their finished groups."""

    def __init__(self, backend: Backend, index: WorkIndex, report: WorkerReport):
        self.backend = backend
        self.index = index
        self.report = report

    def load(self, ref: SegmentRef, total_groups: int, previous: SegmentView | None = None) -> SegmentView:
        groups = self.index.load_ref(ref)
        # List a prefix's flags only when that costs at most one request per
        # LISTING_GROUPS_PER_PAGE groups; a small segment of a big workspace
        # (a short prefix) is checked group by group instead.
        flags_under_prefix = total_groups / 16 ** len(ref.prefix)
        listed = ref.groups is None or flags_under_prefix / LIST_PAGE_KEYS <= max(1.0, ref.groups / LISTING_GROUPS_PER_PAGE)
        view = SegmentView(ref, groups, listed)
        if listed and previous is not None and previous.listed and previous.ref.prefix == ref.prefix:
            # The same LIST again: the parts of olmocr's index all have the
            # empty prefix, and listing the whole workspace once per part
            # would cost a LIST of every flag per part. The listing carried
            # over is refreshed as any is, when a claim finds it out of date.
            view.failed, view.finished = previous.failed, previous.finished
        elif listed:
            view.failed = self._listed_hashes(layout.FAILED_PREFIX, view.ref.prefix, layout.FAILED_SUFFIX)
            self.list_finished(view)
        return view

    def list_finished(self, view: SegmentView) -> None:
        """Re-read which groups of the segment are done (one LIST).

        Failed flags are listed once, when the segment is loaded: a group that
        fails later keeps its lock marked failed, which turns a claim away for
        the price of the claim, while a second LIST on every re-listing would
        cost every worker a request for groups that are rarely there.
        """
        with self.report.tally() as report:
            report.listings += 1
        finished = self._listed_hashes(layout.DONE_PREFIX, view.ref.prefix, layout.DONE_SUFFIX)
        finished |= view.failed  # in place: a listing of the whole workspace can be large
        view.finished = finished

    def _listed_hashes(self, prefix: str, hash_prefix: str, suffix: str) -> set[str]:
        found = set()
        for key in self.backend.list_keys(prefix + hash_prefix):
            hash_ = layout.hash_from_key(key, prefix, suffix)
            if hash_ is not None:
                found.add(hash_)
        return found
