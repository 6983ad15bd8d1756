"""Populate: add paths to the index in new groups, as new segments and one catalog swap.

A populate writes its segments, then swaps the catalog with ``If-Match`` on
the ETag it read (``If-None-Match`` for the first one), so concurrent
populates serialise on one small object and none can lose another's groups.
A populate that loses the race re-reads only the segments added since (and
olmocr's index only if olmocr replaced it) and retries. Each populate splits
its groups into segments by hash prefix, about SEGMENT_TARGET_GROUPS groups
each, so a worker loads one small segment at a time and can list the done
flags of that prefix alone.

A segment written by a populate that then lost every retry is never listed in
the catalog, so readers ignore it; it is inert garbage, not a duplicate.
"""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from s3wq.errors import ConditionFailed, ConfigError, IndexContention, ObjectExists, ObjectNotFound, S3wqError
from s3wq.index.catalog import Catalog, SegmentInfo, load_segment, prefix_length, read_catalog
from s3wq.index.codec import encode_groups
from s3wq.index.olmocr import OlmocrIndex, reads_of_one_version
from s3wq.model import Group
from s3wq.store import Backend, layout
from s3wq.wording import plural

# Segment PUTs in flight at once during a populate (each one small: S3 takes thousands per second per prefix).
PARALLEL_SEGMENT_WRITES = 16
# Enough for dozens of simultaneous populates; each retry reads only the delta.
MAX_CATALOG_ATTEMPTS = 60


@dataclass
class PopulateResult:
    added_paths: int = 0
    added_groups: int = 0
    already_indexed: int = 0
    segments_written: int = 0
    catalog_attempts: int = 0
    groups: int = 0
    paths: int = 0


@dataclass
class _Known:
    """What a populate has already read, so a retry reads only what changed.

    Every hash indexed is kept, to refuse a new group whose hash an old one
    has (about 120 bytes each: 120 MB for olmocr's 1 M groups of a 10 M-path
    workspace). Of the paths indexed, only those this populate was given are
    kept: the others cannot change what it adds, and all of them (1.5 GB for
    10 M paths) would cost far more than the hashes.
    """

    wanted: set = field(default_factory=set)
    paths: set = field(default_factory=set)
    hashes: set = field(default_factory=set)
    segment_keys: set = field(default_factory=set)
    legacy_etag: str | None = None
    legacy_groups: int = 0
    legacy_paths: int = 0

    def add(self, groups: Iterable[Group]) -> None:
        for group in groups:
            self.hashes.add(group.hash)
            self.paths.update(p for p in group.paths if p in self.wanted)


def make_groups(paths: Sequence[str], group_size: int) -> list[Group]:
    """Chunk sorted paths into groups, as olmocr does, each named by its olmocr hash."""
    groups = []
    for start in range(0, len(paths), group_size):
        chunk = tuple(paths[start : start + group_size])
        groups.append(Group(layout.group_hash(chunk), chunk))
    return groups


def populate(
    backend: Backend,
    paths: Iterable[str],
    group_size: int,
    *,
    progress: Callable[[str], None] | None = None,
) -> PopulateResult:
    """Add the paths not yet indexed, in new groups of ``group_size``; idempotent.

    Raises IndexCorrupt (and writes nothing to the catalog) if an existing
    index object cannot be read, IndexContention if the catalog kept
    changing for MAX_CATALOG_ATTEMPTS tries.
    """
    if group_size < 1:
        raise ConfigError(f"group size must be at least 1, got {group_size}")
    unique = set(paths)
    wanted = sorted(unique)
    known = _Known(wanted=unique)
    result = PopulateResult()
    writer = uuid.uuid4().hex
    for attempt in range(1, MAX_CATALOG_ATTEMPTS + 1):
        result.catalog_attempts = attempt
        catalog, catalog_etag = read_catalog(backend)
        _refresh(backend, known, catalog)
        fresh = [p for p in wanted if p not in known.paths]
        result.already_indexed = len(wanted) - len(fresh)
        if not fresh:
            result.added_paths = result.added_groups = result.segments_written = 0
            result.groups = catalog.groups + known.legacy_groups
            result.paths = catalog.paths + known.legacy_paths
            return result
        groups = make_groups(fresh, group_size)
        by_prefix = _by_prefix(groups, known)
        if progress:
            progress(f"writing {plural(len(groups), 'group')} in {plural(len(by_prefix), 'segment')}")
        infos = _write_segments(backend, by_prefix)
        new_catalog = Catalog(catalog.segments + tuple(infos), writer=f"{writer}:{attempt}")
        if not _swap_catalog(backend, new_catalog, catalog_etag):
            # Another populate swapped the catalog first: back off with
            # jitter so a crowd of populates does not retry in lockstep.
            time.sleep(random.uniform(0, min(1.0, 0.02 * 2**attempt)))
            continue
        result.added_paths = len(fresh)
        result.added_groups = len(groups)
        result.segments_written = len(infos)
        result.groups = new_catalog.groups + known.legacy_groups
        result.paths = new_catalog.paths + known.legacy_paths
        return result
    raise IndexContention(f"index catalog changed {MAX_CATALOG_ATTEMPTS} times during populate; nothing was added")


