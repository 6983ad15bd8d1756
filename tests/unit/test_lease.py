"""Lease keeping on a controlled clock: when renewals happen, what they cost, and when the processor must stop.

The keeper and the claim protocol read the time through ``s3wq.protocol.clock.now``;
these tests replace it with a clock they move by hand. The lock's own age is
irrelevant here (every write is the holder's own), so the store is the memory
store (tests/memory_store.py, which keeps the storage contract): every renewal
is a real conditional write, without a file and an fsync for each of the
thousands a property test makes.
"""

from __future__ import annotations

import math
from concurrent.futures import Executor, Future

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_store import MemoryBackend

from s3wq.config import MIN_RUN_SECONDS
from s3wq.errors import StorageError
from s3wq.model import RunStop
from s3wq.protocol import clock
from s3wq.protocol.claims import ClaimProtocol
from s3wq.protocol.lease import LeaseKeeper, lease_margin
from s3wq.protocol.time_rules import FULL_SHARE, enough_time, timeout_counts
from s3wq.store import layout

HASH = layout.group_hash(["s3://inputs/a.pdf"])


class InlineExecutor(Executor):
    """Renewals run at once, in the caller's thread: on a hand-moved clock, nothing may happen behind the test's back."""

    def submit(self, fn, *args, **kwargs):
        future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 -- handed to the keeper, as a real executor would
            future.set_exception(exc)
        return future


def keeper_for(proto, claim, stop_at):
    return LeaseKeeper(proto, claim, stop_at=stop_at, executor=InlineExecutor())


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class CountingBackend(MemoryBackend):
    """A store that counts conditional replaces (renewals) and can be made unreachable."""

    def __init__(self):
        super().__init__()
        self.replaces = 0
        self.down = False

    def replace(self, key, body, etag):
        if self.down:
            raise StorageError("connection reset")
        self.replaces += 1
        return super().replace(key, body, etag)


@pytest.fixture
def fake_clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(clock, "now", fake)
    return fake


@pytest.fixture
def store():
    return CountingBackend()


def run_until_stop(keeper: LeaseKeeper, fake: FakeClock, *, finishes_at: float | None = None) -> str | None:
    """Drive the keeper as a runner does: wake at next_wakeup, tick, until it says stop or the run finishes."""
    while True:
        wake = keeper.next_wakeup()
        if finishes_at is not None and finishes_at <= wake:
            fake.t = finishes_at
            return None
        fake.t = wake
        verdict = keeper.tick()
        if verdict is not None:
            return verdict


def test_a_lambda_run_inside_its_lease_never_renews(fake_clock, store):
    # A worker function with a 900 s timeout: lease 900, safety margin 10, the claim made at once.
    proto = ClaimProtocol(store, worker_id="lambda", lease_seconds=900)
    claim = proto.claim(HASH)
    keeper = keeper_for(proto, claim, fake_clock.t + 890)

    assert run_until_stop(keeper, fake_clock, finishes_at=fake_clock.t + 700) is None
    assert (keeper.renewals, store.replaces) == (0, 0)

    keeper = keeper_for(proto, proto.renew(claim), fake_clock.t + 890)
    store.replaces = 0
    assert run_until_stop(keeper, fake_clock) == RunStop.TIMEOUT
    assert (keeper.renewals, store.replaces) == (0, 0)


def test_a_one_hour_run_on_a_five_minute_lease_renews_every_hundred_seconds(fake_clock, store):
    proto = ClaimProtocol(store, worker_id="gpu-box", lease_seconds=300)
    started = fake_clock.t
    keeper = keeper_for(proto, proto.claim(HASH), None)

    assert run_until_stop(keeper, fake_clock, finishes_at=started + 3600) is None

    # A renewal each third of the lease: at 100 s, 200 s, ... 3,500 s.
    assert keeper.renewals == store.replaces == 35
    assert keeper.state.held()


def test_renewals_follow_the_foreign_timeout_when_the_lease_is_longer(fake_clock, store):
    # olmocr takes a lock over once it looks 1,800 s old, whatever s3wq's lease says.
    proto = ClaimProtocol(store, worker_id="gpu-box", lease_seconds=7200, foreign_lock_timeout=1800)
    started = fake_clock.t
    keeper = keeper_for(proto, proto.claim(HASH), started + 7000)

    assert run_until_stop(keeper, fake_clock, finishes_at=started + 3600) is None
    assert keeper.renewals == 5  # every 600 s


def test_a_taken_lock_stops_the_processor_at_the_next_renewal(fake_clock, store):
    proto = ClaimProtocol(store, worker_id="w1", lease_seconds=30)
    claim = proto.claim(HASH)
    keeper = keeper_for(proto, claim, None)
    store.write(layout.lock_key(HASH), b'{"taken": "by an operator"}')

    assert run_until_stop(keeper, fake_clock) == RunStop.LOST
    assert fake_clock.t == pytest.approx(claim.sent_at + 10)
    assert not keeper.state.held()


