"""Turn what the user names -- S3 URIs, S3 globs, local paths, @manifests -- into input paths.

Everything is expanded and checked before anything is written, so a bad
source leaves the workspace as it was. A manifest's lines are read by
:mod:`s3wq.index.manifests`; whether the S3 objects named exist is asked by
:mod:`s3wq.index.s3_sources`.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import stat
import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3wq.errors import BadManifestLine, BadManifestLines, BadSource, BadWorkspace, ExpansionLimitReached
from s3wq.index.manifests import CONTROL_CHARS, NO_LIMITS, ExpansionLimits, iter_manifest
from s3wq.index.s3_sources import missing_objects, s3_read_error
from s3wq.inputs import ANYTHING, InputPolicy, shown
from s3wq.store import layout, make_s3_client, parse_s3_uri, uri_mistake

_GLOB_CHARS = "*?["
_MISSING = "no such object (or not readable): "


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


def _check_text(source: str) -> str | None:
    """Why ``source`` cannot be a path, or None if it can."""
    if not source:
        return "empty source"
    if CONTROL_CHARS.search(source):
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
        limits: ExpansionLimits = NO_LIMITS,
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
                if (glob_error := globs[source]) is not None:
                    result.add_bad_line(BadManifestLine(manifest, line.number, glob_error))
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
            raise s3_read_error(exc, pattern) from exc
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
