"""Turn what the user names -- S3 URIs, S3 globs, local paths, @manifests -- into input paths.

Everything is expanded and checked before anything is written, so a bad
source leaves the workspace as it was.
"""

from __future__ import annotations

import fnmatch
import glob
import gzip
import io
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import zstandard
from botocore.exceptions import BotoCoreError, ClientError

from s3wq.errors import BadManifestLine, BadManifestLines, BadSource, BadWorkspace, ExpansionLimitReached, StorageError
from s3wq.inputs import ANYTHING, InputPolicy, shown
from s3wq.store import MAX_PARALLEL_REQUESTS, layout, make_s3_client, parse_s3_uri, uri_mistake

_GLOB_CHARS = "*?["
_MISSING = "no such object (or not readable): "
# S3 answers that mean "the user named something that is not there", as
# opposed to the store failing.
_USER_ERROR_CODES = {"NoSuchBucket", "NoSuchKey", "404", "AccessDenied", "403", "InvalidBucketName"}


def _s3_error(exc: Exception, what: str) -> Exception:
    if isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") in _USER_ERROR_CODES:
        return BadSource(f"cannot read {what}: {exc.response['Error'].get('Code')}")
    return StorageError(f"cannot read {what}: {exc}")


# Bad lines kept, with their reasons, of all the manifests of one expansion; the
# rest are only counted. A hostile manifest can hold millions (a 3 KB gzip
# file holds a million), at about 850 bytes each kept; the record populate
# writes and the CLI's report list this many at most anyway.
MAX_BAD_LINES_KEPT = 1000


@dataclass
class Expansion:
    paths: list[str] = field(default_factory=list)
    # The first MAX_BAD_LINES_KEPT bad lines, by manifest and line number; bad_line_count counts them all.
    bad_lines: list[BadManifestLine] = field(default_factory=list)
    bad_line_count: int = 0

    def add_bad_line(self, bad: BadManifestLine) -> None:
        self.bad_line_count += 1
        if len(self.bad_lines) < MAX_BAD_LINES_KEPT:
            self.bad_lines.append(bad)


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


# The first segment of every key a workspace writes (layout): at a bucket's root, these are the workspace's.
_WORKSPACE_TOPS = frozenset(
    key.split("/")[0]
    for key in (
        layout.LEGACY_INDEX_KEY,
        layout.LOCKS_PREFIX,
        layout.DONE_PREFIX,
        layout.FAILED_PREFIX,
        layout.RESULTS_PREFIX,
        layout.INDEX_CATALOG_KEY,
        layout.INPUT_ERRORS_PREFIX,
        layout.MANIFEST_ERRORS_PREFIX,
        layout.MANIFESTS_DIR,
    )
)


def _has_glob(text: str) -> bool:
    return any(c in text for c in _GLOB_CHARS)


# What no source holds: C0 controls but the tab (a character keys may hold), DEL, and C1
# (U+009B is a terminal's CSI, as ESC [ is).
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# C0 as bytes, named by their column before a line is decoded (DEL and C1 are named once it is).
_C0_BYTES = re.compile(rb"[\x00-\x08\x0a-\x1f]")


def _check_text(source: str) -> str | None:
    """Why ``source`` cannot be a path, or None if it can."""
    if not source:
        return "empty source"
    if _CONTROL.search(source):
        return "control character in source"
    mistake = uri_mistake(source)
    if mistake:
        return mistake
    if source.startswith("s3://"):
        try:
            _, key = parse_s3_uri(source)
        except BadWorkspace as exc:
            return str(exc)
        if not key:
            return f"no object key in {source!r}"
        if len(key.encode("utf-8")) > 1024:
            return "S3 key longer than 1,024 bytes"
    return None


