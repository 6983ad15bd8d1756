"""Reading a manifest: its lines streamed in bounded memory, each a source or the reason it is not one.

A manifest is a local file or an S3 object, plain, gzip or zstd, read to its
end or refused: a manifest cut short must not pass for a shorter one. Also
the limits of an expansion (:class:`ExpansionLimits`), most of which bound
what a manifest can make populate read.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import zstandard
from botocore.exceptions import BotoCoreError, ClientError

from s3wq.errors import BadSource, ExpansionLimitReached
from s3wq.index.s3_sources import s3_read_error
from s3wq.store import parse_s3_uri


@dataclass(frozen=True)
class ExpansionLimits:
    """How much one expansion may read, hold and take: None is no limit (the command line, on the user's machine).

    Past a limit the expansion raises BadSource naming it, and nothing is
    indexed: a manifest is read whole or not at all.
    """

    manifest_bytes: int | None = None  # decompressed, per manifest
    manifest_lines: int | None = None  # per manifest, blank lines and comments included
    paths: int | None = None  # named and matched, in all
    keys_listed: int | None = None  # by the listings of all globs, matched or not
    deadline: float | None = None  # time.monotonic() by which expanding must be done


# No limit at all: the command line's, on the user's machine.
NO_LIMITS = ExpansionLimits()


# The deployed populate's limits, for a 3,008 MB, 900 s Lambda. Measured (1M
# distinct s3:// lines of 75 bytes, checkInputs off): expanding holds about 120
# bytes a path, indexing them about 210 at its peak, and reading takes about
# 10 us a line. With checkInputs on, the existence check holds about 130 more a
# path (estimated: an entry and a list of one pair). 5M paths so peak at about 1.7 GB, leaving room for the runtime; a
# manifest of 5M S3 URIs of ~100 bytes is ~500 MB, so 1 GiB decompressed admits
# any such manifest with comments, and refuses a zstd bomb after a few seconds.
# 10M lines bounds the time spent on blank lines (1 GiB of them is 1G lines).
DEPLOYED_MAX_MANIFEST_BYTES = 1 << 30
DEPLOYED_MAX_MANIFEST_LINES = 10_000_000
DEPLOYED_MAX_PATHS = 5_000_000
# 10,000 LIST pages: about 10 minutes at S3's ~50 ms a page, the most a glob can be worth in 900 s.
DEPLOYED_MAX_KEYS_LISTED = 10_000_000


def deployed_limits(deadline: float | None) -> ExpansionLimits:
    return ExpansionLimits(
        manifest_bytes=DEPLOYED_MAX_MANIFEST_BYTES,
        manifest_lines=DEPLOYED_MAX_MANIFEST_LINES,
        paths=DEPLOYED_MAX_PATHS,
        keys_listed=DEPLOYED_MAX_KEYS_LISTED,
        deadline=deadline,
    )


# What no source holds: C0 controls but the tab (a character keys may hold), DEL, and C1
# (U+009B is a terminal's CSI, as ESC [ is).
CONTROL_CHARS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# C0 as bytes, named by their column before a line is decoded (DEL and C1 are named once it is).
_C0_BYTES = re.compile(rb"[\x00-\x08\x0a-\x1f]")


def _open_manifest(name: str, s3_client: Callable[[], Any]) -> Any:
    """A binary stream of the manifest's lines, decompressed."""
    if name.startswith("s3://"):
        bucket, key = parse_s3_uri(name)
        try:
            raw: Any = s3_client().get_object(Bucket=bucket, Key=key)["Body"]
        except (ClientError, BotoCoreError) as exc:
            raise s3_read_error(exc, f"manifest {name}") from exc
    else:
        try:
            raw = open(name, "rb")
        except OSError as exc:
            raise BadSource(f"cannot read manifest {name}: {exc.strerror}") from exc
    if name.endswith(".gz"):
        raw = gzip.GzipFile(fileobj=raw)
    elif name.endswith((".zst", ".zstd")):
        raw = io.BufferedReader(_StrictZstdReader(raw))
    return raw


class _StrictZstdReader(io.RawIOBase):
    """Streams the frames of a zstd file and, unlike zstandard's stream_reader, raises
    EOFError when the input ends inside a frame: a cut-short manifest must not pass
    for a shorter one."""

    _CHUNK = 1 << 16
    # Compressed bytes handed to zstd at a time: decompressobj() has no output
    # limit, and a block of up to 128 KiB of text can take 4 bytes, so 64 KiB
    # at once could be 2 GiB of text (32 KB was measured giving 1 GiB). 256
    # bytes give 8 MiB at most, and a real manifest's a few KiB.
    _FEED = 1 << 8

    def __init__(self, raw: Any):
        self._raw = raw
        self._decompressor: zstandard.ZstdDecompressionObj | None = None
        self._input = memoryview(b"")
        # Text decompressed and not yet read, from _offset on: an offset, not a
        # slice, so each read copies only what it hands out.
        self._pending = bytearray()
        self._offset = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._offset == len(self._pending):
            self._pending.clear()
            self._offset = 0
            if not self._input:
                chunk = self._raw.read(self._CHUNK)
                if not chunk:
                    if self._decompressor is not None and not self._decompressor.eof:
                        raise EOFError("the zstd stream ends inside a frame (truncated file)")
                    return 0
                self._input = memoryview(chunk)
            data: memoryview | bytes
            data, self._input = self._input[: self._FEED], self._input[self._FEED :]
            while data:
                if self._decompressor is None or self._decompressor.eof:
                    self._decompressor = zstandard.ZstdDecompressor().decompressobj()
                self._pending += self._decompressor.decompress(data)
                data = self._decompressor.unused_data if self._decompressor.eof else b""
        size = min(len(buffer), len(self._pending) - self._offset)
        buffer[:size] = memoryview(self._pending)[self._offset : self._offset + size]
        self._offset += size
        return size

    def close(self) -> None:
        self._raw.close()
        super().close()


# A manifest line is a source: an S3 URI (a key is at most 1,024 bytes) or a
# local path (PATH_MAX is 4,096). A longer line is a bad line, and reading it
# holds this much of it at most, however long it is.
MAX_MANIFEST_LINE_BYTES = 8192
_READ_CHUNK_BYTES = 1 << 16
_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ManifestLine:
    """A line of a manifest that is neither blank nor a comment: its source, or why it is not one."""

    number: int
    source: str = ""
    problem: str | None = None


def _too_big(name: str, limit: int) -> BadSource:
    return ExpansionLimitReached(
        f"{name}: manifest larger than {limit:,} bytes decompressed (the most populate reads of one manifest); split it"
    )


def _bounded_lines(stream: Any, cap: int, name: str, max_bytes: int | None = None) -> Iterator[tuple[bytes, bool]]:
    """Each line of ``stream`` without its newline, cut to ``cap`` bytes, and whether it was longer.

    Read a chunk at a time: past ``cap``, the rest of a line is skipped up to
    its newline, never kept, so a line of any length costs ``cap`` plus a chunk.
    Past ``max_bytes`` read in all, BadSource: a small compressed file can hold
    any amount of text.
    """
    head, long = b"", False
    total = 0
    while True:
        chunk = stream.read(_READ_CHUNK_BYTES)
        if not chunk:
            break
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise _too_big(name, max_bytes)
        *ended, rest = chunk.split(b"\n")
        for piece in ended:
            if not long:
                head += piece
            yield head[:cap], long or len(head) > cap
            head, long = b"", False
        if not long:
            head += rest
            if len(head) > cap:
                head, long = head[:cap], True
    if head or long:
        yield head[:cap], long or len(head) > cap


def _line_problem(raw: bytes, long: bool) -> str | None:
    """Why the bytes of a manifest line (its newline and a trailing CR removed) are not a source, or None."""
    if long:
        return f"longer than {MAX_MANIFEST_LINE_BYTES:,} bytes: no S3 URI or local path is that long"
    found = _C0_BYTES.search(raw)
    if found:
        byte = raw[found.start()]
        return f"{'NUL byte' if byte == 0 else f'control character 0x{byte:02x}'} at byte {found.start() + 1}"
    if raw.isascii() and b"\x7f" not in raw:
        return None  # the common case
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} ({exc.reason})"
    control = CONTROL_CHARS.search(text)
    return None if control is None else f"control character U+{ord(control.group()):04X}"


