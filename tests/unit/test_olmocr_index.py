"""olmocr's single index, read without holding it: parts a worker walks, every group once, memory bounded by a part.

The index is written in olmocr's format (one zstd frame recording its size)
into a local workspace; parts and fetches are made small so that a few
thousand groups span dozens of parts and hundreds of ranged reads. zstd
hands out text a block (up to 128 KiB of it) at a time, so the tests that
count what is read use an index of many blocks.
"""

from __future__ import annotations

import tracemalloc

import pytest
import zstandard

from s3wq.errors import IndexContention, IndexCorrupt
from s3wq.index import SegmentRef, WorkIndex, decode_groups, encode_groups
from s3wq.index import olmocr as olmocr_module
from s3wq.model import Group
from s3wq.store import layout

PART_CHARS = 4096
FETCH_BYTES = 1024
ZSTD_BLOCK_CHARS = 128 * 1024


@pytest.fixture(autouse=True)
def small_parts(monkeypatch):
    monkeypatch.setattr(olmocr_module, "LEGACY_PART_CHARS", PART_CHARS)
    monkeypatch.setattr(olmocr_module, "FETCH_BYTES", FETCH_BYTES)


def olmocr_groups(count: int, group_size: int = 3, start: int = 0) -> list[Group]:
    groups = []
    for n in range(start, start + count):
        paths = tuple(f"s3://archive/pdfs/doc-{n:06d}-{i}.pdf" for i in range(group_size))
        groups.append(Group(layout.group_hash(paths), paths))
    return groups


def text_of(groups: list[Group]) -> str:
    return zstandard.ZstdDecompressor().decompress(encode_groups(groups)).decode("utf-8")


class CountingBackend:
    """A backend that counts the bytes its ranged reads return, and can replace an object after the n-th of them."""

    def __init__(self, inner):
        self.inner = inner
        self.range_bytes = 0
        self.range_reads = 0
        self.replace_after: tuple[int, str, bytes] | None = None

    def read_range(self, key, start, length, etag=None):
        stored = self.inner.read_range(key, start, length, etag)
        self.range_reads += 1
        self.range_bytes += len(stored.body)
        if self.replace_after is not None and self.range_reads == self.replace_after[0]:
            _, replaced_key, body = self.replace_after
            self.replace_after = None
            self.inner.write(replaced_key, body)
        return stored

    def __getattr__(self, name):
        return getattr(self.inner, name)


def legacy_refs(index: WorkIndex) -> list[SegmentRef]:
    return [r for r in index.segment_refs() if r.key == layout.LEGACY_INDEX_KEY]


def test_parts_hold_every_row_once_each_where_its_text_starts(local_backend):
    groups = olmocr_groups(600)
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(groups))
    index = WorkIndex(local_backend)

    refs = legacy_refs(index)
    parts = [index.load_ref(ref) for ref in refs]

    text = text_of(groups)
    assert len(refs) == -(-len(text.encode()) // PART_CHARS) > 10
    assert [g for part in parts for g in part] == groups
    row_starts = {}
    at = 0
    for group, line in zip(groups, text.splitlines(keepends=True)):
        row_starts[group.hash] = at
        at += len(line)
    for ref, part in zip(refs, parts):
        assert all(ref.part * PART_CHARS <= row_starts[g.hash] < (ref.part + 1) * PART_CHARS for g in part)


@pytest.fixture
def many_blocks(local_backend, monkeypatch) -> list[Group]:
    """About 1.1 MB of index text (nine zstd blocks) in some seventy parts, fetched 4 KiB at a time."""
    monkeypatch.setattr(olmocr_module, "LEGACY_PART_CHARS", 16 * 1024)
    monkeypatch.setattr(olmocr_module, "FETCH_BYTES", 4096)
    groups = olmocr_groups(3000, group_size=10)
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(groups))
    return groups


def test_a_walk_from_any_part_reads_the_index_at_most_twice(local_backend, many_blocks):
    data = local_backend.read(layout.LEGACY_INDEX_KEY).body
    counting = CountingBackend(local_backend)
    index = WorkIndex(counting)
    refs = legacy_refs(index)
    first = len(refs) * 2 // 3
    header_bytes = counting.range_bytes

    walked = [g for ref in refs[first:] + refs[:first] for g in index.load_ref(ref)]

    assert sorted(g.hash for g in walked) == sorted(g.hash for g in many_blocks)
    # Once through from the top (past the first parts), then once more up to
    # where the walk began, and at most a block and a fetch beyond.
    block_bytes = len(data) * ZSTD_BLOCK_CHARS / len(text_of(many_blocks))
    assert counting.range_bytes - header_bytes <= len(data) * (1 + first / len(refs)) + block_bytes + 4096


def test_parts_walked_in_order_read_the_index_once(local_backend, many_blocks):
    data = local_backend.read(layout.LEGACY_INDEX_KEY).body
    counting = CountingBackend(local_backend)
    index = WorkIndex(counting)
    refs = legacy_refs(index)
    header_bytes = counting.range_bytes

    for ref in refs:
        index.load_ref(ref)

    assert counting.range_bytes - header_bytes == len(data)


def test_an_index_olmocr_rewrites_mid_walk_is_walked_in_its_new_version(local_backend, many_blocks):
    # olmocr's populate keeps the rows it had and writes the new ones after them.
    new = many_blocks + olmocr_groups(100, start=len(many_blocks), group_size=10)
    index = WorkIndex(local_backend)
    refs = legacy_refs(index)
    third = len(refs) // 3

    walked = [g for ref in refs[:third] for g in index.load_ref(ref)]
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(new))
    walked += [g for ref in refs[third:] for g in index.load_ref(ref)]

    # Each group of the version the walk was planned on, once; the ones added come in its last part.
    assert walked == new


