"""The bytes of an index object: zstd-compressed CSV rows ``hash,path1,path2,...``.

s3wq's segments and olmocr's ``work_index_list.csv.zstd`` share this format,
so both sides read each other's rows as the same groups. Reading is
streamed: the text is decompressed a feed at a time and parsed row by row,
so no caller needs to hold an object's text whole.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Iterable, Iterator

import zstandard

from s3wq.errors import BadGroupHash, IndexCorrupt
from s3wq.model import Group
from s3wq.store import layout

ZSTD_LEVEL = 3
# Compressed bytes handed to zstd at a time. zstd hands out text a block (up
# to 128 KiB) at a time once the block is in, and a block can take as little
# as 4 bytes: one call yields at most 32 MiB even from a hostile file, and
# from a real index at most one block.
_FEED_BYTES = 1 << 10

# A row as read: its number, where it starts in the text (in characters), its fields.
Row = tuple[int, int, list[str]]


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


def decompressed(pieces: Iterable[bytes], source: str) -> Iterator[bytes]:
    """The text of every zstd frame in ``pieces``, a feed at a time; IndexCorrupt if empty, not zstd, or cut short.

    Holds one feed's text (see _FEED_BYTES) and zstd's window (2 MiB at
    olmocr's level, and never more than zstd's 128 MiB limit). A frame cut
    short is only found at the end, so rows before it have been handed out.
    """
    frame: zstandard.ZstdDecompressionObj | None = None
    empty = True
    try:
        for piece in pieces:
            view = memoryview(piece)
            for at in range(0, len(view), _FEED_BYTES):
                empty = False
                data: memoryview | bytes = view[at : at + _FEED_BYTES]
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


def frame_content_size(head: bytes) -> int | None:
    """The text size a zstd frame header records, None if it records none or is no header."""
    try:
        size = zstandard.frame_content_size(head)
    except zstandard.ZstdError:
        return None
    return size if size >= 0 else None


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


def rows(pieces: Iterable[bytes], source: str) -> Iterator[Row]:
    """(row number, where the row starts in the text, in characters, its fields) for each CSV row of a zstd index.

    The rows are exactly those csv.reader reads from the whole text (see
    _text_lines). Holds one row beside what decompressed and _text_lines hold.
    """
    feed = _LineFeed(_text_lines(decompressed(pieces, source)))
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


def group_from_row(fields: list[str], row_number: int, source: str) -> Group | None:
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
    decompressed), never by the index. Every row is checked as it comes:
    IndexCorrupt, naming ``source``, is raised at the first bad row or byte,
    so a caller that must not act on a damaged index reads it whole first
    (as decode_groups does).
    """
    for row_number, _, fields in rows(pieces, source):
        group = group_from_row(fields, row_number, source)
        if group is not None:
            yield group


def decode_groups(data: bytes, source: str) -> list[Group]:
    """Parse an index object; raise IndexCorrupt naming ``source`` if it is not valid."""
    return list(stream_groups([data], source))
