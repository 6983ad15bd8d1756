"""Eight processes populate overlapping path sets into one workspace at once.

The catalog swap (If-None-Match for the first, If-Match after) must serialise
them: afterwards every path is in exactly one group, no populate's groups are
lost, and a later populate of anything already indexed adds nothing.
"""

from __future__ import annotations

from collections import Counter

from s3wq import WorkIndex
from s3wq.store import layout

from . import racing

UNIVERSE = [f"s3://inputs/batch/doc-{n:04d}.pdf" for n in range(550)]
GROUP_SIZE = 7


def paths_for(racer: int) -> list[str]:
    """Racer i gets paths i*50 .. i*50+149: each overlaps its neighbours by 100; the universe's tail is never named."""
    return UNIVERSE[racer * 50 : racer * 50 + 150]


def union_of_racers(size: int) -> set[str]:
    return set().union(*(paths_for(i) for i in range(size)))


def every_stored_group(index: WorkIndex):
    """Every row of every index object, duplicates included (iter_groups would hide them)."""
    for ref in index.segment_refs():
        yield from index.load(ref.key)


def test_concurrent_overlapping_populates_index_each_path_exactly_once(racers, workspace, backend):
    union = union_of_racers(racers.size)

    results = racers.race(racing.populate, workspace, [(paths_for(i), GROUP_SIZE) for i in range(racers.size)])

    index = WorkIndex(backend)
    groups = list(index.iter_groups())
    rows = list(every_stored_group(index))
    assert len(rows) == len(groups), "a group is stored twice"
    path_counts = Counter(path for group in groups for path in group.paths)
    assert set(path_counts) == union
    assert set(path_counts.values()) == {1}
    for group in groups:
        assert group.hash == layout.group_hash(group.paths)
        assert 1 <= len(group.paths) <= GROUP_SIZE
    # Each racer's report agrees with the index: together they added the universe, once.
    assert sum(r.added_paths for r in results) == len(union)
    assert sum(r.added_groups for r in results) == len(groups)


def test_populating_again_after_a_concurrent_populate_adds_nothing(racers, workspace, backend):
    racers.race(racing.populate, workspace, [(paths_for(i), GROUP_SIZE) for i in range(racers.size)])
    index = WorkIndex(backend)
    catalog_before = backend.read(layout.INDEX_CATALOG_KEY)
    groups_before = sorted(index.iter_groups(), key=lambda g: g.hash)
    segments_before = list(backend.list_keys(layout.INDEX_SEGMENTS_PREFIX))

    again = racers.race(racing.populate, workspace, [(paths_for(i), GROUP_SIZE) for i in range(racers.size)])
    union = sorted(union_of_racers(racers.size))
    whole = index.populate(union, GROUP_SIZE)

    assert [r.added_paths for r in again] == [0] * racers.size
    assert whole.added_paths == 0
    assert whole.already_indexed == len(union)
    assert backend.read(layout.INDEX_CATALOG_KEY).etag == catalog_before.etag
    assert sorted(index.iter_groups(), key=lambda g: g.hash) == groups_before
    assert list(backend.list_keys(layout.INDEX_SEGMENTS_PREFIX)) == segments_before