def test_an_unreachable_store_stops_the_processor_before_the_lease_ends(fake_clock, store):
    proto = ClaimProtocol(store, worker_id="w1", lease_seconds=30)
    claim = proto.claim(HASH)
    keeper = keeper_for(proto, claim, None)
    store.down = True

    assert run_until_stop(keeper, fake_clock) == RunStop.EXPIRED
    # Stopped at the margin before the lease's end: no taker can have started yet.
    assert fake_clock.t < claim.sent_at + 30
    assert fake_clock.t >= claim.sent_at + 30 - lease_margin(30)
    assert keeper.renewal_errors >= 10  # retried about every second meanwhile
    assert not keeper.state.held()


def test_a_renewal_that_gets_through_after_errors_keeps_the_run_going(fake_clock, store):
    proto = ClaimProtocol(store, worker_id="w1", lease_seconds=30)
    started = fake_clock.t
    keeper = keeper_for(proto, proto.claim(HASH), None)
    store.down = True
    fake_clock.t = started + 10
    assert keeper.tick() is None and keeper.renewals == 0
    store.down = False
    fake_clock.t = started + 20

    assert keeper.tick() is None
    assert keeper.renewals == 1 and keeper.state.valid_until > started + 45


@given(lease=st.floats(1, 43200), runs=st.floats(0.01, 30), limits=st.none() | st.floats(0.01, 30))
@settings(max_examples=60, deadline=None)
def test_while_renewals_succeed_a_run_stops_only_at_its_time_limit(lease, runs, limits):
    # Run and limit in leases: up to 30 of them, so up to about 90 renewals.
    run, limit = runs * lease, None if limits is None else limits * lease
    fake = FakeClock()
    original, clock.now = clock.now, fake
    try:
        store = CountingBackend()
        proto = ClaimProtocol(store, worker_id="w", lease_seconds=lease)
        claim = proto.claim(HASH)
        stop_at = None if limit is None else fake.t + limit
        keeper = keeper_for(proto, claim, stop_at)

        finishes_at = claim.sent_at + run
        verdict = run_until_stop(keeper, fake, finishes_at=finishes_at)

        # Compared as the keeper sees them, on the clock: 1000 + 0.01 and
        # 1000 + 0.010000000000000002 are one float, a tie, though limit < run.
        if stop_at is not None and stop_at < finishes_at:
            assert verdict == RunStop.TIMEOUT
        elif stop_at is None or stop_at > finishes_at:
            assert verdict is None
        hold = min(lease, proto.foreign_lock_timeout)
        ran = fake.t - claim.sent_at
        if limit is not None and limit <= hold - lease_margin(lease):
            assert keeper.renewals == 0  # the lease covers the whole time limit: no extra request
        else:
            assert keeper.renewals <= math.floor(ran / (hold / 3)) + 1
    finally:
        clock.now = original


# --- who gets a group that ran out of time -----------------------------------------------------------


@given(
    duration=st.floats(1, 10_000),
    full=st.floats(10, 10_000),
    budgets=st.lists(st.floats(0, 1), min_size=200, max_size=200),
)
def test_a_group_that_fits_a_worker_never_fails_by_unlucky_pickups_and_one_that_fits_none_fails(duration, full, budgets):
    """Simulate pickups by workers with random time left: the rules of enough_time and timeout_counts decide."""
    needs, counted, outcome = None, 0, None
    # Then fresh workers, with all their time: every Map round starts some.
    for share in budgets + [1.0] * 3:
        budget = max(MIN_RUN_SECONDS, share * full)
        if not enough_time(needs, budget, full):
            continue
        if budget >= duration:
            outcome = "done"
            break
        counted += timeout_counts(budget, full)
        needs = max(budget, needs or 0.0, MIN_RUN_SECONDS)
        if counted == 3:
            outcome = "failed"
            break
    if duration <= FULL_SHARE * full:
        assert outcome != "failed"
    if duration > full:
        assert outcome == "failed"  # never done, and never left waiting


def test_each_uncounted_timeout_doubles_what_the_next_taker_must_offer():
    assert enough_time(10, 20, 100) and not enough_time(10, 19.9, 100)
    # Past half the full time, only a worker with nearly all its time left.
    assert not enough_time(60, 94.9, 100) and enough_time(60, 95, 100)
    # Even a group that had more than this worker can give: it fails here rather than wait forever.
    assert enough_time(200, 95, 100) and timeout_counts(95, 100)
    assert enough_time(None, 1, 100) and enough_time(5, None, None)
    assert timeout_counts(95, 100) and not timeout_counts(94, 100)