def _by_prefix(groups: list[Group], known: _Known) -> dict[str, list[Group]]:
    """The new groups by the hash prefix of the segment each goes in; S3wqError if two groups share a hash."""
    clashes = {g.hash for g in groups} & known.hashes
    if clashes or len({g.hash for g in groups}) != len(groups):
        raise S3wqError(f"group hash collision on {sorted(clashes)[:3]}; choose another --group-size")
    k = prefix_length(len(groups))
    by_prefix: dict[str, list[Group]] = {}
    for group in sorted(groups, key=lambda g: g.hash):
        by_prefix.setdefault(group.hash[:k], []).append(group)
    return by_prefix


def _swap_catalog(backend: Backend, new_catalog: Catalog, catalog_etag: str | None) -> bool:
    """Write the catalog over the version read (ETag ``catalog_etag``, None: none); whether ours is the one stored."""
    try:
        if catalog_etag is None:
            backend.create(layout.INDEX_CATALOG_KEY, new_catalog.to_json())
        else:
            backend.replace(layout.INDEX_CATALOG_KEY, new_catalog.to_json(), catalog_etag)
    except (ConditionFailed, ObjectNotFound):
        # Our own write whose response was lost (the SDK's retry then lost to
        # it) carries our writer token; anyone else's does not.
        return read_catalog(backend)[0].writer == new_catalog.writer
    return True


def _write_segments(backend: Backend, by_prefix: dict[str, list[Group]]) -> list[SegmentInfo]:
    """Write one segment per hash prefix; their descriptions, in prefix order.

    Encoding stays on this thread (it is CPU, and a zstd context costs
    megabytes each); the PUTs go side by side, at most
    PARALLEL_SEGMENT_WRITES of them and twice that many bodies waiting,
    so 4,096 segments take seconds rather than 4,096 round trips in a
    row, in bounded memory. Only the catalog swap publishes them.
    """
    infos: list[SegmentInfo] = []
    in_flight: deque[Future] = deque()
    with ThreadPoolExecutor(max_workers=PARALLEL_SEGMENT_WRITES) as pool:
        for prefix, groups in sorted(by_prefix.items()):
            body = encode_groups(groups)
            # Content-addressed: a retry or a twin populate writes the same
            # key, and finding it already there means the same bytes are stored.
            key = layout.segment_key(hashlib.sha1(body).hexdigest())
            infos.append(SegmentInfo(key=key, prefix=prefix, groups=len(groups), paths=sum(len(g.paths) for g in groups)))
            in_flight.append(pool.submit(_create_segment, backend, key, body))
            while len(in_flight) > 2 * PARALLEL_SEGMENT_WRITES:
                in_flight.popleft().result()
        for future in in_flight:
            future.result()
    return infos


def _create_segment(backend: Backend, key: str, body: bytes) -> None:
    try:
        backend.create(key, body)
    except ObjectExists:
        pass


def _refresh(backend: Backend, known: _Known, catalog: Catalog) -> None:
    """Read what was indexed since ``known`` was: olmocr's index if olmocr replaced it, and new segments."""
    olmocr = OlmocrIndex(backend)
    for attempt in reads_of_one_version("it was read"):
        with attempt:
            head = olmocr.head()
            if head is not None and head.etag != known.legacy_etag:
                groups = paths = 0
                # If the version is replaced while read, what was read of it
                # stays known, as a version read whole by an earlier attempt
                # does: olmocr's index only grows.
                for group in olmocr.stream(head.etag).groups():
                    known.add((group,))
                    groups += 1
                    paths += len(group.paths)
                known.legacy_etag, known.legacy_groups, known.legacy_paths = head.etag, groups, paths
    for info in catalog.segments:
        if info.key not in known.segment_keys:
            known.add(load_segment(backend, info.key))
            known.segment_keys.add(info.key)