def test_an_index_replaced_while_a_part_is_read_is_read_again_from_its_top(local_backend):
    old = olmocr_groups(400)
    new = old + olmocr_groups(50, start=400)
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(old))
    counting = CountingBackend(local_backend)
    index = WorkIndex(counting)
    refs = legacy_refs(index)
    counting.replace_after = (counting.range_reads + 3, layout.LEGACY_INDEX_KEY, encode_groups(new))

    walked = [g for ref in refs for g in index.load_ref(ref)]

    assert walked == new


def test_an_index_replaced_on_every_read_gives_up(local_backend, monkeypatch):
    groups = olmocr_groups(100)
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(groups))
    index = WorkIndex(local_backend)
    [ref, *_] = legacy_refs(index)
    real_read_range = type(local_backend).read_range
    versions = iter(range(10**6))

    def replaced_after_each_read(self, key, start, length, etag=None):
        stored = real_read_range(self, key, start, length, etag)
        self.write(key, encode_groups(groups + olmocr_groups(1, start=200 + next(versions))))
        return stored

    monkeypatch.setattr(type(local_backend), "read_range", replaced_after_each_read)
    with pytest.raises(IndexContention, match=layout.LEGACY_INDEX_KEY):
        index.load_ref(ref)


def test_an_index_whose_header_records_no_size_is_measured_by_reading_it(local_backend):
    groups = olmocr_groups(300)
    text = text_of(groups).encode()
    local_backend.write(layout.LEGACY_INDEX_KEY, zstandard.ZstdCompressor(write_content_size=False).compress(text))
    index = WorkIndex(local_backend)

    refs = legacy_refs(index)

    assert len(refs) == -(-len(text) // PART_CHARS)
    assert [g for ref in refs for g in index.load_ref(ref)] == groups


def test_frames_after_the_first_are_walked_in_the_last_part(local_backend):
    # Only the first frame's size is known up front: the parts cover it, and the last part takes what follows.
    first, rest = olmocr_groups(100), olmocr_groups(300, start=100)
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(first) + encode_groups(rest))
    index = WorkIndex(local_backend)

    refs = legacy_refs(index)

    assert len(refs) == -(-len(text_of(first).encode()) // PART_CHARS)
    assert [g for ref in refs for g in index.load_ref(ref)] == first + rest


@pytest.mark.parametrize(
    "body, error",
    [
        pytest.param(b"", "empty", id="empty"),
        pytest.param(b"not zstd at all", "not a zstd CSV index", id="not-zstd"),
        pytest.param(encode_groups(olmocr_groups(300))[:-40], "truncated", id="truncated"),
    ],
)
def test_a_damaged_index_is_corrupt_to_every_reader(local_backend, body, error):
    local_backend.write(layout.LEGACY_INDEX_KEY, body)
    index = WorkIndex(local_backend)

    with pytest.raises(IndexCorrupt, match=error):
        for ref in legacy_refs(index):
            index.load_ref(ref)
    with pytest.raises(IndexCorrupt, match=error):
        list(index.iter_groups())
    with pytest.raises(IndexCorrupt, match=error):
        index.populate(["s3://archive/new.pdf"], 1)


def test_no_olmocr_index_means_no_parts(local_backend):
    assert WorkIndex(local_backend).segment_refs() == []
    assert list(WorkIndex(local_backend).legacy_groups()) == []


# --- memory -----------------------------------------------------------------------------------------


def traced_peak(action) -> int:
    """The most memory Python objects took while ``action`` ran (zstd's own buffers are not traced)."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.fixture
def big_olmocr_index(local_backend, monkeypatch) -> tuple[list[Group], int]:
    """About 3.7 MB of index text, 10,000 groups of ten paths, in parts of 64 KiB; and what decoding it whole takes."""
    monkeypatch.setattr(olmocr_module, "LEGACY_PART_CHARS", 64 * 1024)
    monkeypatch.setattr(olmocr_module, "FETCH_BYTES", 16 * 1024)
    groups = olmocr_groups(10_000, group_size=10)
    data = encode_groups(groups)
    local_backend.write(layout.LEGACY_INDEX_KEY, data)
    # The local backend hashes a file once for its ETag: done here, not in the measured reads.
    local_backend.read_range(layout.LEGACY_INDEX_KEY, 0, 1)
    return groups, traced_peak(lambda: decode_groups(data, "x"))


def test_loading_the_last_part_takes_a_part_of_memory_not_the_index(local_backend, big_olmocr_index):
    _, whole = big_olmocr_index
    index = WorkIndex(local_backend)
    refs = legacy_refs(index)

    # The last part is reached by reading every part before it.
    streamed = traced_peak(lambda: index.load_ref(refs[-1]))

    assert len(refs) > 50
    assert streamed < whole / 10


def test_iter_groups_holds_hashes_not_the_index(local_backend, big_olmocr_index):
    groups, whole = big_olmocr_index
    counted = 0

    def count() -> None:
        nonlocal counted
        counted = sum(1 for _ in WorkIndex(local_backend).iter_groups())

    streamed = traced_peak(count)

    assert counted == len(groups)
    assert streamed < whole / 4


def test_populate_over_an_olmocr_index_keeps_its_hashes_not_its_paths(local_backend, big_olmocr_index):
    groups, whole = big_olmocr_index
    old_paths = [p for g in groups[:5] for p in g.paths]
    new_paths = [f"s3://archive/new/{n}.pdf" for n in range(20)]
    result = None

    def populate() -> None:
        nonlocal result
        result = WorkIndex(local_backend).populate(old_paths + new_paths, 10)

    streamed = traced_peak(populate)

    assert (result.added_paths, result.already_indexed, result.groups) == (20, len(old_paths), len(groups) + 2)
    assert streamed < whole / 4
