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

olmocr's index is never held whole, however big: it is fetched by ranged
GETs pinned to its ETag, decompressed a little at a time and parsed row by
row. A worker walks it in *parts*, each the rows that start within one
stretch of ``LEGACY_PART_CHARS`` characters of its text. Their number comes
from the text's size, which the zstd frame header records (olmocr writes its
index in one shot, which records it, and its own reader needs it), so workers
spread over the parts as they do over segments; walking the parts in order
reads the index once, and a walk that wraps around reads it once more up to
where it began. Nothing is written: a worker may only read the index.
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import io
import itertools
import json
import math
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import zstandard

from s3wq.errors import (
    BadGroupHash,
    ConditionFailed,
    ConfigError,
    IndexContention,
    IndexCorrupt,
    NoIndex,
    ObjectChanged,
    ObjectExists,
    ObjectNotFound,
    S3wqError,
)
from s3wq.model import Group
from s3wq.protocol.bodies import strict_json
from s3wq.store import Backend, StoredObject, layout
from s3wq.wording import plural

SEGMENT_TARGET_GROUPS = 1000
# Segment PUTs in flight at once during a populate (each one small: S3 takes thousands per second per prefix).
PARALLEL_SEGMENT_WRITES = 16
CATALOG_FORMAT = "s3wq-index/1"
# Enough for dozens of simultaneous populates; each retry reads only the delta.
MAX_CATALOG_ATTEMPTS = 60
ZSTD_LEVEL = 3

# olmocr's index is walked in parts of this many characters of its text: some
# 1,700 groups of ten 60-character paths, about 2 MiB once parsed.
LEGACY_PART_CHARS = 1 << 20
# Compressed bytes of olmocr's index fetched by one ranged GET, and held until
# parsed: a pass over a 10 M-path index (150 MB) is some twenty GETs, so that
# a worker waits on the store's latency twenty times, not thousands.
FETCH_BYTES = 8 << 20
# Compressed bytes handed to zstd at a time. zstd hands out text a block (up
# to 128 KiB) at a time once the block is in, and a block can take as little
# as 4 bytes: one call yields at most 32 MiB even from a hostile file, and
# from a real index at most one block.
_FEED_BYTES = 1 << 10
# The most bytes a zstd frame header takes, magic number included.
_FRAME_HEADER_MAX_BYTES = 18
# Reads of olmocr's index started over because olmocr replaced it meanwhile
# (its populate rewrites it whole), before giving up.
MAX_LEGACY_READS = 5


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


def _decompressed(pieces: Iterable[bytes], source: str) -> Iterator[bytes]:
    """The text of every zstd frame in ``pieces``, a feed at a time; IndexCorrupt if empty, not zstd, or cut short.

    Holds one feed's text (see _FEED_BYTES) and zstd's window (2 MiB at
    olmocr's level, and never more than zstd's 128 MiB limit). A frame cut
    short is only found at the end, so rows before it have been handed out.
    """
    frame = None
    empty = True
    try:
        for piece in pieces:
            view = memoryview(piece)
            for at in range(0, len(view), _FEED_BYTES):
                empty = False
                data = view[at : at + _FEED_BYTES]
                while data:
                    if frame is None or frame.eof:
                        frame = zstandard.ZstdDecompressor().decompressobj()
                    text = frame.decompress(data)
                    data = frame.unused_data if frame.eof else b""
                    if text:
                        yield text
    except zstandard.ZstdError as exc:
        raise IndexCorrupt(f"{source} is not a zstd CSV index: {exc}") from exc
    if empty:
        raise IndexCorrupt(f"{source} is empty (not even an empty zstd frame)")
    if frame is None or not frame.eof:
        raise IndexCorrupt(f"{source} is truncated: its last zstd frame is incomplete")


def _text_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of UTF-8 text given in chunks, ends kept, split where ``io.StringIO(text, newline="")`` splits it whole.

    That is at "\n", "\r" and "\r\n", as csv.reader is meant to be fed.
    Holds one chunk's lines and a line not yet ended.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    unended: list[str] = []
    for chunk in chunks:
        text = decoder.decode(chunk)
        if "\n" not in text and "\r" not in text:
            unended.append(text)
            continue
        if unended:
            unended.append(text)
            text = "".join(unended)
            unended = []
        lines = io.StringIO(text, newline="").readlines()
        if not lines[-1].endswith("\n"):
            # Not ended yet, or ended by a "\r" that may be the first half of "\r\n".
            unended.append(lines.pop())
        yield from lines
    unended.append(decoder.decode(b"", final=True))
    yield from io.StringIO("".join(unended), newline="").readlines()


