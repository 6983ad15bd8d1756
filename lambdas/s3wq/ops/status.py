"""Counting a workspace: done, failed, locked, pending, and how long the live locks have left.

A count reads no index segment: the catalog records each segment's groups
and paths. It lists the flags by hash prefix, many prefixes at once, so its
time grows with the number of LIST pages divided by the requests in flight,
and its memory with the partitions in flight, not with the workspace.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.errors import BadInput
from s3wq.index import WorkIndex
from s3wq.model import Outcome
from s3wq.protocol.locks import LockReading, read_lock
from s3wq.store import MAX_PARALLEL_REQUESTS, Backend, layout
from s3wq.store.base import LIST_PAGE_KEYS

# At most 16**3 = 4,096 partitions. Each costs three LISTs even when empty,
# so past that the requests cost more than the memory they save.
MAX_PARTITION_DIGITS = 3
# A partition's failed flags and unflagged locks are held while it is listed
# (its done flags are only counted); at most this many groups a partition
# bounds that memory in a workspace whose groups have all failed.
MAX_PARTITION_GROUPS = 16_384


def iter_hashes(backend: Backend, prefix: str, suffix: str, partition: str = "") -> Iterator[str]:
    """The group hashes named by the keys under ``prefix + partition``, page by page.

    Keys that do not name a hash (anything but 40 lowercase hex characters
    between ``prefix`` and ``suffix``) are foreign objects and are skipped.
    """
    return layout.hashes_in_keys(backend.list_keys(prefix + layout.check_hex_prefix(partition)), prefix, suffix)


def listed_hashes(backend: Backend, prefix: str, suffix: str) -> set[str]:
    return set(iter_hashes(backend, prefix, suffix))


# --- the index's size ----------------------------------------------------------------------------------


def index_counts(backend: Backend) -> tuple[int, int]:
    """Groups and paths in the index: the catalog's counts, plus olmocr's index counted as it is read.

    No segment is read. The sum counts no group twice: a populate adds only
    paths that neither the catalog's segments nor olmocr's index hold (it
    reads both first, and refuses a group whose hash either holds), so the
    segments are disjoint from one another and from olmocr's index. olmocr's
    own populate reads only its own index: paths it adds after s3wq indexed
    them are stored, and counted, twice.
    """
    index = WorkIndex(backend)
    catalog, _ = index.read_catalog()
    # olmocr records no counts: its index is streamed, and counted as it is read.
    legacy_groups, legacy_paths = index.legacy_counts()
    return catalog.groups + legacy_groups, catalog.paths + legacy_paths


def catalog_groups(backend: Backend) -> int:
    """Groups in the catalog alone (olmocr's index is not decoded): enough to choose how to partition a listing."""
    return WorkIndex(backend).read_catalog()[0].groups


# --- listing the flags by hash prefix --------------------------------------------------------------------


def partition_digits(groups: int) -> int:
    """Hex digits of the hash prefixes that a workspace of ``groups`` groups is listed by.

    A partition lists its failed flags, its locks and its done flags one
    after another: at least three requests, plus one per further page of
    done flags (at most one flag per group); MAX_PARALLEL_REQUESTS partitions
    are listed at once, so a count takes ``ceil(partitions / parallel) x
    requests per partition`` round trips. Among the prefix lengths whose
    partitions hold at most MAX_PARTITION_GROUPS groups, the shortest is
    taken unless a longer one saves more than one round trip (one is not
    worth sixteen times the requests). 1,000 groups: one partition; 100,000:
    16; 1,000,000: 256; 10,000,000: 4,096.
    """

    def round_trips(digits: int) -> int:
        partitions = 16**digits
        done_pages = max(1, math.ceil(groups / partitions / LIST_PAGE_KEYS))
        return math.ceil(partitions / MAX_PARALLEL_REQUESTS) * (done_pages + 2)

    allowed = [d for d in range(MAX_PARTITION_DIGITS + 1) if groups / 16**d <= MAX_PARTITION_GROUPS] or [MAX_PARTITION_DIGITS]
    best = allowed[0]
    for digits in allowed[1:]:
        if round_trips(digits) < round_trips(best) - 1:
            best = digits
    return best


def flag_partitions(backend: Backend, groups: int, digits: int | None = None) -> list[str]:
    """The hash prefixes to list the flags of ``groups`` groups by, in ascending order.

    One prefix, the empty one, where a narrow listing costs as much as a wide
    one (a local directory); ``digits`` overrides the choice.
    """
    if digits is None:
        digits = partition_digits(groups) if getattr(backend, "narrow_listing_is_cheap", True) else 0
    if not 0 <= digits <= MAX_PARTITION_DIGITS:
        raise BadInput(f"partition digits must be 0 to {MAX_PARTITION_DIGITS}, got {digits}")
    return [format(n, f"0{digits}x") for n in range(16**digits)] if digits else [""]


@dataclass(frozen=True)
class PartitionFlags:
    """One hash prefix's flags: how many groups are done, and which have a failed flag and no done flag."""

    prefix: str
    done: int
    failed: frozenset[str]


@dataclass(frozen=True)
class UnflaggedLock:
    """The lock of a group that had neither a done nor a failed flag when its partition was listed."""

    hash: str
    state: LockReading


@dataclass(frozen=True)
class _Listing:
    flags: PartitionFlags
    unflagged_locks: list[str]


def _list_partition(backend: Backend, partition: str) -> _Listing:
    failed = set(iter_hashes(backend, layout.FAILED_PREFIX, layout.FAILED_SUFFIX, partition))
    locks = set(iter_hashes(backend, layout.LOCKS_PREFIX, layout.LOCK_SUFFIX, partition)) - failed
    # Done flags last, and only counted. Done is the last state a group
    # reaches (its flag is created before its lock is deleted), so a group
    # that finishes while the partition is listed is found done rather than
    # neither done nor locked; and the longest listing needs no set.
    done = 0
    for hash_ in iter_hashes(backend, layout.DONE_PREFIX, layout.DONE_SUFFIX, partition):
        done += 1
        failed.discard(hash_)
        locks.discard(hash_)
    return _Listing(PartitionFlags(partition, done, frozenset(failed)), sorted(locks))


def _read_unflagged(backend: Backend, hash_: str, foreign_lock_timeout: float) -> UnflaggedLock | PartitionFlags | None:
    state = read_lock(backend, hash_, foreign_lock_timeout=foreign_lock_timeout)
    if state is not None and not state.finished:
        return UnflaggedLock(hash_, state)
    # The lock went between the listing and the read, or (on a store that
    # cannot delete on a condition) was rewritten as finished: most often its
    # group finished meanwhile (the done flag goes first), which is what the
    # drain loop must see. Otherwise a lock that went was handed back by
    # deletion, and its group is pending; so is one released as finished
    # with no done flag (a claim given back unrun by an earlier s3wq).
    if backend.exists(layout.done_key(hash_)):
        return PartitionFlags(hash_, 1, frozenset())
    return None if state is None else UnflaggedLock(hash_, state)


def scan_flags(
    backend: Backend, partitions: Iterable[str], *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS
) -> Iterator[PartitionFlags | UnflaggedLock]:
    """Every partition's flags, then the lock of each group it found with neither flag, as each arrives.

    The partitions are listed MAX_PARALLEL_REQUESTS at a time (a boto3 client
    is thread-safe), and a partition's unflagged locks are read as soon as it
    is listed, on the same threads: at any time there are about as many
    unflagged locks as there are workers. A lock deleted before it is read
    (its group finished meanwhile) is left out. Memory: the partitions being
    listed, and the unflagged locks waiting to be read. The first failing
    request's error is raised, and the requests not yet sent are dropped.
    """
    arrived: queue.SimpleQueue[Future] = queue.SimpleQueue()
    pool = ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-status")
    outstanding = 0

    def submit(task: Callable, *args: object) -> None:
        nonlocal outstanding
        pool.submit(task, *args).add_done_callback(arrived.put)
        outstanding += 1

    try:
        for partition in partitions:
            submit(_list_partition, backend, partition)
        while outstanding:
            result = arrived.get().result()
            outstanding -= 1
            if isinstance(result, _Listing):
                yield result.flags
                for hash_ in result.unflagged_locks:
                    submit(_read_unflagged, backend, hash_, foreign_lock_timeout)
            elif result is not None:
                yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# --- the count -----------------------------------------------------------------------------------------

# Where the state machine's status task puts the status Lambda's answer (its result path).
STATUS_RESULT_PATH = "$.status"


@dataclass(frozen=True, kw_only=True, eq=False)
class QueueStatus(Mapping[str, int]):
    """A workspace's counts, as :func:`queue_status` makes them; the status Lambda answers :meth:`as_document`.

    The field names are the document's keys, in its order, and the state
    machine reads them by :func:`status_path`. It reads as a mapping too
    (``status["done"]``, ``==`` a dict of the same keys), as the document.
    """

    groups: int
    paths: int
    done: int
    failed: int
    locked: int
    claimed_ahead: int
    pending: int
    remaining: int
    finished: int
    released: int
    wait_seconds: int
    # Added after the counts a deployed state machine has always read, in their order.
    unavailable: int

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def read(cls, document: Mapping[str, int]) -> QueueStatus:
        """The status a document of it holds (the status Lambda's answer, a line of ``status --watch --json``).

        ``claimed_ahead``, ``released``, ``unavailable`` and ``wait_seconds`` may be left out
        (taken as 0), and ``finished`` (done + failed), so that a display can be
        shown a document of the counts it shows; any other count is required.
        """
        if isinstance(document, QueueStatus):
            return document
        given = {name: document[name] for name in cls.names() if name in document}
        given.setdefault("finished", given["done"] + given["failed"])
        return cls(**{"claimed_ahead": 0, "released": 0, "unavailable": 0, "wait_seconds": 0, **given})

    def as_document(self) -> dict[str, int]:
        """The status Lambda's answer (JSON), and what ``status --json`` prints."""
        return asdict(self)

    def __getitem__(self, name: str) -> int:
        if name not in self.names():
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


def status_path(name: str) -> str:
    """The JSONPath at which the state machine finds the status field ``name``: ``status_path("remaining") == "$.status.remaining"``."""
    if name not in QueueStatus.names():
        raise KeyError(f"no status field {name!r} (QueueStatus has {', '.join(QueueStatus.names())})")
    return f"{STATUS_RESULT_PATH}.{name}"


@dataclass
class _FlagCounts:
    """What a scan of the flags found, before it is clamped to the index's counts."""

    done: int = 0
    failed: int = 0
    live: int = 0
    released: int = 0
    unavailable: int = 0
    longest_stale_in: float = 0.0
    # Live locks' owners, and the claims made ahead of one: about one each a worker.
    holders: dict[str, str] = field(default_factory=dict)
    ahead: list[tuple[str, str | None]] = field(default_factory=list)

    def add(self, item: PartitionFlags | UnflaggedLock) -> None:
        if isinstance(item, PartitionFlags):
            self.done += item.done
            self.failed += len(item.failed)
        elif item.state.failed:
            self.failed += 1
        elif item.state.live:
            self.live += 1
            self.longest_stale_in = max(self.longest_stale_in, item.state.stale_in)
            if item.state.body is not None:
                self.holders[item.hash] = item.state.body.owner
                if item.state.body.behind is not None:
                    self.ahead.append((item.state.body.behind, item.state.body.behind_owner))
        elif item.state.released:
            self.released += 1
            if item.state.body is not None and item.state.body.outcome == Outcome.UNAVAILABLE:
                self.unavailable += 1

    def claimed_ahead(self) -> int:
        """The live claims made ahead whose group in front is still held by the same claim: they have not started."""
        return sum(1 for hash_, owner in self.ahead if owner is not None and self.holders.get(hash_) == owner)


def queue_status(backend: Backend, *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS, digits: int | None = None) -> QueueStatus:
    """Counts for a workspace, and how long the drain loop should wait for live locks.

    A group is done if it has a done flag; failed if it has a failed flag or
    its lock is marked failed; locked if a live holder has it; pending
    otherwise (a stale or released lock is pending: the next worker takes it;
    ``released`` counts the handed-back ones among them, ``unavailable`` those
    of them handed back because the processor raised ServiceUnavailable). ``claimed_ahead``
    counts the locked groups that no processor runs yet: a worker claimed
    them ahead while it still holds the group in front (which is running,
    or waiting out a retry backoff), so one worker may hold two locks.

    Groups and paths come from the index's catalog (:func:`index_counts`),
    the rest from :func:`scan_flags`. Flags are counted as listed, without
    matching them against the index, which would mean reading every
    segment: flags and locks are written only by the holder of a group it
    claimed from the index (s3wq's, or olmocr's sharing the workspace), and
    the index only grows, so every flag names a group of the index. Keys
    that name no hash are skipped. A flag for a hash outside the index (one
    copied in by hand) would be counted; the counts are clamped so that they
    still add up and ``pending`` is never negative.
    ``digits`` overrides how many hex digits of hash prefix the flags are
    partitioned by (:func:`flag_partitions`).
    """
    partitions = flag_partitions(backend, catalog_groups(backend), digits)
    found = _FlagCounts()
    for item in scan_flags(backend, partitions, foreign_lock_timeout=foreign_lock_timeout):
        found.add(item)
    # The index is counted after the flags: it only grows, so every flag
    # listed names a group counted here, even if a populate and its workers
    # ran while the flags were listed.
    groups, paths = index_counts(backend)
    done = min(found.done, groups)
    failed = min(found.failed, groups - done)
    live = min(found.live, groups - done - failed)
    finished = done + failed
    pending = groups - finished - live
    released = min(found.released, pending)
    return QueueStatus(
        groups=groups,
        paths=paths,
        done=done,
        failed=failed,
        locked=live,
        claimed_ahead=min(live, found.claimed_ahead()),
        pending=pending,
        remaining=groups - finished,
        finished=finished,
        # Handed back (a run out of time, a signal, an operator): claimable
        # now, and to the drain loop a reason for another round.
        released=released,
        # Of those, handed back unrun because a service the processor needs was down (ServiceUnavailable):
        # to the drain loop, after a round that finished nothing, a reason to stop rather than run another.
        unavailable=min(found.unavailable, released),
        # Whole seconds (Step Functions' Wait takes integers), rounded up, and
        # past the store's clock resolution: by then every live lock that is
        # not renewed is stale.
        wait_seconds=math.ceil(found.longest_stale_in + backend.clock_resolution_seconds) + 1 if live else 0,
    )
