"""WorkIndex.populate on a local workspace: idempotence, grouping, segmenting, and refusing to build on a corrupt index."""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from s3wq.errors import ConfigError, IndexCorrupt
from s3wq.index import Catalog, WorkIndex, encode_groups
from s3wq.index import catalog as catalog_module
from s3wq.model import Group
from s3wq.store import LocalBackend, layout


def input_paths(n: int, start: int = 0) -> list[str]:
    return [f"s3://inputs/doc-{i:05d}.pdf" for i in range(start, start + n)]


def all_groups(backend) -> list[Group]:
    return list(WorkIndex(backend).iter_groups())


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_partition(groups: list[Group], paths: list[str]) -> None:
    counts = Counter(p for g in groups for p in g.paths)
    assert set(counts) == set(paths)
    assert set(counts.values()) == {1}


def test_populate_groups_paths_and_names_them_by_olmocr_hash(local_backend):
    paths = input_paths(23)
    result = WorkIndex(local_backend).populate(paths, group_size=5)

    groups = all_groups(local_backend)
    assert (result.added_paths, result.added_groups, result.groups, result.paths) == (23, 5, 5, 23)
    assert_partition(groups, paths)
    assert sorted(len(g.paths) for g in groups) == [3, 5, 5, 5, 5]
    assert all(g.hash == layout.group_hash(g.paths) for g in groups)
    # Chunks of the sorted input, as olmocr makes them: the short group holds the last paths.
    short = next(g for g in groups if len(g.paths) == 3)
    assert short.paths == tuple(sorted(paths)[-3:])


def test_populate_same_paths_twice_adds_nothing(local_backend, local_workspace):
    index = WorkIndex(local_backend)
    paths = input_paths(30)
    index.populate(paths, group_size=4)
    before = snapshot(Path(local_workspace))

    again = index.populate(list(reversed(paths)), group_size=4)

    assert (again.added_paths, again.added_groups, again.segments_written) == (0, 0, 0)
    assert (again.already_indexed, again.groups, again.paths) == (30, 8, 30)
    assert snapshot(Path(local_workspace)) == before


def test_populate_with_ten_percent_new_paths_adds_only_those(local_backend, local_workspace):
    index = WorkIndex(local_backend)
    old, new = input_paths(100), input_paths(10, start=100)
    index.populate(old, group_size=7)
    old_groups = all_groups(local_backend)
    old_catalog, _ = index.read_catalog()
    old_segments = {info.key: local_backend.read(info.key).body for info in old_catalog.segments}

    result = index.populate(old + new, group_size=7)

    assert (result.added_paths, result.already_indexed, result.added_groups) == (10, 100, 2)
    groups = all_groups(local_backend)
    assert_partition(groups, old + new)
    added = [g for g in groups if g not in old_groups]
    assert sorted(p for g in added for p in g.paths) == sorted(new)
    assert set(old_groups) <= set(groups)
    # Earlier segments are immutable and stay listed first.
    catalog, _ = index.read_catalog()
    assert catalog.segments[: len(old_catalog.segments)] == old_catalog.segments
    assert {k: local_backend.read(k).body for k in old_segments} == old_segments


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(st.sets(st.integers(min_value=0, max_value=60), min_size=1), min_size=1, max_size=4),
    group_size=st.integers(min_value=1, max_value=9),
)
def test_populate_in_batches_puts_every_path_in_exactly_one_group(batches, group_size):
    with tempfile.TemporaryDirectory() as root:
        backend = LocalBackend(root)
        index = WorkIndex(backend)
        seen: set[str] = set()
        for batch in batches:
            paths = [f"in/{i}" for i in batch]
            result = index.populate(paths, group_size)
            fresh = set(paths) - seen
            assert result.added_paths == len(fresh)
            assert result.added_groups == math.ceil(len(fresh) / group_size)
            seen |= fresh
        groups = all_groups(backend)
        assert_partition(groups, sorted(seen))
        assert all(1 <= len(g.paths) <= group_size for g in groups)
        assert len({g.hash for g in groups}) == len(groups)


