"""The worker loop with the processor in its own thread, on a local workspace, asserting on the objects left behind."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from s3wq.config import WorkerSettings
from s3wq.errors import ObjectNotFound, StorageError
from s3wq.host.stopping import GracefulStop
from s3wq.index import WorkIndex
from s3wq.model import LockState, Outcome
from s3wq.ops.status import queue_status
from s3wq.protocol import clock
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import ClaimProtocol
from s3wq.protocol.lease import LeaseState
from s3wq.store import layout
from s3wq.worker import Worker
from s3wq.worker.budget import Budget
from s3wq.worker.finish import RETURNED_CLEAN, Finisher
from s3wq.worker.report import WorkerReport

LONG = 60.0


class Recorder:
    def __init__(self, error: Exception | None = None):
        self.calls: list[tuple[str, int]] = []
        self.error = error

    def __call__(self, group, ctx):
        self.calls.append((group.hash, ctx.attempt))
        assert ctx.claim_is_held() and ctx.owner.startswith(f"{ctx.worker_id}:")
        if self.error is not None:
            raise self.error


def populated(backend, n_paths: int, group_size: int) -> list:
    WorkIndex(backend).populate([f"s3://inputs/doc-{i:03d}.pdf" for i in range(n_paths)], group_size)
    return list(WorkIndex(backend).iter_groups())


def keys(backend, prefix: str) -> list[str]:
    return list(backend.list_keys(prefix))


def age(backend, hash_: str, seconds: float) -> None:
    path = backend.root / layout.lock_key(hash_)
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_worker_drains_the_queue_and_leaves_only_done_flags(local_backend):
    groups = populated(local_backend, 10, 3)
    processor = Recorder()

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG), worker_id="w1").run()

    assert (report.processed, report.failed, report.renewals, report.stopped_reason) == (len(groups), 0, 0, "queue_empty")
    assert sorted(h for h, _ in processor.calls) == sorted(g.hash for g in groups)
    assert keys(local_backend, "worker_locks/") == []
    assert keys(local_backend, "done_flags/") == sorted(layout.done_key(g.hash) for g in groups)
    assert queue_status(local_backend)["done"] == len(groups)


def test_a_group_fails_after_its_attempts_with_the_kind_of_failure_recorded(local_backend):
    [group] = populated(local_backend, 2, 5)
    processor = Recorder(RuntimeError("disk on fire"))

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG, max_attempts=3), worker_id="w1").run()

    assert processor.calls == [(group.hash, 1), (group.hash, 2), (group.hash, 3)]
    assert (report.processed, report.failed, report.retried) == (0, 1, 2)
    doc = json.loads(local_backend.read(layout.failed_key(group.hash)).body)
    assert (doc["hash"], doc["paths"], doc["attempts"], doc["kind"], doc["worker_id"]) == (group.hash, list(group.paths), 3, "error", "w1")
    assert "RuntimeError: disk on fire" in doc["error"]
    # The lock stays, marked failed, so that no worker starts the group over.
    assert LockBody.decode(local_backend.read(layout.lock_key(group.hash)).body).state == LockState.FAILED
    assert queue_status(local_backend) == {
        "groups": 1,
        "paths": 2,
        "done": 0,
        "failed": 1,
        "locked": 0,
        "claimed_ahead": 0,
        "pending": 0,
        "remaining": 0,
        "finished": 1,
        "released": 0,
        "unavailable": 0,
        "wait_seconds": 0,
    }


def test_a_group_whose_holders_all_vanished_fails_as_lost_without_running(local_backend):
    [group] = populated(local_backend, 1, 1)
    gone = LockBody(owner="w0:gone", worker_id="w0", attempt=3, lease_seconds=30)
    local_backend.create(layout.lock_key(group.hash), gone.encode())
    age(local_backend, group.hash, 31)
    processor = Recorder()

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG, max_attempts=3), worker_id="w1").run()

    assert processor.calls == []
    assert (report.failed, report.reclaimed) == (1, 1)
    doc = json.loads(local_backend.read(layout.failed_key(group.hash)).body)
    assert (doc["attempts"], doc["kind"]) == (3, Outcome.LOST)


def test_a_worker_without_time_claims_nothing(local_backend):
    populated(local_backend, 6, 2)
    settings = WorkerSettings(time_limit=LONG)
    processor = Recorder()

    report = Worker(local_backend, processor, settings, worker_id="w1", remaining_time=lambda: settings.effective_safety_margin + 0.1).run()

    assert report.stopped_reason == "time_limit"
    assert (report.processed, report.conflicts, processor.calls) == (0, 0, [])
    assert keys(local_backend, "worker_locks/") == [] and keys(local_backend, "done_flags/") == []


def test_a_worker_leaves_a_group_a_live_worker_holds(local_backend):
    groups = populated(local_backend, 6, 2)
    held = ClaimProtocol(local_backend, worker_id="w0", lease_seconds=900).claim(groups[0].hash)
    processor = Recorder()

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG), worker_id="w1").run()

    assert (report.processed, report.conflicts, report.stopped_reason) == (2, 1, "locked_by_others")
    assert groups[0].hash not in {h for h, _ in processor.calls}
    assert LockBody.decode(local_backend.read(layout.lock_key(groups[0].hash)).body).owner == held.owner
    status = queue_status(local_backend)
    assert (status["locked"], status["remaining"]) == (1, 1)
    assert 890 < status["wait_seconds"] <= 902


def test_a_worker_leaves_a_group_that_needs_more_time_than_it_has_left(local_backend):
    _first, timed_out = sorted(populated(local_backend, 2, 1), key=lambda g: g.hash)
    protocol = ClaimProtocol(local_backend, worker_id="earlier", lease_seconds=60)
    protocol.hand_back(protocol.claim(timed_out.hash, budget=20), Outcome.TIMEOUT, counted=False, needs_seconds=20)
    before = local_backend.read(layout.lock_key(timed_out.hash)).body
    left = {"seconds": 60.0}

    def uses_most_of_the_time(group, ctx):
        left["seconds"] = 30.0  # the first group took half the worker's time

    report = Worker(
        local_backend,
        uses_most_of_the_time,
        WorkerSettings(time_limit=60),
        worker_id="w1",
        position=0.0,
        remaining_time=lambda: left["seconds"],
    ).run()

    # 27 s left, and the group needs twice its 20 s (or 95 % of a fresh worker's 57 s): not here.
    # (Claimed ahead while the first group ran, it is handed back as it was: released, uncounted, needs 20 s.)
    assert (report.processed, report.not_enough_time) == (1, 1)
    # The group is still pending, and this worker could not take it: the queue is not empty, and it says why it stopped.
    assert report.stopped_reason == "not_enough_time"
    lock, earlier = LockBody.decode(local_backend.read(layout.lock_key(timed_out.hash)).body), LockBody.decode(before)
    assert (lock.state, lock.outcome, lock.counted, lock.attempt, lock.needs_seconds) == (
        earlier.state,
        Outcome.TIMEOUT,
        False,
        earlier.attempt,
        20,
    )
    # A fresh worker takes it.
    report = Worker(local_backend, Recorder(), WorkerSettings(time_limit=60), worker_id="w2").run()
    assert (report.processed, report.stopped_reason) == (1, "queue_empty")


def test_a_stop_requested_before_the_first_claim_claims_nothing(local_backend):
    populated(local_backend, 4, 2)
    processor = Recorder()
    with GracefulStop() as stop:
        stop.request(signal.SIGTERM)
        report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG), worker_id="w1", stop=stop).run()

    assert (report.stopped_reason, processor.calls) == ("interrupted", [])
    assert stop.exit_code == 143
    assert keys(local_backend, "worker_locks/") == []


def claimed_behind(backend, hash_: str) -> int:
    """How many locks were claimed ahead behind the run of ``hash_``."""
    found = 0
    for key in backend.list_keys("worker_locks/"):
        try:
            body = LockBody.decode(backend.read(key).body)
        except ObjectNotFound:
            continue  # released meanwhile
        found += body is not None and body.behind == hash_
    return found


def test_the_next_group_is_claimed_at_once_behind_a_first_run_and_just_in_time_behind_later_ones(local_backend):
    groups = populated(local_backend, 4, 1)
    early_claims: list[int] = []

    def processor(group, ctx):
        # The first run has no history: its next group is claimed at once.
        # Later runs are expected to take about a second, so a claim made
        # 0.1 s in would hold its group idle for most of a run.
        first = not early_claims
        time.sleep(0.3 if first else 0.1)
        early_claims.append(claimed_behind(ctx.backend, group.hash))
        time.sleep(0.7 if first else 0.9)

    report = Worker(local_backend, processor, WorkerSettings(time_limit=LONG), worker_id="w1").run()

    assert report.processed == len(groups) and report.overlapped_seconds > 0
    assert early_claims == [1, 0, 0, 0]
    assert keys(local_backend, "worker_locks/") == []


def test_a_claim_made_ahead_that_outlived_its_lease_behind_a_long_run_is_renewed_and_run(local_backend):
    groups = populated(local_backend, 2, 1)
    processor = Recorder()
    # The next group, claimed at once behind the first run, is past its 3 s lease by the end. (The run
    # keeps its own lease by renewing every second; a shorter lease leaves a loaded machine too little
    # time for a renewal, and a run in this process that outlives its lease ends the process.)
    lease, first_run_seconds = 3, 3.5

    def slow_first(group, ctx):
        if not processor.calls:
            time.sleep(first_run_seconds)
        processor(group, ctx)

    report = Worker(local_backend, slow_first, WorkerSettings(time_limit=LONG, lease=lease), worker_id="w1").run()

    assert (report.processed, report.lost_locks, report.stopped_reason) == (len(groups), 0, "queue_empty")
    assert report.renewals >= 2  # the long run's own lease, kept
    assert sorted(h for h, _ in processor.calls) == sorted(g.hash for g in groups)
    assert keys(local_backend, "worker_locks/") == []


class FailingFirstRelease:
    """The workspace, except that the first lock release fails as a storage error would."""

    def __init__(self, inner):
        self.inner = inner
        self.failed = False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def delete(self, key, etag=None):
        if key.startswith("worker_locks/") and not self.failed:
            self.failed = True
            raise StorageError(f"DELETE {key} failed: injected")
        return self.inner.delete(key, etag)


def test_a_release_that_fails_behind_a_run_gives_back_the_claim_made_ahead_and_stops_the_worker(local_backend):
    groups = populated(local_backend, 3, 1)
    ran: list[str] = []

    def processor(group, ctx):
        ran.append(group.hash)
        time.sleep(0.2)

    with pytest.raises(StorageError):
        Worker(FailingFirstRelease(local_backend), processor, WorkerSettings(time_limit=LONG), worker_id="w1").run()

    # The first group's release failed while the second ran; the second's
    # done flag was written; the third, claimed ahead, never ran and holds no lock.
    assert len(ran) == 2 and set(ran) < {g.hash for g in groups}
    [never_ran] = {g.hash for g in groups} - set(ran)
    assert keys(local_backend, "done_flags/") == sorted(layout.done_key(h) for h in ran)
    assert layout.lock_key(never_ran) not in keys(local_backend, "worker_locks/")


# --- the done flag, beside the next run ------------------------------------------------------------------------


def _finisher_with_a_claim(backend):
    """A finisher and a fresh claim of a one-group workspace, as the worker makes them."""
    [group] = populated(backend, 1, 1)
    protocol = ClaimProtocol(backend, worker_id="w1", lease_seconds=LONG)
    settings = WorkerSettings(time_limit=LONG)
    report = WorkerReport(worker_id="w1")
    finisher = Finisher(protocol, settings, Budget(settings, lambda: LONG), report)
    claim = protocol.claim(group.hash)
    return finisher, group, claim, report


def test_a_deferred_done_flag_is_written_then_the_lock_released_and_joined_before_the_next_record(local_backend):
    finisher, group, claim, report = _finisher_with_a_claim(local_backend)
    end = finisher.complete(group, claim, LeaseState(valid_until=clock.now() + LONG), defer=True)
    report.count(end.counted)  # as GroupRunner.run counts the group done when its run returns
    finisher.finish_deferred()
    finisher.close()
    assert keys(local_backend, "done_flags/") == [layout.done_key(group.hash)]
    assert keys(local_backend, "worker_locks/") == []
    assert (report.processed, report.already_finished, report.lost_locks) == (1, 0, 0)


def test_a_deferred_done_flag_whose_lease_ran_out_first_writes_nothing_and_leaves_the_lock_to_go_stale(local_backend):
    finisher, group, claim, report = _finisher_with_a_claim(local_backend)
    report.processed = 1  # counted done as the run returned
    # The helper that writes it got no CPU until the lease (with its margin) had run out.
    assert finisher._record_done(group, claim, LeaseState(valid_until=0.0), RETURNED_CLEAN, deferred=True) is False
    assert keys(local_backend, "done_flags/") == []
    assert keys(local_backend, "worker_locks/") == [layout.lock_key(group.hash)]  # a taker runs the group again
    assert (report.processed, report.lost_locks) == (0, 1)


def test_a_deferred_done_flag_another_completion_wrote_first_counts_the_group_already_finished(local_backend):
    finisher, group, claim, report = _finisher_with_a_claim(local_backend)
    report.processed = 1
    local_backend.create(layout.done_key(group.hash), json.dumps({"owner": "someone-else", "worker_id": "w9", "attempt": 1}).encode())
    assert finisher._record_done(group, claim, LeaseState(valid_until=clock.now() + LONG), RETURNED_CLEAN, deferred=True) is False
    assert (report.processed, report.already_finished) == (0, 1)
    assert keys(local_backend, "worker_locks/") == []  # released all the same: the group is done
