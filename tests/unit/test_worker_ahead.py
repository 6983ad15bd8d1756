"""Claiming ahead on its own: when the next claim is made, relative to the expected end of the run in front."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from s3wq.worker.ahead import CLAIM_LEAD_SPARE_SECONDS, RECENT, ClaimAhead, ClaimTiming


def timing(runs=(), claims=()) -> ClaimTiming:
    t = ClaimTiming()
    t.run_seconds.extend(runs)
    t.claim_seconds.extend(claims)
    return t


def test_with_nothing_known_the_claim_goes_at_once():
    assert timing().due_after() == 0.0
    assert timing(claims=[0.2]).due_after() == 0.0


def test_the_claim_is_due_twice_the_slowest_claim_and_a_spare_before_the_shortest_run_ends():
    due = timing(runs=[3.0, 1.0, 2.0], claims=[0.1, 0.3, 0.2]).due_after()
    assert due == pytest.approx(1.0 - (2 * 0.3 + CLAIM_LEAD_SPARE_SECONDS))


def test_before_any_claim_is_timed_a_claim_is_taken_to_need_a_tenth_of_a_second():
    assert timing(runs=[1.0]).due_after() == pytest.approx(1.0 - (2 * 0.1 + CLAIM_LEAD_SPARE_SECONDS))


def test_a_run_shorter_than_the_lead_claims_at_once():
    assert timing(runs=[0.1], claims=[0.2]).due_after() == 0.0


def test_only_the_last_few_runs_and_claims_count():
    t = timing(runs=[0.5] + [4.0] * RECENT, claims=[1.0] + [0.1] * RECENT)
    assert t.due_after() == pytest.approx(4.0 - (2 * 0.1 + CLAIM_LEAD_SPARE_SECONDS))


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield pool


def recording_claim(made: threading.Event):
    def prefetch():
        made.set()
        return "next group", "its claim"

    return prefetch


def test_a_claim_ahead_waits_until_it_is_due_while_the_run_goes_on(pool):
    made = threading.Event()
    ahead = ClaimAhead(pool, finish=None, prefetch=recording_claim(made), claim_after=0.4)
    began = time.monotonic()
    ahead.start()
    assert not made.wait(0.2)  # the run is still far from its end
    assert made.wait(5)
    assert time.monotonic() - began >= 0.4
    assert ahead.result() == ("next group", "its claim")


def test_a_claim_ahead_is_made_as_soon_as_the_run_ends_if_that_comes_first(pool):
    made = threading.Event()
    ahead = ClaimAhead(pool, finish=None, prefetch=recording_claim(made), claim_after=10)
    ahead.start()
    assert not made.wait(0.2)
    ahead.ran(0.2)
    assert made.wait(2)  # not the 10 s it was due after
    assert ahead.result() == ("next group", "its claim") and ahead.overlapped


def test_a_claim_due_at_once_is_made_when_the_run_starts(pool):
    made = threading.Event()
    ahead = ClaimAhead(pool, finish=None, prefetch=recording_claim(made), claim_after=0.0)
    ahead.start()
    assert made.wait(1)
    assert ahead.result() == ("next group", "its claim")


def test_a_claim_ahead_of_a_run_that_never_started_is_made_at_once_by_the_caller(pool):
    made = threading.Event()
    finished = []
    ahead = ClaimAhead(pool, finish=lambda: finished.append(True), prefetch=recording_claim(made), claim_after=10)
    began = time.monotonic()
    assert ahead.result() == ("next group", "its claim")
    assert time.monotonic() - began < 2 and finished == [True] and not ahead.overlapped
