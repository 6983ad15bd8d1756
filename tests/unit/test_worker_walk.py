"""The walk over the index on its own: where a worker starts, and where it jumps after running into a peer."""

from __future__ import annotations

import random
from collections import deque

import pytest

from s3wq.model import Group
from s3wq.worker.walk import jump_into_largest_gap, start_position


class MiddleOf:
    """An rng whose draws are the middle of the range asked for, and which remembers the range."""

    def __init__(self, at: float = 0.5):
        self.at = at
        self.asked: list[tuple[float, float]] = []

    def uniform(self, low: float, high: float) -> float:
        self.asked.append((low, high))
        return low + (high - low) * self.at


def groups(names: str) -> deque:
    return deque(Group(name, (f"s3://inputs/{name}.pdf",)) for name in names)


def order(ahead: deque) -> str:
    return "".join(g.hash for g in ahead)


def test_the_walk_jumps_into_the_middle_of_the_longest_stretch_nobody_finished():
    # Unfinished stretches: ab (2), efg (3), ij (2); the longest starts at e.
    ahead = groups("abcdefghij")
    rng = MiddleOf()
    jump_into_largest_gap(ahead, {"c", "d", "h"}, rng)
    # Drawn from the middle third, so that two workers colliding at once land apart.
    assert rng.asked == [(1 / 3, 2 / 3)]
    # 3 * 1/2 -> one group into the stretch: the walk goes on from f, wrapping round.
    assert order(ahead) == "fghijabcde"


def test_of_two_stretches_as_long_the_first_is_taken():
    ahead = groups("abxcd")
    jump_into_largest_gap(ahead, {"x"}, MiddleOf())
    assert order(ahead) == "bxcda"


def test_stretches_are_measured_along_what_is_left_of_the_walk_not_round_its_end():
    # The same segment entered at h: what is left runs ijab (4) then efg (3), and ends there.
    ahead = groups("hijabcdefg")
    jump_into_largest_gap(ahead, {"c", "d", "h"}, MiddleOf())
    assert order(ahead) == "abcdefghij"


def test_a_walk_with_every_group_finished_stays_where_it_is():
    ahead = groups("abc")
    jump_into_largest_gap(ahead, {"a", "b", "c"}, MiddleOf())
    assert order(ahead) == "abc"


@pytest.mark.parametrize("seed", range(20))
def test_a_real_draw_lands_in_the_middle_third_of_the_longest_stretch(seed):
    # 30 unfinished groups (10..39) between finished ones: the middle third is 20..29.
    names = [f"g{i:02d}" for i in range(50)]
    ahead = deque(Group(n, ()) for n in names)
    finished = {f"g{i:02d}" for i in (*range(10), *range(40, 45))}
    jump_into_largest_gap(ahead, finished, random.Random(seed))
    assert 20 <= int(ahead[0].hash[1:]) <= 29


def test_a_worker_without_an_index_starts_at_a_place_of_its_own_spread_over_the_index():
    assert start_position("w-1") == start_position("w-1")
    places = [start_position(f"w-{i}") for i in range(1000)]
    assert all(0 <= p < 1 for p in places)
    # Uniformly spread: each tenth of the index gets about a tenth of the workers.
    tenths = [sum(int(p * 10) == t for p in places) for t in range(10)]
    assert min(tenths) > 60 and max(tenths) < 140, tenths