class _LineFeed:
    """Lines handed to csv.reader, counting their characters; a line looked at can be given back."""

    def __init__(self, lines: Iterator[str]):
        self._lines = lines
        self._given_back: str | None = None
        self.consumed = 0

    def __iter__(self) -> _LineFeed:
        return self

    def __next__(self) -> str:
        if self._given_back is not None:
            line, self._given_back = self._given_back, None
        else:
            line = next(self._lines)
        self.consumed += len(line)
        return line

    def give_back(self, line: str) -> None:
        self._given_back = line
        self.consumed -= len(line)


def _rows(pieces: Iterable[bytes], source: str) -> Iterator[tuple[int, int, list[str]]]:
    """(row number, where the row starts in the text, in characters, its fields) for each CSV row of a zstd index.

    The rows are exactly those csv.reader reads from the whole text (see
    _text_lines). Holds one row beside what _decompressed and _text_lines hold.
    """
    feed = _LineFeed(_text_lines(_decompressed(pieces, source)))
    reader = csv.reader(feed)
    longest_field = csv.field_size_limit()
    row_number = 0
    try:
        while True:
            start = feed.consumed
            line = next(feed, None)
            if line is None:
                return
            row_number += 1
            if '"' in line or len(line) >= longest_field:
                # Quoted fields (which may span lines) or a field csv.reader
                # refuses: its own rules decide, from this line on.
                feed.give_back(line)
                fields = next(reader)
            else:
                # Without a quote a line is one row, which csv.reader would
                # split at each comma; str.split does that several times faster.
                bare = line.rstrip("\r\n")
                fields = bare.split(",") if bare else []
            yield row_number, start, fields
    except (UnicodeDecodeError, csv.Error) as exc:
        raise IndexCorrupt(f"{source} is not a zstd CSV index: {exc}") from exc


def _group_from_row(fields: list[str], row_number: int, source: str) -> Group | None:
    """The group a row names (None for a blank row); IndexCorrupt if the row is no group."""
    if not fields or fields == [""]:
        return None
    hash_, paths = fields[0], tuple(fields[1:])
    try:
        layout.check_hash(hash_)
    except BadGroupHash as exc:
        raise IndexCorrupt(f"{source}: row {row_number}: {exc}") from exc
    if not paths:
        raise IndexCorrupt(f"{source}: row {row_number}: group {hash_} has no paths")
    return Group(hash_, paths)


def stream_groups(pieces: Iterable[bytes], source: str) -> Iterator[Group]:
    """The groups of an index object given as consecutive pieces of its bytes, a row at a time.

    Memory is bounded by one piece, one feed's text and one row (see
    _decompressed), never by the index. Every row is checked as it comes:
    IndexCorrupt, naming ``source``, is raised at the first bad row or byte,
    so a caller that must not act on a damaged index reads it whole first
    (as decode_groups does).
    """
    for row_number, _, fields in _rows(pieces, source):
        group = _group_from_row(fields, row_number, source)
        if group is not None:
            yield group


def decode_groups(data: bytes, source: str) -> list[Group]:
    """Parse an index object; raise IndexCorrupt naming ``source`` if it is not valid."""
    return list(stream_groups([data], source))


def _frame_content_size(head: bytes) -> int | None:
    """The text size a zstd frame header records, None if it records none or is no header."""
    try:
        size = zstandard.frame_content_size(head)
    except zstandard.ZstdError:
        return None
    return size if size >= 0 else None


class _StoredIndexStream:
    """The rows of one version of a stored index object, front to back, in bounded memory.

    The object is fetched by ranged GETs of FETCH_BYTES, each pinned to
    ``etag``: ObjectChanged is raised as soon as the object is replaced, so
    rows of two versions are never mixed. Holds one fetched piece beside
    what _rows holds.
    """

    def __init__(self, backend: Backend, key: str, etag: str):
        self.backend = backend
        self.key = key
        self.etag = etag
        self._rows = _rows(self._pieces(), key)
        self._next: tuple[int, int, list[str]] | None = None
        # Where the last row taken started: a row at or after a spot is still to come only if this is before it.
        self.last_taken_start = -1

    def _pieces(self) -> Iterator[bytes]:
        start = 0
        while True:
            piece = self.backend.read_range(self.key, start, FETCH_BYTES, etag=self.etag).body
            if piece:
                yield piece
            if len(piece) < FETCH_BYTES:
                return
            start += len(piece)

    def text_size(self) -> int:
        """The length of the object's text, read through (an upper bound of its characters)."""
        return sum(len(text) for text in _decompressed(self._pieces(), self.key))

    def peek(self) -> tuple[int, int, list[str]] | None:
        """The next row (row number, start in characters, fields) without taking it; None at the end."""
        if self._next is None:
            self._next = next(self._rows, None)
        return self._next

    def take(self) -> tuple[int, int, list[str]] | None:
        row = self.peek()
        self._next = None
        if row is not None:
            self.last_taken_start = row[1]
        return row

    def groups(self) -> Iterator[Group]:
        while (row := self.take()) is not None:
            group = _group_from_row(row[2], row[0], self.key)
            if group is not None:
                yield group


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


