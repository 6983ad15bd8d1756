"""The breaker on its own: it stops a worker whose processor fails every group the same way, and nothing else."""

from __future__ import annotations

from s3wq.worker.breaker import Breaker


def test_it_trips_once_the_first_n_groups_all_fail_with_one_error():
    breaker = Breaker(3)
    assert [breaker.tripped_by(h, "ImportError: no model") for h in ("a", "b")] == [False, False]
    assert not breaker.tripped
    assert breaker.tripped_by("c", "ImportError: no model")
    assert breaker.tripped


def test_a_group_failing_again_counts_once():
    # Retries of one bad group are not the processor failing everywhere.
    breaker = Breaker(2)
    assert [breaker.tripped_by("a", "boom") for _ in range(5)] == [False] * 5
    assert breaker.tripped_by("b", "boom")


def test_mixed_errors_turn_it_off_for_good():
    # Bad inputs fail each their own way: from then on a failure is the group's.
    breaker = Breaker(2)
    assert not breaker.tripped_by("a", "ValueError: bad page in a.pdf")
    assert not breaker.tripped_by("b", "ValueError: bad page in b.pdf")
    assert not any(breaker.tripped_by(h, "ValueError: bad page in a.pdf") for h in "cdefg")
    assert not breaker.tripped and not breaker.armed


def test_a_run_that_returns_turns_it_off_for_good():
    breaker = Breaker(2)
    assert not breaker.tripped_by("a", "boom")
    breaker.disarm()  # a run returned: the processor works
    assert not any(breaker.tripped_by(h, "boom") for h in "bcdef")
    assert not breaker.tripped


def test_zero_groups_never_arms_it():
    breaker = Breaker(0)
    assert not breaker.armed
    assert not any(breaker.tripped_by(h, "boom") for h in "abcdef")
