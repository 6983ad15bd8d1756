"""Every reader of olmocr's index reads one version, starts over when olmocr replaces it, and gives up after a few.

olmocr's populate rewrites its index whole. The readers (the groups, the
counts, a part, a populate's look at what is indexed) share one retry
(s3wq.index.olmocr.reads_of_one_version); each is checked here on an index
replaced once while it is read, and on one replaced after every read.
"""

from __future__ import annotations

import pytest

from s3wq.errors import IndexContention
from s3wq.index import SegmentRef, WorkIndex, encode_groups
from s3wq.index import olmocr as olmocr_module
from s3wq.model import Group
from s3wq.store import layout

OLD = [Group(layout.group_hash((f"s3://a/{n}.pdf",)), (f"s3://a/{n}.pdf",)) for n in range(300)]
NEW = [*OLD, *(Group(layout.group_hash((f"s3://b/{n}.pdf",)), (f"s3://b/{n}.pdf",)) for n in range(20))]
WHOLE = SegmentRef(layout.LEGACY_INDEX_KEY, "", None, part=0, parts=1)


class ReplacingBackend:
    """Replaces olmocr's index with the next of ``versions`` after each of the first ``times`` pinned ranged reads."""

    def __init__(self, inner, versions, times):
        self.inner, self.versions, self.times = inner, iter(versions), times

    def read_range(self, key, start, length, etag=None):
        stored = self.inner.read_range(key, start, length, etag)
        if etag is not None and self.times > 0:
            self.times -= 1
            self.inner.write(layout.LEGACY_INDEX_KEY, next(self.versions))
        return stored

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(autouse=True)
def small_fetches(monkeypatch):
    # Several ranged reads per pass, so that a replacement lands in the middle of one.
    monkeypatch.setattr(olmocr_module, "FETCH_BYTES", 256)


READERS = {
    "groups": lambda index: set(index.legacy_groups()),
    "counts": lambda index: index.legacy_counts(),
    "part": lambda index: index.load_ref(WHOLE),
    "populate": lambda index: index.populate([p for g in NEW for p in g.paths], 1).added_paths,
}
# What each reader gives once it has read NEW, the version that replaced OLD.
OF_NEW = {"groups": set(NEW), "counts": (len(NEW), len(NEW)), "part": NEW, "populate": 0}


@pytest.mark.parametrize("reader", READERS)
def test_a_reader_of_an_index_replaced_while_it_reads_reads_the_new_version(local_backend, reader):
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(OLD))
    index = WorkIndex(ReplacingBackend(local_backend, [encode_groups(NEW)], times=1))
    assert READERS[reader](index) == OF_NEW[reader]


@pytest.mark.parametrize("reader", READERS)
def test_a_reader_of_an_index_replaced_after_every_read_gives_up_and_writes_nothing(local_backend, reader):
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(OLD))
    versions = (encode_groups([*OLD, Group(layout.group_hash((f"s3://c/{n}",)), (f"s3://c/{n}",))]) for n in range(10**6))
    index = WorkIndex(ReplacingBackend(local_backend, versions, times=10**6))
    with pytest.raises(IndexContention, match=f"{layout.LEGACY_INDEX_KEY} was replaced {olmocr_module.MAX_LEGACY_READS} times"):
        READERS[reader](index)
    assert not local_backend.exists(layout.INDEX_CATALOG_KEY)