def _open_manifest(name: str, s3_client: Callable[[], Any]) -> Any:
    """A binary stream of the manifest's lines, decompressed."""
    if name.startswith("s3://"):
        bucket, key = parse_s3_uri(name)
        try:
            raw: Any = s3_client().get_object(Bucket=bucket, Key=key)["Body"]
        except (ClientError, BotoCoreError) as exc:
            raise _s3_error(exc, f"manifest {name}") from exc
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
        self._decompressor = None
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
    control = _CONTROL.search(text)
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


# Objects of one folder checked one HEAD each, up to this many; more are
# checked by listing the folder from the first of them to the last.
_HEAD_AT_MOST = 4


class SourceExpander:
    """Expand sources with one lazily created S3 client.

    ``check``: every plain ``s3://`` path is checked to exist (as a local
    path is), costing a HEAD per object or a LIST page per 1,000 keys of its
    folder, whichever is less; off for manifests too big to check.
    ``exclude``: a local folder whose files are never sources (the workspace,
    when it lies inside a folder being indexed).
    ``policy``: what may be named at all (:mod:`s3wq.inputs`); deployed, S3
    only and in the allowed locations. A source it refuses is never looked
    at: no local file is opened or listed, no other bucket asked.
    ``exclude_s3``: a workspace on S3, ``(bucket, prefix)``, whose keys no
    glob matches (a glob over the workspace bucket must not index the
    workspace's own manifests, index, locks and results).
    ``limits``: how much an expansion may read, hold and take (ExpansionLimits).
    """

    def __init__(
        self,
        s3_client: Any = None,
        *,
        check: bool = True,
        exclude: str | None = None,
        policy: InputPolicy = ANYTHING,
        exclude_s3: tuple[str, str] | None = None,
        limits: ExpansionLimits = ExpansionLimits(),
    ):
        self._s3 = s3_client
        self.check = check
        self.exclude = None if exclude is None else os.path.realpath(exclude)
        self.policy = policy
        self.exclude_s3 = exclude_s3
        self.limits = limits
        self._started = time.monotonic()
        self._paths = 0
        self._keys_listed = 0

    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = make_s3_client()
        return self._s3

    def expand(self, sources: list[str], *, strict: bool = True) -> Expansion:
        """Paths named by ``sources``; every bad manifest line is collected, with its number.

        Each manifest line is indexed or is a bad line, never both: a line
        whose glob matched one path the policy refuses is bad as a whole.
        With ``strict``, any bad line raises BadManifestLines, carrying all
        of them, once every source has been read; otherwise the bad lines are
        returned and the valid ones kept. A bad source named directly (not in
        a manifest) raises at once.

        A relative path in a manifest file is relative to the manifest's
        folder, so a manifest can be moved together with its inputs; in a
        stream (``@/dev/stdin``, ``@<(find ...)``) it is relative to the
        current directory, as the command that wrote it meant.
        """
        result = Expansion()
        self._started, self._paths, self._keys_listed = time.monotonic(), 0, 0
        # Plain s3:// paths, checked together once everything is expanded: where each came from.
        # (Held in memory, one entry a path: a manifest too big for that wants --no-check.)
        unchecked: dict[str, list[tuple[str, int]]] = {}
        # A source named twice names the same paths: it is expanded once (a glob is listed once).
        sources = list(dict.fromkeys(sources))
        for source in sources:
            if source.startswith("@"):
                manifest = source[1:]
                reason = self.policy.manifest_refusal(manifest)
                if reason:
                    raise BadSource(reason)
                self._expand_manifest(manifest, result, unchecked)
                continue
            reason = self.policy.refusal(source)
            if reason:
                raise BadSource(reason)
            reason = _check_text(source)
            if reason:
                raise BadSource(f"{source!r}: {reason}")
            paths = self._expand_one(source)
            self._refuse_matches(source, paths)
            if self.check and source.startswith("s3://") and not _has_glob(source):
                unchecked.setdefault(source, [])
            self._add_paths(result, paths, source)
        if self.check and unchecked:
            self._check_time("checking that the inputs exist")
            self._drop_missing(result, unchecked)
        order = {source[1:]: position for position, source in enumerate(sources) if source.startswith("@")}
        result.bad_lines.sort(key=lambda b: (order.get(b.manifest, 0), b.line_number))
        del result.bad_lines[MAX_BAD_LINES_KEPT:]
        if strict and result.bad_lines:
            missing = any(b.reason.startswith(_MISSING) for b in result.bad_lines)
            hint = " (--no-check skips the check that objects exist)" if missing else ""
            raise BadManifestLines(result.bad_lines, hint, count=result.bad_line_count)
        return result

    def _add_paths(self, result: Expansion, paths: list[str], source: str) -> None:
        self._paths += len(paths)
        limit = self.limits.paths
        if limit is not None and self._paths > limit:
            raise ExpansionLimitReached(
                f"{shown(source)}: more than {limit:,} paths in all (the most one populate indexes); split the manifest"
            )
        result.paths.extend(paths)

    def _out_of_time(self) -> bool:
        return self.limits.deadline is not None and time.monotonic() > self.limits.deadline

    def _check_time(self, doing: str) -> None:
        """ExpansionLimitReached once the deadline has passed: stopped with a reason, before the runtime kills us."""
        if self._out_of_time():
            raise ExpansionLimitReached(
                f"populate ran out of time after {time.monotonic() - self._started:.0f} s, {doing} "
                f"({self._paths:,} paths found so far): nothing indexed; split the manifest"
            )

    def _expand_manifest(self, manifest: str, result: Expansion, unchecked: dict[str, list[tuple[str, int]]]) -> None:
        base = _manifest_folder(manifest)
        # Each glob's outcome, so a glob repeated on many lines is listed once: None, or why it is bad.
        globs: dict[str, str | None] = {}
        limits = self.limits
        for line in iter_manifest(manifest, self.s3, max_bytes=limits.manifest_bytes, max_lines=limits.manifest_lines):
            if self._out_of_time():
                self._check_time(f"at line {line.number:,} of {manifest}")
            source = line.source
            # The policy first: deployed, what is not an s3:// URI in the allowed buckets is refused as such,
            # not answered with advice about local paths the deployment would never read.
            reason = line.problem or self.policy.refusal(source) or _check_text(source)
            if reason:
                result.add_bad_line(BadManifestLine(manifest, line.number, reason))
                continue
            if base is not None and "://" not in source and not os.path.isabs(source):
                source = os.path.join(base, source)
            if _has_glob(source) and source in globs:
                if globs[source] is not None:
                    result.add_bad_line(BadManifestLine(manifest, line.number, globs[source]))
                continue
            try:
                paths = self._expand_one(source)
                self._refuse_matches(source, paths)
            except ExpansionLimitReached:
                raise  # the whole expansion stops, not this line
            except BadSource as exc:
                if _has_glob(source):
                    globs[source] = str(exc)
                result.add_bad_line(BadManifestLine(manifest, line.number, str(exc)))
                continue
            if _has_glob(source):
                globs[source] = None
            if self.check and source.startswith("s3://") and not _has_glob(source):
                unchecked.setdefault(source, []).append((manifest, line.number))
            self._add_paths(result, paths, f"line {line.number:,} of {manifest}")

    def _refuse_matches(self, source: str, paths: list[str]) -> None:
        """BadSource if the policy refuses any path ``source`` expanded to (a listed key with a '..' segment)."""
        for path in paths:
            reason = self.policy.refusal(path, literal=True)
            if reason:
                raise BadSource(f"{shown(source)} matched {reason}")

    def _drop_missing(self, result: Expansion, unchecked: dict[str, list[tuple[str, int]]]) -> None:
        missing = missing_objects(self.s3(), list(unchecked))
        if not missing:
            return
        named = sorted(path for path in missing if not unchecked[path])
        if named:
            more = f" (and {len(missing) - 1} more; --no-check skips this check)" if len(missing) > 1 else ""
            raise BadSource(f"{_MISSING}{named[0]}{more}")
        for path in missing:
            for manifest, number in unchecked[path]:
                result.add_bad_line(BadManifestLine(manifest, number, f"{_MISSING}{path}"))
        result.paths = [p for p in result.paths if p not in missing]

    def _in_workspace(self, bucket: str, key: str) -> bool:
        if self.exclude_s3 is None or bucket != self.exclude_s3[0]:
            return False
        prefix = self.exclude_s3[1].strip("/")
        return key.startswith(prefix + "/") if prefix else key.split("/")[0] in _WORKSPACE_TOPS

    def _excluded(self, path: str) -> bool:
        return self.exclude is not None and (path == self.exclude or path.startswith(self.exclude + os.sep))

    def _local_files(self, paths: list[str]) -> list[str]:
        """``paths`` made absolute, the excluded folder's left out; BadSource naming those that cannot be read."""
        kept = [p for p in (os.path.abspath(p) for p in paths) if not self._excluded(os.path.realpath(p))]
        problems = [(p, problem) for p in kept if (problem := _file_problem(p))]
        if problems:
            listed = ", ".join(f"{p!r} ({problem})" for p, problem in problems[:_PROBLEMS_NAMED])
            more = f" and {len(problems) - _PROBLEMS_NAMED} more" if len(problems) > _PROBLEMS_NAMED else ""
            raise BadSource(f"cannot read {listed}{more}")
        return kept

    def _expand_one(self, source: str) -> list[str]:
        if source.startswith("s3://"):
            return self._expand_s3(source) if _has_glob(source) else [source]
        if _has_glob(source):
            # Folders a pattern matches are not inputs; anything else it matches is, and must be readable.
            matches = self._local_files(sorted(p for p in glob.glob(source, recursive=True) if not os.path.isdir(p)))
            if not matches:
                raise BadSource(f"{source!r} matched no files")
            return matches
        if os.path.isdir(source):
            found = self._local_files([os.path.join(d, f) for d, _, files in os.walk(source, onerror=_unreadable) for f in files])
            if not found:
                raise BadSource(f"directory {source!r} holds no files")
            return sorted(found)
        if os.path.isfile(source):
            if not os.access(source, os.R_OK):
                raise BadSource(f"cannot read {source!r}: permission denied")
            return [os.path.abspath(source)]
        if not _searchable(source):
            raise BadSource(f"cannot read {source!r}: permission denied")
        raise BadSource(f"no such file or directory: {source!r}")

    def _expand_s3(self, pattern: str) -> list[str]:
        bucket, key_pattern = parse_s3_uri(pattern)
        cut = min(key_pattern.find(c) for c in _GLOB_CHARS if c in key_pattern)
        prefix = key_pattern[:cut]
        matches = []
        limit = self.limits.keys_listed
        try:
            for page in self.s3().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                self._check_time(f"listing {shown(pattern)}")
                contents = page.get("Contents", [])
                self._keys_listed += len(contents)
                if limit is not None and self._keys_listed > limit:
                    raise ExpansionLimitReached(
                        f"{shown(pattern)}: globs listed more than {limit:,} keys in all (the most one populate lists); name a narrower prefix"
                    )
                for item in contents:
                    if fnmatch.fnmatchcase(item["Key"], key_pattern) and not self._in_workspace(bucket, item["Key"]):
                        matches.append(f"s3://{bucket}/{item['Key']}")
        except (ClientError, BotoCoreError) as exc:
            raise _s3_error(exc, pattern) from exc
        if not matches:
            raise BadSource(f"{pattern!r} matched no objects")
        return matches