def test_populate_splits_segments_by_hash_prefix(local_backend, monkeypatch):
    monkeypatch.setattr(catalog_module, "SEGMENT_TARGET_GROUPS", 8)
    index = WorkIndex(local_backend)
    paths = input_paths(80)

    result = index.populate(paths, group_size=2)

    catalog, _ = index.read_catalog()
    assert result.added_groups == 40
    assert result.segments_written == len(catalog.segments) > 1
    assert {len(info.prefix) for info in catalog.segments} == {1}  # 40 groups / 8 per segment -> one hex digit
    assert len({info.prefix for info in catalog.segments}) == len(catalog.segments)
    loaded = []
    for info in catalog.segments:
        groups = index.load(info.key)
        assert groups and all(g.hash.startswith(info.prefix) for g in groups)
        assert (info.groups, info.paths) == (len(groups), sum(len(g.paths) for g in groups))
        loaded += groups
    assert_partition(loaded, paths)
    assert catalog.groups == 40


def test_populate_below_segment_target_writes_one_unprefixed_segment(local_backend):
    index = WorkIndex(local_backend)
    index.populate(input_paths(12), group_size=3)
    catalog, _ = index.read_catalog()
    assert [(info.prefix, info.groups, info.paths) for info in catalog.segments] == [("", 4, 12)]


def test_populate_skips_paths_already_in_olmocr_index(local_backend):
    legacy = [Group(layout.group_hash(input_paths(3)), tuple(input_paths(3)))]
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(legacy))

    result = WorkIndex(local_backend).populate(input_paths(5), group_size=3)

    assert (result.added_paths, result.already_indexed, result.groups, result.paths) == (2, 3, 2, 5)
    assert_partition(all_groups(local_backend), input_paths(5))


def corrupt_catalog(backend):
    backend.write(layout.INDEX_CATALOG_KEY, b'{"format": "s3wq-index/1", "segments": [{"key": "../escape"}]}')


def corrupt_legacy_index(backend):
    backend.write(layout.LEGACY_INDEX_KEY, b"this is not zstd")


def corrupt_segment(backend):
    catalog, _ = WorkIndex(backend).read_catalog()
    backend.write(catalog.segments[0].key, b"\x28\xb5\x2f\xfd not a frame")


@pytest.mark.parametrize("corrupt", [corrupt_catalog, corrupt_legacy_index, corrupt_segment])
def test_populate_on_corrupt_index_raises_and_changes_nothing(local_backend, local_workspace, corrupt):
    index = WorkIndex(local_backend)
    index.populate(input_paths(10), group_size=3)
    corrupt(local_backend)
    before = snapshot(Path(local_workspace))

    with pytest.raises(IndexCorrupt):
        index.populate(input_paths(20), group_size=3)

    assert snapshot(Path(local_workspace)) == before


@pytest.mark.parametrize("group_size", [0, -1])
def test_populate_rejects_group_size_below_one(local_backend, local_workspace, group_size):
    with pytest.raises(ConfigError, match="group size"):
        WorkIndex(local_backend).populate(input_paths(3), group_size=group_size)
    assert not Path(local_workspace).exists() or snapshot(Path(local_workspace)) == {}


def test_catalog_counts_match_index(local_backend):
    index = WorkIndex(local_backend)
    index.populate(input_paths(9), group_size=2)
    index.populate(input_paths(9, start=9), group_size=4)
    catalog, etag = index.read_catalog()
    assert etag is not None
    assert Catalog.from_json(local_backend.read(layout.INDEX_CATALOG_KEY).body) == catalog
    assert (catalog.groups, catalog.paths) == (5 + 3, 18)


def test_populate_of_path_with_carriage_return_stays_readable(local_backend):
    index = WorkIndex(local_backend)
    index.populate(["in/a\rb.pdf", "in/c.pdf"], group_size=2)
    assert [g.paths for g in index.iter_groups()] == [("in/a\rb.pdf", "in/c.pdf")]
    assert index.populate(["in/a\rb.pdf", "in/c.pdf"], group_size=2).added_paths == 0
