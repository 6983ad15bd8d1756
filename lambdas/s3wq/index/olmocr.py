"""olmocr's single ``work_index_list.csv.zstd``, read as it is and never written.

It is never held whole, however big: it is fetched by ranged GETs pinned to
its ETag, decompressed a little at a time and parsed row by row (see
:mod:`s3wq.index.codec`). A worker walks it in *parts*, each the rows that
start within one stretch of ``LEGACY_PART_CHARS`` characters of its text.
Their number comes from the text's size, which the zstd frame header records
(olmocr writes its index in one shot, which records it, and its own reader
needs it), so workers spread over the parts as they do over segments;
walking the parts in order reads the index once, and a walk that wraps
around reads it once more up to where it began.

olmocr's populate rewrites the index whole, so every read here is of one
version and starts over on the new one when it is replaced (see
reads_of_one_version).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Self

from s3wq.errors import IndexContention, ObjectChanged, ObjectNotFound
from s3wq.index.codec import Row, decompressed, frame_content_size, group_from_row, rows
from s3wq.model import Group
from s3wq.store import Backend, StoredObject, layout

# olmocr's index is walked in parts of this many characters of its text: some
# 1,700 groups of ten 60-character paths, about 2 MiB once parsed.
LEGACY_PART_CHARS = 1 << 20
# Compressed bytes of olmocr's index fetched by one ranged GET, and held until
# parsed: a pass over a 10 M-path index (150 MB) is some twenty GETs, so that
# a worker waits on the store's latency twenty times, not thousands.
FETCH_BYTES = 8 << 20
# The most bytes a zstd frame header takes, magic number included.
_FRAME_HEADER_MAX_BYTES = 18
# Reads of olmocr's index started over because olmocr replaced it meanwhile
# (its populate rewrites it whole), before giving up.
MAX_LEGACY_READS = 5


class _Try:
    """One read of one version of olmocr's index: a context that swallows ObjectChanged and notes that it did."""

    replaced = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        self.replaced = kind is not None and issubclass(kind, ObjectChanged)
        return self.replaced


def reads_of_one_version(doing: str) -> Iterator[_Try]:
    """Tries at reading olmocr's index, used as ``for attempt in reads_of_one_version(...): with attempt: ...``.

    A try whose body raises ObjectChanged (olmocr replaced the index while it
    was read) is followed by another, which reads the new version from its
    top; at most MAX_LEGACY_READS in all, then IndexContention saying what
    was being done. A try that ends any other way (a return, another error,
    or its end) is the last. One loop for every reader, plain functions and
    generators alike: a generator cannot hand its rows to a callback.
    """
    for _ in range(MAX_LEGACY_READS):
        attempt = _Try()
        yield attempt
        if not attempt.replaced:
            return
    raise IndexContention(f"{layout.LEGACY_INDEX_KEY} was replaced {MAX_LEGACY_READS} times while {doing}")


class StoredIndexStream:
    """The rows of one version of a stored index object, front to back, in bounded memory.

    The object is fetched by ranged GETs of FETCH_BYTES, each pinned to
    ``etag``: ObjectChanged is raised as soon as the object is replaced, so
    rows of two versions are never mixed. Holds one fetched piece beside
    what codec.rows holds.
    """

    def __init__(self, backend: Backend, key: str, etag: str):
        self.backend = backend
        self.key = key
        self.etag = etag
        self._rows = rows(self._pieces(), key)
        self._next: Row | None = None
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
        return sum(len(text) for text in decompressed(self._pieces(), self.key))

    def peek(self) -> Row | None:
        """The next row (row number, start in characters, fields) without taking it; None at the end."""
        if self._next is None:
            self._next = next(self._rows, None)
        return self._next

    def take(self) -> Row | None:
        row = self.peek()
        self._next = None
        if row is not None:
            self.last_taken_start = row[1]
        return row

    def groups(self) -> Iterator[Group]:
        while (row := self.take()) is not None:
            group = group_from_row(row[2], row[0], self.key)
            if group is not None:
                yield group