def _manifest_folder(manifest: str) -> str | None:
    """The folder relative paths in ``manifest`` start from: its own, if it is a local regular file."""
    if manifest.startswith("s3://"):
        return None
    try:
        regular = stat.S_ISREG(os.stat(manifest).st_mode)
    except OSError:
        return None  # unreadable: iter_manifest says so
    return os.path.dirname(os.path.abspath(manifest)) if regular else None


def _searchable(path: str) -> bool:
    """Whether the nearest folder above ``path`` that exists may be looked into (else "no such file" would be a guess)."""
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(folder) and folder != os.path.dirname(folder):
        folder = os.path.dirname(folder)
    return os.access(folder, os.X_OK)


# A folder or pattern with unreadable files names this many of them in its error.
_PROBLEMS_NAMED = 5


def _file_problem(path: str) -> str | None:
    """Why a file that a folder or a pattern holds cannot be an input, or None: what naming it directly would find."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "a dangling symlink" if os.path.islink(path) else exc.strerror
    if not stat.S_ISREG(mode):
        return "not a regular file"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


def _unreadable(exc: OSError) -> None:
    # os.walk skips a folder it cannot read; a folder of inputs must not quietly shrink.
    raise BadSource(f"cannot read directory {exc.filename!r}: {exc.strerror}")


def missing_objects(s3: Any, uris: list[str]) -> set[str]:
    """Which of ``uris`` (plain ``s3://bucket/key``) name no object this client may read.

    Grouped by folder: up to _HEAD_AT_MOST objects of a folder cost a HEAD
    each; more are found by listing the folder from just before the first of
    them to the last, a thousand keys a page. A listing never costs more
    requests than the HEADs it replaces: past one page per wanted key (a few
    keys scattered over a huge folder) the keys not reached yet are checked
    one HEAD each, as they are when the caller may read but not list.
    Folders are checked MAX_PARALLEL_REQUESTS at a time.
    """
    folders: dict[tuple[str, str], list[str]] = {}
    for uri in uris:
        bucket, key = parse_s3_uri(uri)
        folders.setdefault((bucket, key[: key.rfind("/") + 1]), []).append(key)

    def check(item: tuple[tuple[str, str], list[str]]) -> list[str]:
        (bucket, folder), keys = item
        keys = sorted(keys)
        missing, unknown = ([], keys) if len(keys) <= _HEAD_AT_MOST else _check_by_listing(s3, bucket, folder, keys)
        missing += [k for k in unknown if not _head_exists(s3, bucket, k)]
        return [f"s3://{bucket}/{k}" for k in missing]

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_REQUESTS, len(folders))) as pool:
        return {uri for missing in pool.map(check, folders.items()) for uri in missing}


def _check_by_listing(s3: Any, bucket: str, folder: str, keys: list[str]) -> tuple[list[str], list[str]]:
    """List ``folder`` across ``keys`` (sorted), a page per key at most: (keys listed past and absent, keys not reached)."""
    wanted = set(keys)
    found: set[str] = set()
    listed_to = ""
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder, StartAfter=keys[0][:-1])
        for number, page in enumerate(pages, start=1):
            contents = page.get("Contents", [])
            found.update(item["Key"] for item in contents if item["Key"] in wanted)
            if not page.get("IsTruncated") or not contents:
                listed_to = keys[-1]  # the folder ends here: every key is accounted for
                break
            listed_to = contents[-1]["Key"]
            if listed_to >= keys[-1] or number >= len(keys):
                break
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code")
        if code == "NoSuchBucket":
            return keys, []
        if code in _USER_ERROR_CODES:
            return [], keys  # may read but not list: a HEAD each tells which
        raise StorageError(f"cannot list s3://{bucket}/{folder}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot list s3://{bucket}/{folder}: {exc}") from exc
    absent = [k for k in keys if k not in found and k <= listed_to]
    return absent, [k for k in keys if k > listed_to]


def _head_exists(s3: Any, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _USER_ERROR_CODES:
            return False
        raise StorageError(f"cannot check s3://{bucket}/{key}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot check s3://{bucket}/{key}: {exc}") from exc