def iter_manifest(
    name: str, s3_client: Callable[[], Any], *, max_bytes: int | None = None, max_lines: int | None = None
) -> Iterator[ManifestLine]:
    """Each line of a manifest that is neither blank nor a comment, numbered: a source, or its problem.

    Streamed, in bounded memory whatever a line holds: a line that is not
    UTF-8, holds a control byte or is too long is a bad line, and the lines
    after it are read as usual. A stream that cannot be read to its end (a
    truncated gzip or zstd file, a broken connection) raises BadSource: a
    manifest cut short must not pass for a shorter one. So does one of more
    than ``max_bytes`` decompressed, or ``max_lines`` lines (blank ones too).
    """
    stream = _open_manifest(name, s3_client)
    try:
        # One byte more than the cap: the CR of a CRLF ending is not part of the line.
        for number, (raw, long) in enumerate(_bounded_lines(stream, MAX_MANIFEST_LINE_BYTES + 1, name, max_bytes), start=1):
            if max_lines is not None and number > max_lines:
                raise ExpansionLimitReached(
                    f"{name}: manifest of more than {max_lines:,} lines (the most populate reads of one manifest); split it"
                )
            if number == 1 and raw.startswith(_BOM):  # editors on Windows start files with a byte-order mark
                raw = raw[len(_BOM) :]
            raw = raw.rstrip(b"\r")
            long = long or len(raw) > MAX_MANIFEST_LINE_BYTES
            if (not long and not raw.strip()) or raw.lstrip().startswith(b"#"):
                continue
            problem = _line_problem(raw, long)
            yield ManifestLine(number, problem=problem) if problem else ManifestLine(number, raw.decode("utf-8"))
    except (OSError, EOFError, zstandard.ZstdError) as exc:
        raise BadSource(f"manifest {name} is unreadable: {exc}") from exc
    finally:
        stream.close()
