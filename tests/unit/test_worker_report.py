"""The worker's report and what its observer hears: each group's end recorded once, counted by its outcome."""

from __future__ import annotations

import json
import pickle

import pytest

from s3wq.config import WorkerSettings
from s3wq.index import WorkIndex
from s3wq.model import GroupOutcome, StopReason
from s3wq.worker import Worker, WorkerObserver, WorkerReport
from s3wq.worker.report import GroupEnd

# The report's fields, as the Lambda worker returns them and the CLI prints them.
REPORT_FIELDS = [
    "worker_id",
    "processed",
    "input_errors",
    "failed",
    "conflicts",
    "reclaimed",
    "already_finished",
    "retried",
    "timed_out",
    "interrupted",
    "leftovers",
    "not_enough_time",
    "lost_locks",
    "renewals",
    "listings",
    "overlapped_seconds",
    "stopped_reason",
    "breaker_error",
    "unavailable",
    "service_error",
    "pages",
]

COUNTER_OF = {
    GroupOutcome.DONE: "processed",
    GroupOutcome.ALREADY_FINISHED: "already_finished",
    GroupOutcome.FAILED: "failed",
    GroupOutcome.NOT_ENOUGH_TIME: "not_enough_time",
    GroupOutcome.TIMED_OUT: "timed_out",
    GroupOutcome.INTERRUPTED: "interrupted",
    GroupOutcome.LOST: "lost_locks",
    GroupOutcome.UNAVAILABLE: "unavailable",
}


def test_the_report_reads_as_it_always_has():
    report = WorkerReport(worker_id="w1")
    report.stopped_reason = StopReason.PROCESSOR_FAILING
    doc = report.to_dict()
    assert list(doc) == REPORT_FIELDS
    assert json.loads(json.dumps(doc))["stopped_reason"] == "processor_failing"
    assert WorkerReport(worker_id="w1").to_dict()["stopped_reason"] == ""


def test_a_report_goes_to_another_process_and_counts_on_there():
    report = WorkerReport(worker_id="w1")
    report.count(GroupOutcome.DONE)
    copied = pickle.loads(pickle.dumps(report))
    assert copied == report
    copied.count(GroupOutcome.DONE)
    assert (copied.processed, report.processed) == (2, 1)


@pytest.mark.parametrize("outcome", list(GroupOutcome))
def test_each_outcome_adds_one_to_its_own_counter_and_to_no_other(outcome):
    report = WorkerReport(worker_id="w1")
    report.count(outcome)
    moved = {name: value for name, value in report.to_dict().items() if name != "worker_id" and value not in (0, 0.0, "", None)}
    # A hand-back for a retry's pause has no counter of its own (the retry is counted as retried where it is decided).
    assert moved == ({} if outcome == GroupOutcome.RELEASED else {COUNTER_OF[outcome]: 1})


def test_an_end_is_heard_and_counted_as_its_outcome_unless_told_otherwise():
    end = GroupEnd.of(GroupOutcome.TIMED_OUT, claim=None)
    assert (end.heard, end.counted) == (GroupOutcome.TIMED_OUT, GroupOutcome.TIMED_OUT)
    unheard = GroupEnd.of(GroupOutcome.LOST, claim=None, heard=False)
    assert (unheard.heard, unheard.counted) == (None, GroupOutcome.LOST)


class Heard(WorkerObserver):
    def __init__(self):
        self.started: list[str] = []
        self.finished: list[tuple[str, str]] = []

    def group_started(self, group, claim):
        self.started.append(group.hash)

    def group_finished(self, group, claim, outcome, seconds):
        self.finished.append((group.hash, outcome))


def test_a_group_that_fails_every_attempt_is_heard_failed_once_and_counted_once(local_backend):
    WorkIndex(local_backend).populate(["s3://inputs/a.pdf"], 1)
    (group,) = WorkIndex(local_backend).iter_groups()
    observer = Heard()

    def always_fails(group, ctx):
        raise ValueError("bad page")

    settings = WorkerSettings(time_limit=60, max_attempts=3, retry_backoff=0.01, breaker_groups=0)
    report = Worker(local_backend, always_fails, settings, worker_id="w1", observer=observer).run()

    assert observer.started == [group.hash] * 3  # each attempt starts a run
    assert observer.finished == [(group.hash, "failed")]
    assert (report.failed, report.retried, report.processed, report.lost_locks) == (1, 2, 0, 0)


def test_groups_that_return_are_each_heard_done_once_and_counted_processed(local_backend):
    WorkIndex(local_backend).populate([f"s3://inputs/{i}.pdf" for i in range(5)], 1)
    hashes = sorted(g.hash for g in WorkIndex(local_backend).iter_groups())
    observer = Heard()

    report = Worker(local_backend, lambda group, ctx: None, WorkerSettings(time_limit=60), worker_id="w1", observer=observer).run()

    assert sorted(observer.finished) == [(h, "done") for h in hashes]
    assert (report.processed, report.already_finished, report.stopped_reason) == (5, 0, StopReason.QUEUE_EMPTY)
