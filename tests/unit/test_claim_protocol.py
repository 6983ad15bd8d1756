"""The claim protocol and the worker loop on a local workspace, asserting on the objects left behind."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, multiple, precondition, rule

from s3wq import layout
from s3wq.backends import LocalBackend
from s3wq.config import WorkerSettings
from s3wq.errors import ObjectNotFound
from s3wq.index import WorkIndex
from s3wq.queue import Claim, ClaimProtocol, Held, LockBody, Worker, queue_status

HASH = layout.group_hash(["s3://inputs/a.pdf"])
LONG = 60.0


def protocol(backend, worker_id: str, lock_timeout: float = LONG) -> ClaimProtocol:
    return ClaimProtocol(backend, worker_id=worker_id, lock_timeout=lock_timeout)


def lock_body(backend, hash_: str = HASH) -> LockBody | None:
    return LockBody.decode(backend.read(layout.lock_key(hash_)).body)


def make_stale(backend, hash_: str, seconds: float) -> None:
    """Move the lock's modification time back: its age by the store's clock is then at least ``seconds``."""
    path = backend.root / layout.lock_key(hash_)
    then = time.time() - seconds
    os.utime(path, (then, then))


def keys(backend, prefix: str) -> list[str]:
    return list(backend.list_keys(prefix))


# --- claiming -----------------------------------------------------------------------------------------


def test_first_claim_creates_lock_at_attempt_one(local_backend):
    claim = protocol(local_backend, "w1").claim(HASH)

    assert isinstance(claim, Claim)
    assert (claim.hash, claim.attempt, claim.reclaimed) == (HASH, 1, False)
    stored = local_backend.read(layout.lock_key(HASH))
    assert stored.etag == claim.etag
    body = LockBody.decode(stored.body)
    assert (body.owner, body.worker_id, body.attempt, body.released) == (claim.owner, "w1", 1, False)


def test_second_claimer_is_held_and_lock_unchanged(local_backend):
    first = protocol(local_backend, "w1").claim(HASH)
    before = local_backend.read(layout.lock_key(HASH)).body

    second = protocol(local_backend, "w2").claim(HASH)

    assert isinstance(second, Held)
    assert 0 < second.stale_in <= LONG
    assert local_backend.read(layout.lock_key(HASH)).body == before
    assert lock_body(local_backend).owner == first.owner


def test_release_with_own_etag_deletes_lock(local_backend):
    proto = protocol(local_backend, "w1")
    claim = proto.claim(HASH)

    assert proto.release(claim) is True
    assert not local_backend.exists(layout.lock_key(HASH))
    assert isinstance(protocol(local_backend, "w2").claim(HASH), Claim)


def test_release_after_lock_was_replaced_keeps_the_new_lock(local_backend):
    proto = protocol(local_backend, "w1")
    claim = proto.claim(HASH)
    other = LockBody(owner="w2:other", worker_id="w2", attempt=2, claimed_at="2025-01-01T00:00:00.000+00:00")
    local_backend.replace(layout.lock_key(HASH), other.encode(), claim.etag)

    assert proto.release(claim) is False
    assert lock_body(local_backend) == other


def test_stale_lock_is_taken_over_with_next_attempt(local_backend):
    holder = protocol(local_backend, "w1", lock_timeout=0.05)
    first = holder.claim(HASH)
    time.sleep(0.1)

    second = protocol(local_backend, "w2", lock_timeout=0.05).claim(HASH)

    assert isinstance(second, Claim)
    assert (second.attempt, second.reclaimed) == (2, True)
    assert second.owner != first.owner
    assert lock_body(local_backend).owner == second.owner
    # The old holder finds out when it tries to release, and leaves the new lock alone.
    assert holder.release(first) is False
    assert lock_body(local_backend).owner == second.owner


@pytest.mark.parametrize("body", [b"", b"not json", b'{"owner": 1}', b"[1, 2, 3]"], ids=["olmocr-empty", "text", "partial", "list"])
def test_unparsable_lock_is_held_until_stale(local_backend, body):
    local_backend.create(layout.lock_key(HASH), body)

    assert isinstance(protocol(local_backend, "w1").claim(HASH), Held)
    assert local_backend.read(layout.lock_key(HASH)).body == body

    make_stale(local_backend, HASH, 2 * LONG)
    claim = protocol(local_backend, "w1").claim(HASH)

    assert isinstance(claim, Claim)
    assert (claim.attempt, claim.reclaimed) == (2, True)
    assert lock_body(local_backend).owner == claim.owner


def test_released_for_retry_lock_is_taken_over_at_once(local_backend):
    holder = protocol(local_backend, "w1")
    first = holder.claim(HASH)

    assert holder.release_for_retry(first, "RuntimeError: boom") is True
    released = lock_body(local_backend)
    assert (released.released, released.attempt, released.error) == (True, 1, "RuntimeError: boom")

    second = protocol(local_backend, "w2").claim(HASH)

    assert isinstance(second, Claim)
    assert (second.attempt, second.reclaimed) == (2, False)
    assert lock_body(local_backend).owner == second.owner
    assert holder.release(first) is False
    assert local_backend.exists(layout.lock_key(HASH))


class FixedOwnerProtocol(ClaimProtocol):
    """Always the same owner token: as if our earlier create had succeeded but its response was lost."""

    def _new_body(self, attempt: int) -> LockBody:
        return LockBody(owner="w1:fixed-token", worker_id=self.worker_id, attempt=attempt, claimed_at="2025-01-01T00:00:00.000+00:00")


def test_lock_already_holding_our_owner_token_is_ours(local_backend):
    proto = FixedOwnerProtocol(local_backend, worker_id="w1", lock_timeout=LONG)
    etag = local_backend.create(layout.lock_key(HASH), proto._new_body(1).encode())

    claim = proto.claim(HASH)

    assert isinstance(claim, Claim)
    assert (claim.owner, claim.attempt, claim.etag) == ("w1:fixed-token", 1, etag)
    assert isinstance(protocol(local_backend, "w2").claim(HASH), Held)
    assert proto.release(claim) is True
    assert not local_backend.exists(layout.lock_key(HASH))


def test_next_attempt_records_count_in_lock(local_backend):
    proto = protocol(local_backend, "w1")
    claim = proto.claim(HASH)

    again = proto.next_attempt(claim, "ValueError: bad page")

    assert (again.attempt, again.owner) == (2, claim.owner)
    body = lock_body(local_backend)
    assert (body.attempt, body.error, body.released) == (2, "ValueError: bad page", False)
    assert proto.next_attempt(claim, "stale etag") is None  # the old claim's ETag no longer matches
    assert lock_body(local_backend).attempt == 2


def test_done_flag_is_created_once(local_backend):
    proto = protocol(local_backend, "w1")
    claim = proto.claim(HASH)

    assert proto.mark_done(claim) is True
    first = local_backend.read(layout.done_key(HASH)).body
    # The same claim again is a retry of our own write (its response lost): still ours.
    assert proto.mark_done(claim) is True
    # Another claim's completion finds the flag written by someone else.
    other = Claim(HASH, claim.etag, claim.attempt, reclaimed=False, owner="w2:another-claim")
    assert protocol(local_backend, "w2").mark_done(other) is False

    assert local_backend.read(layout.done_key(HASH)).body == first
    assert json.loads(first)["worker_id"] == "w1"
    assert proto.is_done(HASH)


# --- the worker loop ----------------------------------------------------------------------------------


class Recorder:
    def __init__(self, error: Exception | None = None):
        self.calls: list[tuple[str, int]] = []
        self.error = error

    def __call__(self, group, ctx):
        self.calls.append((group.hash, ctx.attempt))
        if self.error is not None:
            raise self.error


def populated(backend, n_paths: int, group_size: int) -> list:
    WorkIndex(backend).populate([f"s3://inputs/doc-{i:03d}.pdf" for i in range(n_paths)], group_size)
    return list(WorkIndex(backend).iter_groups())


def test_worker_drains_queue_and_leaves_only_done_flags(local_backend):
    groups = populated(local_backend, 10, 3)
    processor = Recorder()

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG), worker_id="w1").run()

    assert (report.processed, report.failed, report.stopped_reason) == (len(groups), 0, "queue_empty")
    assert sorted(h for h, _ in processor.calls) == sorted(g.hash for g in groups)
    assert keys(local_backend, "worker_locks/") == []
    assert keys(local_backend, "done_flags/") == sorted(layout.done_key(g.hash) for g in groups)
    assert queue_status(local_backend)["done"] == len(groups)


def test_worker_marks_group_failed_after_max_attempts(local_backend):
    [group] = populated(local_backend, 2, 5)
    processor = Recorder(RuntimeError("disk on fire"))

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG, max_attempts=3), worker_id="w1").run()

    assert processor.calls == [(group.hash, 1), (group.hash, 2), (group.hash, 3)]
    assert (report.processed, report.failed, report.retried) == (0, 1, 2)
    assert keys(local_backend, "failed_flags/") == [f"failed_flags/failed_{group.hash}.json"]
    doc = json.loads(local_backend.read(layout.failed_key(group.hash)).body)
    assert (doc["hash"], doc["paths"], doc["attempts"], doc["worker_id"]) == (group.hash, list(group.paths), 3, "w1")
    assert "RuntimeError: disk on fire" in doc["error"]
    # The lock stays, marked failed, so that no worker starts the group over.
    assert keys(local_backend, "worker_locks/") == [layout.lock_key(group.hash)]
    assert LockBody.decode(local_backend.read(layout.lock_key(group.hash)).body).failed
    assert keys(local_backend, "done_flags/") == []
    assert queue_status(local_backend) == {"groups": 1, "paths": 2, "done": 0, "failed": 1, "locked": 0, "pending": 0, "remaining": 0}


def test_worker_fails_group_whose_stale_lock_used_up_every_attempt(local_backend):
    [group] = populated(local_backend, 1, 1)
    crashed = LockBody(owner="w0:gone", worker_id="w0", attempt=3, claimed_at="2025-01-01T00:00:00.000+00:00")
    local_backend.create(layout.lock_key(group.hash), crashed.encode())
    make_stale(local_backend, group.hash, 2 * LONG)
    processor = Recorder()

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG, max_attempts=3), worker_id="w1").run()

    assert processor.calls == []
    assert (report.failed, report.reclaimed) == (1, 1)
    doc = json.loads(local_backend.read(layout.failed_key(group.hash)).body)
    assert doc["attempts"] == 3
    assert "worker lost" in doc["error"]
    assert LockBody.decode(local_backend.read(layout.lock_key(group.hash)).body).failed


def test_worker_without_time_budget_claims_nothing(local_backend, local_workspace):
    populated(local_backend, 6, 2)
    settings_ = WorkerSettings(time_limit=LONG)
    processor = Recorder()

    worker = Worker(local_backend, processor, settings_, worker_id="w1", remaining_time=lambda: settings_.effective_safety_margin * 0.9)
    report = worker.run()

    assert report.stopped_reason == "time_limit"
    assert (report.processed, report.conflicts, processor.calls) == (0, 0, [])
    assert keys(local_backend, "worker_locks/") == []
    assert keys(local_backend, "done_flags/") == []
    assert queue_status(local_backend)["pending"] == 3


def test_worker_leaves_group_held_by_live_worker(local_backend):
    groups = populated(local_backend, 6, 2)
    held = protocol(local_backend, "w0").claim(groups[0].hash)
    processor = Recorder()

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG), worker_id="w1").run()

    assert (report.processed, report.conflicts, report.stopped_reason) == (2, 1, "locked_by_others")
    assert groups[0].hash not in {h for h, _ in processor.calls}
    assert lock_body(local_backend, groups[0].hash).owner == held.owner
    assert queue_status(local_backend) == {"groups": 3, "paths": 6, "done": 2, "failed": 0, "locked": 1, "pending": 0, "remaining": 1}


# --- many claimers, one store: a model-based test -----------------------------------------------------


@dataclass
class Record:
    worker: int
    claim: Claim


@dataclass
class LockModel:
    attempt: int
    etag: str | None  # None when the last write's ETag is unknown to the model
    released: bool = False
    stale: bool = False


class ClaimMachine(RuleBasedStateMachine):
    """Several claimers race on a few groups; locks age by moving their mtime back (the store's clock).

    The model predicts every outcome; the invariant that matters is that no
    group ever has two live claims and no done flag is created twice.
    """

    HASHES = [layout.group_hash([f"s3://inputs/{i}"]) for i in range(2)]
    WORKERS = 3

    records = Bundle("records")

    def __init__(self):
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="s3wq-claims-")
        self.backend = LocalBackend(self.root)
        self.protocols = [protocol(self.backend, f"w{i}") for i in range(self.WORKERS)]
        self.locks: dict[str, LockModel] = {}
        self.live: dict[str, list[Record]] = {h: [] for h in self.HASHES}
        self.done_created: dict[str, int] = {h: 0 for h in self.HASHES}
        self.done_owner: dict[str, str] = {}

    def teardown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def _lock_is_current(self, record: Record) -> bool:
        lock = self.locks.get(record.claim.hash)
        return lock is not None and lock.etag == record.claim.etag

    @rule(target=records, worker=st.integers(0, WORKERS - 1), hash_=st.sampled_from(HASHES))
    def claim(self, worker, hash_):
        lock = self.locks.get(hash_)
        result = self.protocols[worker].claim(hash_)
        if lock is not None and not (lock.stale or lock.released):
            assert isinstance(result, Held)
            return multiple()
        assert isinstance(result, Claim)
        assert result.attempt == (1 if lock is None else lock.attempt + 1)
        assert result.reclaimed == (lock is not None and lock.stale and not lock.released)
        record = Record(worker, result)
        self.live[hash_].append(record)
        assert len(self.live[hash_]) == 1, "two live claims on one group"
        self.locks[hash_] = LockModel(attempt=result.attempt, etag=result.etag)
        return record

    @precondition(lambda self: any(h not in self.locks for h in self.HASHES))
    @rule(hash_=st.sampled_from(HASHES))
    def olmocr_worker_locks(self, hash_):
        if hash_ in self.locks:
            return
        etag = self.backend.create(layout.lock_key(hash_), b"")
        self.locks[hash_] = LockModel(attempt=1, etag=etag)

    @rule(hash_=st.sampled_from(HASHES))
    def lock_goes_stale(self, hash_):
        if hash_ not in self.locks:
            return
        make_stale(self.backend, hash_, 2 * LONG)
        self.locks[hash_].stale = True
        self.live[hash_] = []

    @rule(record=records)
    def release(self, record):
        hash_ = record.claim.hash
        expected = hash_ not in self.locks or self._lock_is_current(record)
        assert self.protocols[record.worker].release(record.claim) is expected
        if expected:
            self.locks.pop(hash_, None)
            self.live[hash_] = [r for r in self.live[hash_] if r is not record]

    @rule(record=records)
    def release_for_retry(self, record):
        hash_ = record.claim.hash
        expected = self._lock_is_current(record)
        assert self.protocols[record.worker].release_for_retry(record.claim, "boom") is expected
        if expected:
            self.locks[hash_] = LockModel(attempt=record.claim.attempt, etag=None, released=True)
            self.live[hash_] = [r for r in self.live[hash_] if r is not record]

    @rule(target=records, record=records)
    def next_attempt(self, record):
        hash_ = record.claim.hash
        expected = self._lock_is_current(record)
        result = self.protocols[record.worker].next_attempt(record.claim, "retry")
        if not expected:
            assert result is None
            return multiple()
        assert result is not None and result.attempt == record.claim.attempt + 1
        renewed = Record(record.worker, result)
        self.locks[hash_] = LockModel(attempt=result.attempt, etag=result.etag)
        self.live[hash_] = [renewed]
        return renewed

    @rule(record=records)
    def mark_done(self, record):
        hash_ = record.claim.hash
        ours = self.protocols[record.worker].mark_done(record.claim)
        # True for the first completion, and again for the same claim (a retry
        # of its own write whose response was lost); False for anyone else's.
        first = self.done_created[hash_] == 0
        assert ours is (first or self.done_owner.get(hash_) == record.claim.owner)
        if first:
            self.done_created[hash_] = 1
            self.done_owner[hash_] = record.claim.owner

    @invariant()
    def at_most_one_live_claim_and_one_done_flag(self):
        for hash_ in self.HASHES:
            assert len(self.live[hash_]) <= 1
            assert self.done_created[hash_] <= 1
            assert self.backend.exists(layout.done_key(hash_)) == (self.done_created[hash_] == 1)

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
            for record in self.live[hash_]:
                assert LockBody.decode(stored.body).owner == record.claim.owner


ClaimMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=30, deadline=None)
test_claim_protocol_state_machine = ClaimMachine.TestCase