class OlmocrIndex:
    """olmocr's index in one workspace: its parts for a walk, its groups and its counts."""

    def __init__(self, backend: Backend):
        self.backend = backend
        # A walk over the parts: the version it reads, and the stream left where the last part ended.
        self._etag: str | None = None
        self._stream: StoredIndexStream | None = None

    def head(self) -> StoredObject | None:
        """The first bytes of olmocr's index (its frame header) and its ETag; None if there is none."""
        try:
            return self.backend.read_range(layout.LEGACY_INDEX_KEY, 0, _FRAME_HEADER_MAX_BYTES)
        except ObjectNotFound:
            return None

    def stream(self, etag: str) -> StoredIndexStream:
        return StoredIndexStream(self.backend, layout.LEGACY_INDEX_KEY, etag)

    def parts(self) -> int:  # type: ignore[return]  # reads_of_one_version raises when its tries run out
        """How many parts a walk takes (0 if there is no index); the walk then reads the version measured.

        One ranged GET of the frame header. An index whose header records no
        size (never olmocr's) is read through once to learn it; one whose
        first frame records less than the whole (several frames) has the
        rest in its last part.
        """
        for attempt in reads_of_one_version("it was measured"):
            with attempt:
                head = self.head()
                if head is None:
                    return 0
                self._etag, self._stream = head.etag, None
                size = frame_content_size(head.body)
                if size is None:
                    size = self.stream(head.etag).text_size()
                return max(1, math.ceil(size / LEGACY_PART_CHARS))

    def load_part(self, part: int, parts: int) -> list[Group]:  # type: ignore[return]  # reads_of_one_version raises when its tries run out
        """The groups whose rows start in part ``part`` of ``parts`` (see SegmentRef).

        A part costs no more memory than its own groups and the stream's
        buffers (see StoredIndexStream), never the index. The stream is kept
        between parts, so parts loaded in order read the index once; loading
        a part that lies behind the stream starts a new one from the top. If
        olmocr replaces its index meanwhile, the new version is read from its
        top to the same part: olmocr's populate keeps the rows it had and
        adds new ones after them.
        """
        for attempt in reads_of_one_version(f"part {part} was read"):
            with attempt:
                if self._etag is None:
                    head = self.head()
                    if head is None:
                        raise ObjectNotFound(layout.LEGACY_INDEX_KEY)
                    self._etag = head.etag
                try:
                    return self._read_part(part, parts, self._etag)
                except ObjectChanged:
                    self._etag = self._stream = None
                    raise

    def _read_part(self, part: int, parts: int, etag: str) -> list[Group]:
        begin = part * LEGACY_PART_CHARS
        end = None if part == parts - 1 else begin + LEGACY_PART_CHARS
        stream = self._stream
        if stream is None or stream.etag != etag or stream.last_taken_start >= begin:
            stream = self._stream = self.stream(etag)
        groups = []
        while (row := stream.peek()) is not None:
            row_number, start, fields = row
            if end is not None and start >= end:
                break
            stream.take()
            # Rows before the part are only parsed past: each is checked when its own part is loaded.
            if start >= begin and (group := group_from_row(fields, row_number, stream.key)) is not None:
                groups.append(group)
        return groups

    def groups(self) -> Iterator[Group]:
        """Every group (none if there is no index), a row at a time, in bounded memory.

        If olmocr replaces its index meanwhile, the new version is read from
        its top, so a group may come twice.
        """
        for attempt in reads_of_one_version("it was read"):
            with attempt:
                head = self.head()
                if head is None:
                    return
                yield from self.stream(head.etag).groups()

    def counts(self) -> tuple[int, int]:  # type: ignore[return]  # reads_of_one_version raises when its tries run out
        """Groups and paths ((0, 0) if there is no index), streamed: one version counted, whole."""
        for attempt in reads_of_one_version("it was read"):
            with attempt:
                head = self.head()
                if head is None:
                    return 0, 0
                groups = paths = 0
                # Replaced while counted: the next try counts the new version from its top.
                for group in self.stream(head.etag).groups():
                    groups += 1
                    paths += len(group.paths)
                return groups, paths