class WorkIndex:
    def __init__(self, backend: Backend):
        self.backend = backend
        # A walk over olmocr's index: the version it reads, and the stream left where the last part ended.
        self._legacy_etag: str | None = None
        self._legacy_stream: _StoredIndexStream | None = None

    # --- reading ---------------------------------------------------------

    def read_catalog(self) -> tuple[Catalog, str | None]:
        try:
            stored = self.backend.read(layout.INDEX_CATALOG_KEY)
        except ObjectNotFound:
            return Catalog(), None
        return Catalog.from_json(stored.body), stored.etag

    def exists(self) -> bool:
        """Whether the workspace holds an index: s3wq's catalog or olmocr's list (one or two requests)."""
        return self.backend.exists(layout.INDEX_CATALOG_KEY) or self.backend.exists(layout.LEGACY_INDEX_KEY)

    def require(self) -> None:
        """Raise NoIndex unless the workspace holds an index: a typo in its URI must not read as an empty queue."""
        if not self.exists():
            raise NoIndex(self.backend.uri)

    def segment_refs(self) -> list[SegmentRef]:
        """The catalog's segments, then the parts of olmocr's index if there is one.

        Costs the catalog's GET and, for olmocr's index, one ranged GET of its
        frame header. An index whose header records no size (never olmocr's)
        is read through once to learn it; one whose first frame records less
        than the whole (several frames) has the rest in its last part.
        """
        catalog, _ = self.read_catalog()
        refs = [SegmentRef(s.key, s.prefix, s.groups) for s in catalog.segments]
        parts = self._legacy_parts()
        refs += [SegmentRef(layout.LEGACY_INDEX_KEY, "", None, part=i, parts=parts) for i in range(parts)]
        return refs

    def _legacy_head(self) -> StoredObject | None:
        """The first bytes of olmocr's index (its frame header) and its ETag; None if there is none."""
        try:
            return self.backend.read_range(layout.LEGACY_INDEX_KEY, 0, _FRAME_HEADER_MAX_BYTES)
        except ObjectNotFound:
            return None

    def _legacy_parts(self) -> int:
        for _ in range(MAX_LEGACY_READS):
            head = self._legacy_head()
            if head is None:
                return 0
            self._legacy_etag, self._legacy_stream = head.etag, None
            size = _frame_content_size(head.body)
            if size is None:
                try:
                    size = _StoredIndexStream(self.backend, layout.LEGACY_INDEX_KEY, head.etag).text_size()
                except ObjectChanged:
                    continue
            return max(1, math.ceil(size / LEGACY_PART_CHARS))
        raise IndexContention(f"{layout.LEGACY_INDEX_KEY} was replaced {MAX_LEGACY_READS} times while it was measured")

    def load(self, key: str) -> list[Group]:
        """Groups of one segment (or olmocr's whole index); IndexCorrupt if undecodable or not what its key names."""
        if key == layout.LEGACY_INDEX_KEY:
            if self._legacy_head() is None:
                raise ObjectNotFound(key)
            return list(self.legacy_groups())
        body = self.backend.read(key).body
        named = key[len(layout.INDEX_SEGMENTS_PREFIX) :].removesuffix(".csv.zstd")
        if key.startswith(layout.INDEX_SEGMENTS_PREFIX) and hashlib.sha1(body).hexdigest() != named:
            # A segment's key is the SHA-1 of its body: anything else is damage, not an index.
            raise IndexCorrupt(f"{key} does not hold the bytes its name is the SHA-1 of")
        return decode_groups(body, key)

    def load_ref(self, ref: SegmentRef) -> list[Group]:
        """Groups of one segment, or of one part of olmocr's index (see SegmentRef).

        A part costs no more memory than its own groups and the stream's
        buffers (see _StoredIndexStream), never the index. The stream is kept
        between parts, so parts loaded in order read the index once; loading
        a part that lies behind the stream starts a new one from the top. If
        olmocr replaces its index meanwhile, the new version is read from its
        top to the same part: olmocr's populate keeps the rows it had and
        adds new ones after them.
        """
        if ref.key != layout.LEGACY_INDEX_KEY:
            return self.load(ref.key)
        for _ in range(MAX_LEGACY_READS):
            if self._legacy_etag is None:
                head = self._legacy_head()
                if head is None:
                    raise ObjectNotFound(ref.key)
                self._legacy_etag = head.etag
            try:
                return self._legacy_part(ref.part, ref.parts)
            except ObjectChanged:
                self._legacy_etag = self._legacy_stream = None
        raise IndexContention(f"{layout.LEGACY_INDEX_KEY} was replaced {MAX_LEGACY_READS} times while part {ref.part} was read")

    def _legacy_part(self, part: int, parts: int) -> list[Group]:
        begin = part * LEGACY_PART_CHARS
        end = None if part == parts - 1 else begin + LEGACY_PART_CHARS
        stream = self._legacy_stream
        if stream is None or stream.etag != self._legacy_etag or stream.last_taken_start >= begin:
            stream = self._legacy_stream = _StoredIndexStream(self.backend, layout.LEGACY_INDEX_KEY, self._legacy_etag)
        groups = []
        while (row := stream.peek()) is not None:
            row_number, start, fields = row
            if end is not None and start >= end:
                break
            stream.take()
            # Rows before the part are only parsed past: each is checked when its own part is loaded.
            if start >= begin and (group := _group_from_row(fields, row_number, stream.key)) is not None:
                groups.append(group)
        return groups

    def legacy_groups(self) -> Iterator[Group]:
        """Every group of olmocr's index (none if there is none), a row at a time, in bounded memory.

        If olmocr replaces its index meanwhile, the new version is read from
        its top, so a group may come twice.
        """
        for _ in range(MAX_LEGACY_READS):
            head = self._legacy_head()
            if head is None:
                return
            try:
                yield from _StoredIndexStream(self.backend, layout.LEGACY_INDEX_KEY, head.etag).groups()
                return
            except ObjectChanged:
                continue
        raise IndexContention(f"{layout.LEGACY_INDEX_KEY} was replaced {MAX_LEGACY_READS} times while it was read")

    def legacy_counts(self) -> tuple[int, int]:
        """Groups and paths in olmocr's index ((0, 0) if there is none), streamed: one version counted, whole."""
        for _ in range(MAX_LEGACY_READS):
            head = self._legacy_head()
            if head is None:
                return 0, 0
            groups = paths = 0
            try:
                for group in _StoredIndexStream(self.backend, layout.LEGACY_INDEX_KEY, head.etag).groups():
                    groups += 1
                    paths += len(group.paths)
                return groups, paths
            except ObjectChanged:
                continue  # replaced while counted: count the new version from its top
        raise IndexContention(f"{layout.LEGACY_INDEX_KEY} was replaced {MAX_LEGACY_READS} times while it was read")

    def iter_groups(self) -> Iterator[Group]:
        """Every group once: the catalog's segments one at a time, then olmocr's index streamed.

        Holds one segment, the stream's buffers, and the hashes seen so far
        (about 120 bytes a group), never the index's text.
        """
        seen: set[str] = set()
        catalog, _ = self.read_catalog()
        segments = (group for info in catalog.segments for group in self.load(info.key))
        for group in itertools.chain(segments, self.legacy_groups()):
            if group.hash not in seen:
                seen.add(group.hash)
                yield group

    # --- writing ---------------------------------------------------------

    def _write_segments(self, by_prefix: dict[str, list[Group]]) -> list[SegmentInfo]:
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
                in_flight.append(pool.submit(self._create_segment, key, body))
                while len(in_flight) > 2 * PARALLEL_SEGMENT_WRITES:
                    in_flight.popleft().result()
            for future in in_flight:
                future.result()
        return infos

    def _create_segment(self, key: str, body: bytes) -> None:
        try:
            self.backend.create(key, body)
        except ObjectExists:
            pass

    def _refresh(self, known: _Known, catalog: Catalog) -> None:
        for _ in range(MAX_LEGACY_READS):
            head = self._legacy_head()
            if head is None or head.etag == known.legacy_etag:
                break
            groups = paths = 0
            try:
                for group in _StoredIndexStream(self.backend, layout.LEGACY_INDEX_KEY, head.etag).groups():
                    known.add((group,))
                    groups += 1
                    paths += len(group.paths)
            except ObjectChanged:
                # What was read of the old version stays known, as a version
                # read whole by an earlier attempt does: olmocr's index only grows.
                continue
            known.legacy_etag, known.legacy_groups, known.legacy_paths = head.etag, groups, paths
            break
        else:
            raise IndexContention(f"{layout.LEGACY_INDEX_KEY} was replaced {MAX_LEGACY_READS} times while it was read")
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
        unique = set(paths)
        wanted = sorted(unique)
        known = _Known(wanted=unique)
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
                progress(f"writing {plural(len(groups), 'group')} in {plural(len(by_prefix), 'segment')}")
            infos = self._write_segments(by_prefix)
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
