"""The claim protocol on a local workspace, asserting on the objects left behind.

Locks age by moving their mtime back: the local store's clock is this
machine's, as S3's is its own.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, multiple, precondition, rule

from s3wq.errors import ObjectNotFound
from s3wq.model import Group, LockState, Outcome
from s3wq.ops.repairs import requeue_failed
from s3wq.ops.status import queue_status
from s3wq.protocol import claims
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import Claim, ClaimProtocol, Finished, Held, NotEnoughTime
from s3wq.store import LocalBackend, layout

HASH = layout.group_hash(["s3://inputs/a.pdf"])
GROUP = Group(HASH, ("s3://inputs/a.pdf",))
LONG = 60.0


def protocol(backend, worker_id: str, lease: float = LONG, foreign: float = 1800.0) -> ClaimProtocol:
    return ClaimProtocol(backend, worker_id=worker_id, lease_seconds=lease, foreign_lock_timeout=foreign)


def lock_body(backend, hash_: str = HASH) -> LockBody | None:
    return LockBody.decode(backend.read(layout.lock_key(hash_)).body)


def make_stale(backend, hash_: str, seconds: float) -> None:
    """Move the lock's modification time back: its age by the store's clock is then at least ``seconds``."""
    path = backend.root / layout.lock_key(hash_)
    then = time.time() - seconds
    os.utime(path, (then, then))


def keys(backend, prefix: str) -> list[str]:
    return list(backend.list_keys(prefix))


@pytest.fixture(autouse=True)
def no_foreign_recheck_pause(monkeypatch):
    # The pause before re-reading a foreign takeover is for olmocr's HEAD-then-PUT over a network; not needed here.
    monkeypatch.setattr(claims, "FOREIGN_RECHECK_SECONDS", 0.0)


# --- claiming -----------------------------------------------------------------------------------------


def test_first_claim_creates_a_lock_recording_the_holders_lease(local_backend):
    claim = protocol(local_backend, "w1", lease=45).claim(HASH, budget=30)

    assert isinstance(claim, Claim)
    assert (claim.hash, claim.attempt, claim.reclaimed) == (HASH, 1, False)
    stored = local_backend.read(layout.lock_key(HASH))
    assert stored.etag == claim.etag
    body = LockBody.decode(stored.body)
    assert (body.owner, body.worker_id, body.attempt, body.state, body.lease_seconds, body.budget_seconds) == (
        claim.owner,
        "w1",
        1,
        LockState.HELD,
        45,
        30,
    )


def test_a_second_claimer_is_held_for_what_is_left_of_the_holders_lease(local_backend):
    first = protocol(local_backend, "w1", lease=LONG).claim(HASH)
    before = local_backend.read(layout.lock_key(HASH)).body

    second = protocol(local_backend, "w2", lease=1).claim(HASH)

    assert isinstance(second, Held)
    # The holder's lease (60 s), not the taker's own (1 s).
    assert LONG - 1 < second.stale_in <= LONG + 0.1
    assert local_backend.read(layout.lock_key(HASH)).body == before
    assert lock_body(local_backend).owner == first.owner


def test_staleness_is_judged_by_the_holders_lease_never_the_takers(local_backend):
    protocol(local_backend, "long-lease", lease=LONG).claim(HASH)
    make_stale(local_backend, HASH, 10)  # older than the taker's 5 s lease, younger than the holder's 60 s

    assert isinstance(protocol(local_backend, "short-lease", lease=5).claim(HASH), Held)

    make_stale(local_backend, HASH, LONG + 1)
    taken = protocol(local_backend, "short-lease", lease=5).claim(HASH)
    assert isinstance(taken, Claim) and (taken.attempt, taken.reclaimed) == (2, True)


def test_a_short_leased_holder_is_taken_over_by_a_long_leased_taker_once_stale(local_backend):
    protocol(local_backend, "short", lease=2).claim(HASH)
    make_stale(local_backend, HASH, 3)

    taken = protocol(local_backend, "long", lease=LONG).claim(HASH)

    assert isinstance(taken, Claim) and taken.reclaimed


def test_release_with_own_etag_deletes_lock(local_backend):
    proto = protocol(local_backend, "w1")
    claim = proto.claim(HASH)

    assert proto.release(claim) is True
    assert not local_backend.exists(layout.lock_key(HASH))
    assert isinstance(protocol(local_backend, "w2").claim(HASH), Claim)


def test_release_after_the_lock_was_taken_keeps_the_new_lock(local_backend):
    holder = protocol(local_backend, "w1", lease=1)
    first = holder.claim(HASH)
    make_stale(local_backend, HASH, 5)
    second = protocol(local_backend, "w2").claim(HASH)

    assert holder.release(first) is False
    assert lock_body(local_backend).owner == second.owner


@pytest.mark.parametrize("body", [b"", b"not json", b'{"owner": 1}', b"[1, 2, 3]"], ids=["olmocr-empty", "text", "partial", "list"])
def test_an_unparsable_lock_is_honoured_for_the_foreign_timeout_whatever_the_takers_lease(local_backend, body):
    local_backend.create(layout.lock_key(HASH), body)
    make_stale(local_backend, HASH, 100)  # far past the taker's own 5 s lease

    held = protocol(local_backend, "w1", lease=5, foreign=200).claim(HASH)
    assert isinstance(held, Held) and 99 < held.stale_in <= 100.1
    assert local_backend.read(layout.lock_key(HASH)).body == body

    make_stale(local_backend, HASH, 201)
    claim = protocol(local_backend, "w1", lease=5, foreign=200).claim(HASH)

    assert isinstance(claim, Claim)
    assert (claim.attempt, claim.reclaimed) == (2, True)
    assert lock_body(local_backend).owner == claim.owner


class SlowReplace(LocalBackend):
    """A store whose conditional replaces take ``delay`` seconds to come back (a pause, or an SDK retry)."""

    delay = 0.0

    def replace(self, key, body, etag):
        time.sleep(self.delay)
        return super().replace(key, body, etag)


def test_a_slow_takeover_of_an_empty_lock_puts_a_fresh_empty_lock_back_instead_of_processing(tmp_path, monkeypatch):
    # Every empty lock has one ETag: a takeover that took long may have
    # overwritten a fresh olmocr lock written after our read.
    backend = SlowReplace(tmp_path / "ws")
    backend.delay = 0.2
    monkeypatch.setattr(claims, "FOREIGN_TAKEOVER_WINDOW_SECONDS", 0.1)
    backend.create(layout.lock_key(HASH), b"")
    make_stale(backend, HASH, 100)

    result = protocol(backend, "w1", foreign=50).claim(HASH)

    assert isinstance(result, Held) and result.stale_in >= 50
    stored = backend.read(layout.lock_key(HASH))
    assert stored.body == b"" and stored.age_seconds < 5  # fresh: honoured as olmocr honours its own


def test_a_takeover_overwritten_right_after_by_an_olmocr_worker_is_given_up(tmp_path):
    class OlmocrRacesIn(LocalBackend):
        def replace(self, key, body, etag):
            new_etag = super().replace(key, body, etag)
            if body:  # our takeover landed; an olmocr worker that judged the lock stale too writes its own
                self.write(key, b"")
            return new_etag

    backend = OlmocrRacesIn(tmp_path / "ws")
    backend.create(layout.lock_key(HASH), b"")
    make_stale(backend, HASH, 100)

    assert isinstance(protocol(backend, "w1", foreign=50).claim(HASH), Held)
    assert backend.read(layout.lock_key(HASH)).body == b""


def test_a_released_lock_is_taken_at_once_and_counts_only_counted_runs(local_backend):
    holder = protocol(local_backend, "w1")
    first = holder.claim(HASH)

    assert holder.hand_back(first, Outcome.ERROR, counted=True, error="RuntimeError: boom") is True
    released = lock_body(local_backend)
    assert (released.state, released.attempt, released.outcome, released.error) == (
        LockState.RELEASED,
        1,
        Outcome.ERROR,
        "RuntimeError: boom",
    )

    second = protocol(local_backend, "w2").claim(HASH)
    assert isinstance(second, Claim) and (second.attempt, second.reclaimed) == (2, False)
    assert holder.release(first) is False

    assert protocol(local_backend, "w2").hand_back(second, Outcome.INTERRUPTED, counted=False)
    third = protocol(local_backend, "w3").claim(HASH)
    assert third.attempt == 2  # an interrupted run used no attempt


def test_a_group_that_ran_out_of_time_goes_only_to_a_worker_with_enough_time(local_backend):
    holder = protocol(local_backend, "w1")
    holder.hand_back(holder.claim(HASH, budget=10), Outcome.TIMEOUT, counted=False, needs_seconds=10)

    short = protocol(local_backend, "short").claim(HASH, budget=15, full_budget=100)
    assert short == NotEnoughTime(needs_seconds=10)
    assert lock_body(local_backend).owner.startswith("w1:")  # nothing written

    enough = protocol(local_backend, "enough").claim(HASH, budget=20, full_budget=100)
    assert isinstance(enough, Claim) and enough.attempt == 1
    assert lock_body(local_backend).needs_seconds == 10  # history travels with the group


class FixedOwnerProtocol(ClaimProtocol):
    """Always the same owner token: as if our earlier create had succeeded but its response was lost."""

    def _new_body(self, attempt, budget, previous=None, behind=None):
        return LockBody(
            owner="w1:fixed-token", worker_id=self.worker_id, attempt=attempt, lease_seconds=self.lease_seconds, write_id="fixed"
        )


def test_a_lock_already_holding_our_owner_token_is_ours(local_backend):
    proto = FixedOwnerProtocol(local_backend, worker_id="w1", lease_seconds=LONG)
    etag = local_backend.create(layout.lock_key(HASH), proto._new_body(1, None).encode())

    claim = proto.claim(HASH)

    assert isinstance(claim, Claim)
    assert (claim.owner, claim.attempt, claim.etag) == ("w1:fixed-token", 1, etag)
    assert isinstance(protocol(local_backend, "w2").claim(HASH), Held)
    assert proto.release(claim) is True
    assert not local_backend.exists(layout.lock_key(HASH))


def test_a_renewal_restarts_the_locks_age_and_keeps_the_claim(local_backend):
    proto = protocol(local_backend, "w1", lease=10)
    claim = proto.claim(HASH)
    make_stale(local_backend, HASH, 8)

    renewed = proto.renew(claim)

    assert renewed is not None and renewed.etag != claim.etag
    assert (renewed.owner, renewed.attempt) == (claim.owner, claim.attempt)
    assert local_backend.read(layout.lock_key(HASH)).age_seconds < 2
    assert isinstance(protocol(local_backend, "w2").claim(HASH), Held)
    # The old ETag is spent: a renewal from it finds the lock changed.
    assert proto.renew(claim) is None


def test_next_attempt_records_the_count_in_the_lock_first(local_backend):
    proto = protocol(local_backend, "w1")
    claim = proto.claim(HASH)

    again = proto.next_attempt(claim, "ValueError: bad page", budget=5)

    assert (again.attempt, again.owner) == (2, claim.owner)
    body = lock_body(local_backend)
    assert (body.attempt, body.error, body.state, body.budget_seconds) == (2, "ValueError: bad page", LockState.HELD, 5)
    assert proto.next_attempt(claim, "stale etag", budget=5) is None
    assert lock_body(local_backend).attempt == 2


def test_the_done_flag_is_created_once(local_backend):
    proto = protocol(local_backend, "w1")
    claim = proto.claim(HASH)

    assert proto.mark_done(claim) is True
    first = local_backend.read(layout.done_key(HASH)).body
    # The same claim again is a retry of our own write (its response lost): still ours.
    assert proto.mark_done(claim) is True
    other = Claim(HASH, claim.etag, claim.body.rewritten(owner="w2:another-claim"), claim.sent_at)
    assert protocol(local_backend, "w2").mark_done(other) is False

    assert local_backend.read(layout.done_key(HASH)).body == first
    assert json.loads(first)["worker_id"] == "w1"
    assert proto.is_done(HASH)


def test_a_failure_writes_the_flag_then_marks_the_lock_failed(local_backend):
    proto = protocol(local_backend, "w1")
    claim = proto.claim(HASH)

    assert proto.finalize_failed(claim, GROUP, "RuntimeError: boom", outcome=Outcome.TIMEOUT) is True

    flag = json.loads(local_backend.read(layout.failed_key(HASH)).body)
    assert (flag["kind"], flag["attempts"], flag["error"]) == (Outcome.TIMEOUT, 1, "RuntimeError: boom")
    body = lock_body(local_backend)
    assert (body.state, body.outcome) == (LockState.FAILED, Outcome.TIMEOUT)
    assert protocol(local_backend, "w2").claim(HASH) == Finished()


# --- many claimers, one store: a model-based test -----------------------------------------------------


@dataclass
class Record:
    worker: int
    claim: Claim


@dataclass
class LockModel:
    next_attempt: int  # the attempt a takeover would make
    etag: str | None  # None when the last write's ETag is unknown to the model
    state: str = LockState.HELD
    stale: bool = False


class ClaimMachine(RuleBasedStateMachine):
    """Claimers with different leases race on a few groups; locks age by moving their mtime back.

    The model predicts every outcome. The invariants that matter: no group
    ever has two live claims, no done flag is created twice, and every
    attempt number is the one the protocol's counting rules give.
    """

    HASHES: ClassVar = [layout.group_hash([f"s3://inputs/{i}"]) for i in range(2)]
    LEASES: ClassVar = [5.0, 60.0, 600.0]

    records = Bundle("records")

    def __init__(self):
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="s3wq-claims-")
        self.backend = LocalBackend(self.root)
        self.protocols = [protocol(self.backend, f"w{i}", lease=lease, foreign=1800) for i, lease in enumerate(self.LEASES)]
        self.locks: dict[str, LockModel] = {}
        self.live: dict[str, list[Record]] = {h: [] for h in self.HASHES}
        self.done_owner: dict[str, str] = {}

    def teardown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def _current(self, record: Record) -> bool:
        lock = self.locks.get(record.claim.hash)
        return lock is not None and lock.etag == record.claim.etag

    def _drop(self, record: Record) -> None:
        self.live[record.claim.hash] = [r for r in self.live[record.claim.hash] if r is not record]

    @rule(target=records, worker=st.integers(0, len(LEASES) - 1), hash_=st.sampled_from(HASHES))
    def claim(self, worker, hash_):
        lock = self.locks.get(hash_)
        result = self.protocols[worker].claim(hash_)
        if lock is not None and lock.state == LockState.FAILED:
            assert result == Finished()
            return multiple()
        if lock is not None and lock.state == LockState.HELD and not lock.stale:
            assert isinstance(result, Held)
            return multiple()
        assert isinstance(result, Claim), result
        assert result.attempt == (1 if lock is None else lock.next_attempt)
        assert result.reclaimed == (lock is not None and lock.state == LockState.HELD and lock.stale)
        record = Record(worker, result)
        self.live[hash_].append(record)
        assert len(self.live[hash_]) == 1, "two live claims on one group"
        self.locks[hash_] = LockModel(next_attempt=result.attempt + 1, etag=result.etag)
        return record

    @precondition(lambda self: any(h not in self.locks for h in self.HASHES))
    @rule(hash_=st.sampled_from(HASHES))
    def olmocr_worker_locks(self, hash_):
        if hash_ in self.locks:
            return
        etag = self.backend.create(layout.lock_key(hash_), b"")
        self.locks[hash_] = LockModel(next_attempt=2, etag=etag)

    @rule(hash_=st.sampled_from(HASHES))
    def lock_outlives_every_lease(self, hash_):
        if hash_ not in self.locks:
            return
        make_stale(self.backend, hash_, 3600)
        self.locks[hash_].stale = True
        self.live[hash_] = []

    @rule(record=records)
    def renew(self, record):
        expected = self._current(record)
        renewed = self.protocols[record.worker].renew(record.claim)
        assert (renewed is not None) is expected
        if expected:
            self.locks[record.claim.hash].etag = renewed.etag
            self.locks[record.claim.hash].stale = False  # a renewal restarts the lock's age
            self.live[record.claim.hash] = [Record(record.worker, renewed)]

    @rule(record=records)
    def release(self, record):
        hash_ = record.claim.hash
        expected = hash_ not in self.locks or self._current(record)
        assert self.protocols[record.worker].release(record.claim) is expected
        if expected:
            self.locks.pop(hash_, None)
            self._drop(record)

    @rule(record=records, counted=st.booleans())
    def hand_back(self, record, counted):
        expected = self._current(record)
        assert (
            self.protocols[record.worker].hand_back(record.claim, Outcome.ERROR if counted else Outcome.INTERRUPTED, counted=counted)
            is expected
        )
        if expected:
            self.locks[record.claim.hash] = LockModel(
                next_attempt=record.claim.attempt + (1 if counted else 0), etag=None, state=LockState.RELEASED
            )
            self._drop(record)

    @rule(target=records, record=records)
    def next_attempt(self, record):
        expected = self._current(record)
        result = self.protocols[record.worker].next_attempt(record.claim, "retry", budget=None)
        if not expected:
            assert result is None
            return multiple()
        assert result is not None and result.attempt == record.claim.attempt + 1
        renewed = Record(record.worker, result)
        self.locks[record.claim.hash] = LockModel(next_attempt=result.attempt + 1, etag=result.etag)
        self.live[record.claim.hash] = [renewed]
        return renewed

    @rule(record=records)
    def fail(self, record):
        expected = self._current(record)
        group = Group(record.claim.hash, ("p",))
        assert self.protocols[record.worker].finalize_failed(record.claim, group, "boom") is expected
        if expected:
            self.locks[record.claim.hash] = LockModel(next_attempt=record.claim.attempt + 1, etag=None, state=LockState.FAILED)
            self._drop(record)

    @rule(hash_=st.sampled_from(HASHES))
    def requeue(self, hash_):
        lock = self.locks.get(hash_)
        failed = lock is not None and lock.state == LockState.FAILED and hash_ not in self.done_owner
        if not failed:
            return
        result = requeue_failed(self.backend, [hash_])
        assert result.requeued == [hash_]
        assert LockBody.decode(self.backend.read(layout.lock_key(hash_)).body).outcome == Outcome.REQUEUED
        self.locks[hash_] = LockModel(next_attempt=1, etag=None, state=LockState.RELEASED)

    @rule(record=records)
    def mark_done(self, record):
        hash_ = record.claim.hash
        ours = self.protocols[record.worker].mark_done(record.claim)
        first = hash_ not in self.done_owner
        assert ours is (first or self.done_owner[hash_] == record.claim.owner)
        if first:
            self.done_owner[hash_] = record.claim.owner

    @invariant()
    def at_most_one_live_claim_and_one_done_flag(self):
        for hash_ in self.HASHES:
            assert len(self.live[hash_]) <= 1
            assert self.backend.exists(layout.done_key(hash_)) == (hash_ in self.done_owner)

    @invariant()
    def store_agrees_with_model(self):
        for hash_ in self.HASHES:
            lock = self.locks.get(hash_)
            try:
                stored = self.backend.read(layout.lock_key(hash_))
            except ObjectNotFound:
                assert lock is None
                continue
            assert lock is not None
            if lock.etag is not None:
                assert stored.etag == lock.etag
            body = LockBody.decode(stored.body)
            if body is not None:
                assert body.state == lock.state
            for record in self.live[hash_]:
                assert body.owner == record.claim.owner


ClaimMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
test_claim_protocol_state_machine = ClaimMachine.TestCase


def test_status_counts_a_failed_marked_lock_without_its_flag_as_failed(local_backend):
    from s3wq.index import WorkIndex

    WorkIndex(local_backend).populate(["s3://inputs/a.pdf"], 1)
    proto = protocol(local_backend, "w1")
    proto.finalize_failed(proto.claim(HASH), GROUP, "boom")
    local_backend.delete(layout.failed_key(HASH))  # an operator's cleanup, or an interrupted requeue

    status = queue_status(local_backend)

    assert (status["failed"], status["locked"], status["pending"], status["remaining"]) == (1, 0, 0, 0)
    assert requeue_failed(local_backend).requeued == [HASH]
    assert protocol(local_backend, "w2").claim(HASH).attempt == 1
