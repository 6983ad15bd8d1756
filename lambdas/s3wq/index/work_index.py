"""WorkIndex: one workspace's index, whichever layouts it holds, behind one object.

Workers, status and the repairs read through it and populate writes through
it; the layouts themselves live in :mod:`s3wq.index.catalog` (s3wq's
segments), :mod:`s3wq.index.olmocr` (olmocr's single index, read only) and
:mod:`s3wq.index.populate`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator

from s3wq.errors import NoIndex, ObjectNotFound
from s3wq.index.catalog import Catalog, SegmentRef, load_segment, read_catalog
from s3wq.index.olmocr import OlmocrIndex
from s3wq.index.populate import PopulateResult, populate
from s3wq.model import Group
from s3wq.store import Backend, layout


class WorkIndex:
    def __init__(self, backend: Backend):
        self.backend = backend
        # Keeps a walk over olmocr's parts between load_ref calls.
        self._olmocr = OlmocrIndex(backend)

    # --- reading ---------------------------------------------------------

    def read_catalog(self) -> tuple[Catalog, str | None]:
        return read_catalog(self.backend)

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
        frame header (see OlmocrIndex.parts).
        """
        catalog, _ = self.read_catalog()
        refs = [SegmentRef(s.key, s.prefix, s.groups) for s in catalog.segments]
        parts = self._olmocr.parts()
        refs += [SegmentRef(layout.LEGACY_INDEX_KEY, "", None, part=i, parts=parts) for i in range(parts)]
        return refs

    def load(self, key: str) -> list[Group]:
        """Groups of one segment (or olmocr's whole index); IndexCorrupt if undecodable or not what its key names."""
        if key == layout.LEGACY_INDEX_KEY:
            if self._olmocr.head() is None:
                raise ObjectNotFound(key)
            return list(self.legacy_groups())
        return load_segment(self.backend, key)

    def load_ref(self, ref: SegmentRef) -> list[Group]:
        """Groups of one segment, or of one part of olmocr's index (see SegmentRef and OlmocrIndex.load_part)."""
        if ref.key != layout.LEGACY_INDEX_KEY:
            return self.load(ref.key)
        return self._olmocr.load_part(ref.part, ref.parts)

    def legacy_groups(self) -> Iterator[Group]:
        """Every group of olmocr's index (none if there is none), a row at a time, in bounded memory.

        If olmocr replaces its index meanwhile, the new version is read from
        its top, so a group may come twice.
        """
        return self._olmocr.groups()

    def legacy_counts(self) -> tuple[int, int]:
        """Groups and paths in olmocr's index ((0, 0) if there is none), streamed: one version counted, whole."""
        return self._olmocr.counts()

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

    def populate(
        self,
        paths: Iterable[str],
        group_size: int,
        *,
        progress: Callable[[str], None] | None = None,
    ) -> PopulateResult:
        """Add the paths not yet indexed, in new groups of ``group_size``; idempotent (see s3wq.index.populate)."""
        return populate(self.backend, paths, group_size, progress=progress)
