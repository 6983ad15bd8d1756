"""How a run's end is judged, and when a claim is renewed before its run.

Work left behind is a failure (kind leftover); a claim is renewed before
its run, and while it waits ahead of one, when any taker may soon call it stale.

On a hand-moved clock, as in ``test_lease.py``; the worker-level cases run
in this process on a local workspace.
"""

from __future__ import annotations

import threading
import time

import pytest

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.host.run_ends import Raised, Returned
from s3wq.model import LockState, Outcome
from s3wq.protocol import clock
from s3wq.protocol.bodies import LockBody, load_object
from s3wq.protocol.claims import ClaimProtocol
from s3wq.protocol.lease import LeaseKeeper, lease_margin
from s3wq.protocol.tracebacks import ErrorFrame
from s3wq.store import layout
from s3wq.worker.breaker import failure_of

HASH = layout.group_hash(["s3://inputs/a.pdf"])


# --- what a run that left work behind is ---------------------------------------------------------------


def test_a_run_that_returned_or_raised_with_nothing_left_running_is_judged_as_before():
    assert failure_of(Returned()) is None
    failure = failure_of(Raised("ValueError: bad", "Traceback...", ErrorFrame("p.py", 3, "process", "x()")))
    assert (failure.kind, failure.error, failure.bug, failure.frame.line) == (Outcome.ERROR, "ValueError: bad", "ValueError: bad", 3)


def test_a_run_that_left_work_running_failed_whether_it_returned_or_raised():
    returned = failure_of(Returned(2, ("a",), leftovers="1 process (sleep)"))
    assert returned.kind == Outcome.LEFTOVER and "1 process (sleep)" in returned.error
    raised = failure_of(Raised("ValueError: bad", "Traceback...", ErrorFrame("p.py", 3, "process"), leftovers="1 thread (poller)"))
    assert raised.kind == Outcome.LEFTOVER
    assert "1 thread (poller)" in raised.error and "ValueError: bad" in raised.error  # what was left, and what it raised
    assert (raised.traceback, raised.frame.function) == ("Traceback...", "process")


def test_one_bug_that_leaves_work_behind_reads_the_same_to_the_breaker_in_every_group():
    # A thread's default name counts threads, and process ids differ: one bug all the same.
    first = failure_of(Returned(leftovers="1 thread (Thread-3 (poll))"))
    second = failure_of(Returned(leftovers="1 thread (Thread-17 (poll))"))
    assert first.bug == second.bug and first.error != second.error
    assert failure_of(Returned(leftovers="1 process (sleep)")).bug != first.bug


def test_a_worker_never_records_done_for_a_run_that_left_work_behind_and_fails_it_as_leftover(local_backend, monkeypatch):
    WorkIndex(local_backend).populate(["s3://inputs/a.pdf"], 1)
    calls = []

    def run(self, group, keeper, *, deadline_epoch):
        calls.append(keeper.claim.attempt)
        return Returned(leftovers="1 process (sleep)")

    monkeypatch.setattr("s3wq.host.runners.InProcessRunner.run", run)
    settings = WorkerSettings(time_limit=30, max_attempts=2, retry_backoff=0.01)

    report = Worker(local_backend, lambda group, ctx: None, settings, worker_id="w1").run()

    assert calls == [1, 2]  # retried like an error
    assert (report.processed, report.failed, report.leftovers, report.retried) == (0, 1, 2, 1)
    assert not local_backend.exists(layout.done_key(HASH))
    flag = load_object(local_backend.read(layout.failed_key(HASH)).body)
    assert (flag["kind"], flag["attempts"]) == (Outcome.LEFTOVER, 2) and "1 process (sleep)" in flag["error"]
    lock = LockBody.decode(local_backend.read(layout.lock_key(HASH)).body)
    assert (lock.state, lock.outcome) == (LockState.FAILED, Outcome.LEFTOVER)


