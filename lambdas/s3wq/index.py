"""The work index: which groups exist and which paths each holds.

Two layouts are read, one is written:

* olmocr's single ``work_index_list.csv.zstd`` is read as it is, whenever it
  exists, so s3wq can drain a workspace olmocr populated.
* s3wq writes immutable *segments* under ``index/segments/`` (the same zstd
  CSV rows, ``hash,path1,path2,...``) and lists them in ``index/catalog.json``.
  A populate adds segments and then swaps the catalog with ``If-Match`` on
  the ETag it read (``If-None-Match`` for the first one), so concurrent
  populates serialise on one small object and none can lose another's groups.
  A populate that loses the race re-reads only the segments added since and
  retries. Each populate splits its groups into segments by hash prefix, about
  ``SEGMENT_TARGET_GROUPS`` groups each, so a worker loads one small segment at
  a time and can list the done flags of that prefix alone.

A segment written by a populate that then lost every retry is never listed in
the catalog, so readers ignore it; it is inert garbage, not a duplicate.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import random
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import zstandard

from . import layout
from .bodies import strict_json
from .backends import Backend
from .errors import (
    BadGroupHash,
    ConditionFailed,
    ConfigError,
    IndexContention,
    IndexCorrupt,
    ObjectExists,
    ObjectNotFound,
    S3wqError,
)

SEGMENT_TARGET_GROUPS = 1000
CATALOG_FORMAT = "s3wq-index/1"
# Enough for dozens of simultaneous populates; each retry reads only the delta.
MAX_CATALOG_ATTEMPTS = 60
ZSTD_LEVEL = 3


@dataclass(frozen=True)
class Group:
    hash: str
    paths: tuple[str, ...]


@dataclass(frozen=True)
class SegmentInfo:
    key: str
    prefix: str  # every group in the segment has a hash starting with this
    groups: int
    paths: int


@dataclass(frozen=True)
class Catalog:
    segments: tuple[SegmentInfo, ...] = ()
    # A token unique to the populate that wrote this version, so that a
    # populate whose catalog write was applied but whose response was lost
    # recognises its own write.
    writer: str = ""

    @property
    def groups(self) -> int:
        return sum(s.groups for s in self.segments)

    @property
    def paths(self) -> int:
        return sum(s.paths for s in self.segments)

    def to_json(self) -> bytes:
        doc = {"format": CATALOG_FORMAT, "writer": self.writer, "segments": [asdict(s) for s in self.segments]}
        return json.dumps(doc, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> "Catalog":
        try:
            doc = strict_json(data)
            if not isinstance(doc, dict) or doc.get("format") != CATALOG_FORMAT:
                raise ValueError(f"unknown catalog format {doc.get('format')!r}")
            segments = []
            for raw in doc["segments"]:
                groups, paths = raw["groups"], raw["paths"]
                if not (type(groups) is int and type(paths) is int and groups >= 0 and paths >= 0):
                    raise ValueError(f"segment counts must be whole numbers, got groups={groups!r:.30} paths={paths!r:.30}")
                info = SegmentInfo(key=str(raw["key"]), prefix=str(raw["prefix"]), groups=groups, paths=paths)
                layout.check_hex_prefix(info.prefix)
                if not info.key.startswith(layout.INDEX_SEGMENTS_PREFIX):
                    raise ValueError(f"segment key outside {layout.INDEX_SEGMENTS_PREFIX}: {info.key!r}")
                layout.check_hash(info.key[len(layout.INDEX_SEGMENTS_PREFIX) :].removesuffix(".csv.zstd"))
                segments.append(info)
            writer = str(doc.get("writer", ""))
        except (ValueError, KeyError, TypeError, AttributeError, BadGroupHash) as exc:
            raise IndexCorrupt(f"{layout.INDEX_CATALOG_KEY} is not a valid catalog: {exc}") from exc
        return cls(tuple(segments), writer)


# --- rows -------------------------------------------------------------------


def _needs_full_quoting(row: tuple[str, ...]) -> bool:
    # QUOTE_MINIMAL leaves a bare "\r" unquoted when the line terminator is
    # "\n", and csv.reader would split the row there; olmocr strips each line,
    # so an unquoted field with edge whitespace would change for it.
    return any("\r" in field or field != field.strip() for field in row)


def encode_groups(groups: Iterable[Group]) -> bytes:
    """zstd-compressed CSV rows ``hash,path1,...`` that olmocr's reader also accepts."""
    text = io.StringIO()
    minimal = csv.writer(text, lineterminator="\n")
    quote_all = csv.writer(text, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for group in groups:
        row = (group.hash, *group.paths)
        (quote_all if _needs_full_quoting(row) else minimal).writerow(row)
    # One-shot compress() records the content size in the frame header, which
    # olmocr's ZstdDecompressor().decompress() requires.
    return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(text.getvalue().encode("utf-8"))


def _decompress(data: bytes, source: str) -> bytes:
    """All frames of ``data``; IndexCorrupt if it is empty, not zstd, or cut short."""
    if not data:
        raise IndexCorrupt(f"{source} is empty (not even an empty zstd frame)")
    chunks = []
    remaining = data
    while remaining:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        chunks.append(decompressor.decompress(remaining))
        if not decompressor.eof:
            raise IndexCorrupt(f"{source} is truncated: its last zstd frame is incomplete")
        remaining = decompressor.unused_data
    return b"".join(chunks)


def decode_groups(data: bytes, source: str) -> list[Group]:
    """Parse an index object; raise IndexCorrupt naming ``source`` if it is not valid."""
    try:
        text = _decompress(data, source).decode("utf-8")
        groups = []
        for row_number, row in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
            if not row or row == [""]:
                continue
            hash_, paths = row[0], tuple(row[1:])
            try:
                layout.check_hash(hash_)
            except BadGroupHash as exc:
                raise IndexCorrupt(f"{source}: row {row_number}: {exc}") from exc
            if not paths:
                raise IndexCorrupt(f"{source}: row {row_number}: group {hash_} has no paths")
            groups.append(Group(hash_, paths))
        return groups
    except (zstandard.ZstdError, UnicodeDecodeError, csv.Error) as exc:
        raise IndexCorrupt(f"{source} is not a zstd CSV index: {exc}") from exc


def prefix_length(group_count: int) -> int:
    """Hex digits of hash prefix that split ``group_count`` groups into segments of about SEGMENT_TARGET_GROUPS."""
    if group_count <= SEGMENT_TARGET_GROUPS:
        return 0
    return math.ceil(math.log(group_count / SEGMENT_TARGET_GROUPS, 16))


def make_groups(paths: Sequence[str], group_size: int) -> list[Group]:
    """Chunk sorted paths into groups, as olmocr does, each named by its olmocr hash."""
    groups = []
    for start in range(0, len(paths), group_size):
        chunk = tuple(paths[start : start + group_size])
        groups.append(Group(layout.group_hash(chunk), chunk))
    return groups


@dataclass(frozen=True)
class SegmentRef:
    """Something a worker can load groups from: an s3wq segment or olmocr's single index."""

    key: str
    prefix: str
    groups: int | None  # None when unknown before loading (olmocr's file)


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
    """What a populate has already read, so a retry reads only what changed."""

    paths: set = field(default_factory=set)
    hashes: set = field(default_factory=set)
    segment_keys: set = field(default_factory=set)
    legacy_etag: str | None = None
    legacy_groups: int = 0
    legacy_paths: int = 0

    def add(self, groups: Iterable[Group]) -> None:
        for group in groups:
            self.hashes.add(group.hash)
            self.paths.update(group.paths)


class WorkIndex:
    def __init__(self, backend: Backend):
        self.backend = backend

    # --- reading ---------------------------------------------------------

    def read_catalog(self) -> tuple[Catalog, str | None]:
        try:
            stored = self.backend.read(layout.INDEX_CATALOG_KEY)
        except ObjectNotFound:
            return Catalog(), None
        return Catalog.from_json(stored.body), stored.etag

    def segment_refs(self) -> list[SegmentRef]:
        catalog, _ = self.read_catalog()
        refs = [SegmentRef(s.key, s.prefix, s.groups) for s in catalog.segments]
        if self.backend.exists(layout.LEGACY_INDEX_KEY):
            refs.append(SegmentRef(layout.LEGACY_INDEX_KEY, "", None))
        return refs

    def load(self, key: str) -> list[Group]:
        """Groups of one segment (or olmocr's whole index); IndexCorrupt if undecodable or not what its key names."""
        body = self.backend.read(key).body
        if key.startswith(layout.INDEX_SEGMENTS_PREFIX) and hashlib.sha1(body).hexdigest() != key[len(layout.INDEX_SEGMENTS_PREFIX) :].removesuffix(".csv.zstd"):
            # A segment's key is the SHA-1 of its body: anything else is damage, not an index.
            raise IndexCorrupt(f"{key} does not hold the bytes its name is the SHA-1 of")
        return decode_groups(body, key)

    def iter_groups(self) -> Iterator[Group]:
        seen: set[str] = set()
        for ref in self.segment_refs():
            for group in self.load(ref.key):
                if group.hash not in seen:
                    seen.add(group.hash)
                    yield group

    # --- writing ---------------------------------------------------------

    def _write_segment(self, groups: list[Group], prefix: str) -> SegmentInfo:
        body = encode_groups(groups)
        # Content-addressed: a retry or a twin populate writes the same key,
        # and finding it already there means the same bytes are stored.
        digest = hashlib.sha1(body).hexdigest()
        key = layout.segment_key(digest)
        try:
            self.backend.create(key, body)
        except ObjectExists:
            pass
        return SegmentInfo(key=key, prefix=prefix, groups=len(groups), paths=sum(len(g.paths) for g in groups))

    def _refresh(self, known: _Known, catalog: Catalog) -> None:
        try:
            legacy = self.backend.read(layout.LEGACY_INDEX_KEY)
        except ObjectNotFound:
            legacy = None
        if legacy is not None and legacy.etag != known.legacy_etag:
            groups = decode_groups(legacy.body, layout.LEGACY_INDEX_KEY)
            known.add(groups)
            known.legacy_etag = legacy.etag
            known.legacy_groups = len(groups)
            known.legacy_paths = sum(len(g.paths) for g in groups)
        for info in catalog.segments:
            if info.key not in known.segment_keys:
                known.add(self.load(info.key))
                known.segment_keys.add(info.key)

    def populate(
        self,
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
        wanted = sorted(set(paths))
        known = _Known()
        result = PopulateResult()
        writer = uuid.uuid4().hex
        for attempt in range(1, MAX_CATALOG_ATTEMPTS + 1):
            result.catalog_attempts = attempt
            catalog, catalog_etag = self.read_catalog()
            self._refresh(known, catalog)
            fresh = [p for p in wanted if p not in known.paths]
            result.already_indexed = len(wanted) - len(fresh)
            if not fresh:
                result.added_paths = result.added_groups = result.segments_written = 0
                result.groups = catalog.groups + known.legacy_groups
                result.paths = catalog.paths + known.legacy_paths
                return result
            groups = make_groups(fresh, group_size)
            clashes = {g.hash for g in groups} & known.hashes
            if clashes or len({g.hash for g in groups}) != len(groups):
                raise S3wqError(f"group hash collision on {sorted(clashes)[:3]}; choose another --group-size")
            k = prefix_length(len(groups))
            by_prefix: dict[str, list[Group]] = {}
            for group in sorted(groups, key=lambda g: g.hash):
                by_prefix.setdefault(group.hash[:k], []).append(group)
            if progress:
                progress(f"writing {len(groups)} groups in {len(by_prefix)} segments")
            infos = [self._write_segment(members, prefix) for prefix, members in sorted(by_prefix.items())]
            new_catalog = Catalog(catalog.segments + tuple(infos), writer=f"{writer}:{attempt}")
            try:
                if catalog_etag is None:
                    self.backend.create(layout.INDEX_CATALOG_KEY, new_catalog.to_json())
                else:
                    self.backend.replace(layout.INDEX_CATALOG_KEY, new_catalog.to_json(), catalog_etag)
            except (ConditionFailed, ObjectNotFound):
                if self.read_catalog()[0].writer != new_catalog.writer:
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
