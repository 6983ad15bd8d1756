"""s3wq's segmented index: immutable segments under ``index/segments/``, listed in ``index/catalog.json``.

A segment holds the rows of the groups whose hashes share one prefix (see
prefix_length), in the zstd CSV of :mod:`s3wq.index.codec`, and is named by
the SHA-1 of its bytes. Only the catalog publishes a segment: one a reader
finds outside it is ignored. :mod:`s3wq.index.populate` writes both.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass

from s3wq.errors import BadGroupHash, IndexCorrupt, ObjectNotFound
from s3wq.index.codec import decode_groups
from s3wq.model import Group
from s3wq.protocol.bodies import strict_json
from s3wq.store import Backend, layout

SEGMENT_TARGET_GROUPS = 1000
CATALOG_FORMAT = "s3wq-index/1"


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
    def from_json(cls, data: bytes) -> Catalog:
        try:
            doc = strict_json(data)
            if not isinstance(doc, dict) or doc.get("format") != CATALOG_FORMAT:
                raise ValueError(f"unknown catalog format {doc.get('format')!r}")
            segments = [_segment_info(raw) for raw in doc["segments"]]
            writer = str(doc.get("writer", ""))
        except (ValueError, KeyError, TypeError, AttributeError, BadGroupHash) as exc:
            raise IndexCorrupt(f"{layout.INDEX_CATALOG_KEY} is not a valid catalog: {exc}") from exc
        return cls(tuple(segments), writer)


def _segment_info(raw: dict) -> SegmentInfo:
    """One catalog entry, checked: its counts whole numbers, its key a segment's key; ValueError or BadGroupHash if not."""
    groups, paths = raw["groups"], raw["paths"]
    if not (type(groups) is int and type(paths) is int and groups >= 0 and paths >= 0):
        raise ValueError(f"segment counts must be whole numbers, got groups={groups!r:.30} paths={paths!r:.30}")
    info = SegmentInfo(key=str(raw["key"]), prefix=str(raw["prefix"]), groups=groups, paths=paths)
    layout.check_hex_prefix(info.prefix)
    if not info.key.startswith(layout.INDEX_SEGMENTS_PREFIX):
        raise ValueError(f"segment key outside {layout.INDEX_SEGMENTS_PREFIX}: {info.key!r}")
    layout.check_hash(info.key[len(layout.INDEX_SEGMENTS_PREFIX) :].removesuffix(".csv.zstd"))
    return info


@dataclass(frozen=True)
class SegmentRef:
    """Something a worker can load groups from: an s3wq segment, or one part of olmocr's single index.

    olmocr's index is walked in ``parts`` parts; ``part`` holds the rows that
    start within characters [part, part + 1) * LEGACY_PART_CHARS of its text,
    and the last one every row after that too. An s3wq segment is one part.
    """

    key: str
    prefix: str
    groups: int | None  # None when unknown before loading (olmocr's file)
    part: int = 0
    parts: int = 1


def prefix_length(group_count: int) -> int:
    """Hex digits of hash prefix that split ``group_count`` groups into segments of about SEGMENT_TARGET_GROUPS."""
    if group_count <= SEGMENT_TARGET_GROUPS:
        return 0
    return math.ceil(math.log(group_count / SEGMENT_TARGET_GROUPS, 16))


def read_catalog(backend: Backend) -> tuple[Catalog, str | None]:
    """The catalog and its ETag; an empty catalog and None if there is none yet."""
    try:
        stored = backend.read(layout.INDEX_CATALOG_KEY)
    except ObjectNotFound:
        return Catalog(), None
    return Catalog.from_json(stored.body), stored.etag


def load_segment(backend: Backend, key: str) -> list[Group]:
    """Groups of one stored index object; IndexCorrupt if undecodable or, for a segment, not the bytes its key names."""
    body = backend.read(key).body
    named = key[len(layout.INDEX_SEGMENTS_PREFIX) :].removesuffix(".csv.zstd")
    if key.startswith(layout.INDEX_SEGMENTS_PREFIX) and hashlib.sha1(body).hexdigest() != named:
        # A segment's key is the SHA-1 of its body: anything else is damage, not an index.
        raise IndexCorrupt(f"{key} does not hold the bytes its name is the SHA-1 of")
    return decode_groups(body, key)