def test_a_lock_handed_back_as_leftover_reads_back_as_s3wqs_own():
    body = LockBody(owner="w1:x", worker_id="w1", attempt=1, lease_seconds=30).rewritten(
        state="released", outcome=Outcome.LEFTOVER, counted=True
    )
    # An outcome the reader does not know would make the lock foreign: honoured for olmocr's 1,800 s.
    assert LockBody.decode(body.encode()) == body


# --- a claim renewed before its run ----------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def fake_clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(clock, "now", fake)
    return fake


def test_a_claim_is_due_for_renewal_before_its_run_by_the_strictest_judge(fake_clock, local_backend):
    # A lease of 2 hours, and olmocr's workers beside: they call a lock stale after 1,800 s.
    proto = ClaimProtocol(local_backend, worker_id="gpu-box", lease_seconds=7200, foreign_lock_timeout=1800)
    claim = proto.claim(HASH)
    long_run = LeaseKeeper(proto, claim, stop_at=claim.sent_at + 7000)
    assert not long_run.renewal_due() and long_run.state.held()
    fake_clock.t = claim.sent_at + 600  # a third of what a write covers for olmocr: the keeper would renew now
    assert long_run.renewal_due()
    # A run that ends within what the write covers never renews (a Lambda worker's) -- until that cover runs out.
    short_run = LeaseKeeper(proto, claim, stop_at=claim.sent_at + 1700)
    assert not short_run.renewal_due()
    # Held as long as olmocr's workers honour the lock, not for s3wq's lease of 2 hours.
    assert short_run.state.valid_until == claim.sent_at + 1800 - lease_margin(1800)
    fake_clock.t = short_run.state.valid_until
    assert short_run.renewal_due() and not short_run.state.held()


def test_a_foreign_timeout_shorter_than_a_long_leases_margin_still_leaves_a_run_its_cover(fake_clock, local_backend):
    # A lease of 300 s has a 5 s margin; a foreign timeout of 2 s covers a write for 2 s: the margin must come from that.
    proto = ClaimProtocol(local_backend, worker_id="w", lease_seconds=300, foreign_lock_timeout=2)
    claim = proto.claim(HASH)
    keeper = LeaseKeeper(proto, claim, stop_at=claim.sent_at + 20)
    assert keeper.state.held() and keeper.tick() is None
    assert keeper.state.valid_until == claim.sent_at + 2 - lease_margin(2) > claim.sent_at


def test_a_retry_pause_is_at_most_a_third_of_what_a_write_covers():
    settings = WorkerSettings(time_limit=60, lease=20, foreign_lock_timeout=3, retry_backoff=10)
    assert settings.backoff_before(2) == pytest.approx(1.0)


def test_a_claim_made_ahead_is_renewed_while_it_waits_for_a_long_run(local_backend):
    WorkIndex(local_backend).populate(["s3://inputs/a.pdf", "s3://inputs/b.pdf"], 1)
    first_run_over = threading.Event()
    oldest: list[float] = []

    def processor(group, ctx):
        if first_run_over.is_set():
            return
        # The other group is claimed ahead at once behind this first run: watch how old its lock gets.
        give_up = time.monotonic() + 3.5
        while time.monotonic() < give_up:
            for key in ctx.backend.list_keys("worker_locks/worker_"):
                if key != layout.lock_key(group.hash):
                    oldest.append(ctx.backend.read(key).age_seconds)
            time.sleep(0.05)
        first_run_over.set()

    # The foreign timeout of 3 s is the strictest judge here (a lease of 20 s). (A run in this process
    # that outlives what its lock's last write covers ends the process: 1.5 s of slack for each renewal.)
    settings = WorkerSettings(time_limit=30, lease=20, foreign_lock_timeout=3)
    report = Worker(local_backend, processor, settings, worker_id="w1").run()

    assert (report.processed, report.lost_locks) == (2, 0)
    assert oldest and max(oldest) < 3 - lease_margin(20)
    assert report.renewals >= 4  # the run's own lock and the one claimed ahead, every second
