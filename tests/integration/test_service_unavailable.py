"""A processor that raises ServiceUnavailable: its group goes back unrun, no attempt used, and its worker stops.

Against the moto server over HTTP, through both runners: the processor in the
worker's own thread, and in a processor host (real processes, the exception's
kind carried across the host's wire). The processors are in
tests/helpers/unavailable_processors.py; each waits, before it raises, until
the worker has claimed the next group ahead of it, so that the claim made
ahead is there to be given back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import unavailable_processors as processors
from helpers.lambda_context import LambdaContext
from support import run_cli

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.cli.output import EXIT_SERVICE_UNAVAILABLE
from s3wq.config import ENV_PROCESSOR
from s3wq.host.runners import HostRunner
from s3wq.host.sandbox import ProcessorHost
from s3wq.model import GroupOutcome, LockState, Outcome, StopReason
from s3wq.ops.status import queue_status
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout
from s3wq.worker import WorkerObserver

from .conftest import HELPERS_DIR

GROUPS = 4
PROCESSORS = ["raises", "raises_its_own", "raises_from_a_pool"]


@pytest.fixture
def helpers_importable(monkeypatch, helper_env):
    """tests/helpers on this process's path (the in-process runner) and on the processor host's (it inherits the worker's)."""
    monkeypatch.syspath_prepend(str(HELPERS_DIR))
    return helper_env


class Heard(WorkerObserver):
    def __init__(self) -> None:
        self.finished: list[tuple[str, GroupOutcome]] = []

    def group_finished(self, group, claim, outcome, seconds) -> None:
        self.finished.append((group.hash, outcome))


def populate(backend) -> list[str]:
    paths = [f"s3://inputs/pages/doc-{n}.pdf" for n in range(GROUPS)]
    WorkIndex(backend).populate(paths, 1)
    return [layout.group_hash([p]) for p in paths]


def runs(record_dir: Path) -> list[tuple[str, int]]:
    """Every run recorded, as (hash, attempt)."""
    return sorted((name.split("-")[0], int(name.split("-")[1])) for name in (p.name for p in record_dir.iterdir()))


def lock_of(backend, hash_: str) -> LockBody | None:
    key = layout.lock_key(hash_)
    return LockBody.decode(backend.read(key).body) if backend.exists(key) else None


def run_worker(backend, workspace: str, name: str, *, in_process: bool, observer: WorkerObserver | None = None):
    settings = WorkerSettings(time_limit=120, lease=60)
    if in_process:
        return Worker(backend, getattr(processors, name), settings, worker_id="w1", position=0.0, observer=observer).run()
    host = ProcessorHost(f"unavailable_processors:{name}", workspace)
    try:
        return Worker(backend, None, settings, runner=HostRunner(host), worker_id="w1", position=0.0, observer=observer).run()
    finally:
        host.close()


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "host"])
@pytest.mark.parametrize("name", PROCESSORS)
def test_the_group_goes_back_unrun_no_attempt_used_and_the_worker_stops(
    s3_backend, s3_workspace, helpers_importable, record_dir, name, in_process
):
    hashes = populate(s3_backend)
    heard = Heard()

    report = run_worker(s3_backend, s3_workspace, name, in_process=in_process, observer=heard)

    # One run, and nothing after it: the worker stopped claiming, saying why.
    [(ran, attempt)] = runs(record_dir)
    assert attempt == 1
    assert report.stopped_reason == StopReason.SERVICE_UNAVAILABLE
    assert (report.unavailable, report.processed, report.failed, report.retried) == (1, 0, 0, 0)
    assert report.service_error == processors.MESSAGE
    doc = report.to_dict()
    assert (doc["stopped_reason"], doc["service_error"], doc["unavailable"]) == ("service_unavailable", processors.MESSAGE, 1)
    assert heard.finished == [(ran, GroupOutcome.UNAVAILABLE)]
    # Its lock: released, outcome unavailable, its attempt unused, the exception's message as its error.
    lock = lock_of(s3_backend, ran)
    assert (lock.state, lock.outcome, lock.counted, lock.attempt, lock.next_attempt) == (
        LockState.RELEASED,
        Outcome.UNAVAILABLE,
        False,
        1,
        1,
    )
    assert lock.error == processors.MESSAGE
    # The groups claimed ahead of it were given back unrun: no lock held, none counted, none run.
    for other in set(hashes) - {ran}:
        body = lock_of(s3_backend, other)
        assert body is None or (body.state, body.counted, body.next_attempt) == (LockState.RELEASED, False, 1), body
    assert list(s3_backend.list_keys(layout.DONE_PREFIX)) == [] and list(s3_backend.list_keys(layout.FAILED_PREFIX)) == []
    status = queue_status(s3_backend)
    assert (status.done, status.failed, status.locked, status.pending, status.unavailable) == (0, 0, 0, GROUPS, 1)

    # Claimable at once by the next worker, at the same attempt.
    again = Worker(s3_backend, processors.works, WorkerSettings(time_limit=120, lease=60), worker_id="w2").run()

    assert (again.processed, again.failed, again.stopped_reason) == (GROUPS, 0, StopReason.QUEUE_EMPTY)
    assert json.loads(s3_backend.read(layout.done_key(ran)).body)["attempt"] == 1
    assert sorted(runs(record_dir)) == sorted([(ran, 1), *((h, 1) for h in hashes)])


def test_a_group_claimed_ahead_of_the_run_is_there_to_give_back(s3_backend, s3_workspace, helpers_importable, record_dir):
    # The processors wait for a second lock before they raise: a claim made ahead of their run, the one given back.
    populate(s3_backend)
    seen: list[int] = []

    class Counting(WorkerObserver):
        def group_finished(self, group, claim, outcome, seconds) -> None:
            seen.append(len(list(s3_backend.list_keys("worker_locks/"))))

    run_worker(s3_backend, s3_workspace, "raises", in_process=True, observer=Counting())

    [_] = runs(record_dir)
    assert seen == [2]  # its own lock, released, and the claim made ahead of it, not yet given back
    assert queue_status(s3_backend).locked == 0


def test_work_says_what_happened_and_exits_with_its_own_code(s3_workspace, helper_env, record_dir, tmp_path):
    manifest = tmp_path / "manifest.txt"
    manifest.write_text("".join(f"s3://inputs/pages/doc-{n}.pdf\n" for n in range(GROUPS)))
    assert run_cli("populate", s3_workspace, f"@{manifest}", "--group-size", "1", "--no-check").returncode == 0

    work = run_cli("work", s3_workspace, "--processor", "unavailable_processors:raises", "--time-limit", "120")

    assert work.returncode == EXIT_SERVICE_UNAVAILABLE == 69, work.stderr
    assert work.stdout.strip().endswith("stopped: service_unavailable")
    [line] = [line for line in work.stderr.splitlines() if line.startswith("s3wq: ")]
    assert processors.MESSAGE in line
    assert "handed back unrun (no attempt used), nothing failed" in line and line.endswith("run again when it is up")
    assert len(runs(record_dir)) == 1
    status = run_cli("status", s3_workspace, "--json")
    counts = json.loads(status.stdout)
    assert (status.returncode, counts["failed"], counts["done"], counts["pending"], counts["unavailable"]) == (0, 0, 0, GROUPS, 1)
    shown = run_cli("status", s3_workspace).stdout
    assert "1 group handed back unrun, no attempt used: a service the processor needs was unavailable" in shown
    assert f"{EXIT_SERVICE_UNAVAILABLE}  the processor raised ServiceUnavailable" in run_cli("work", "--help").stdout


def test_the_lambda_worker_logs_an_error_and_returns_the_stop_reason(lambda_env, s3_backend, record_dir, caplog):
    lambda_env(**{ENV_PROCESSOR: "unavailable_processors:raises"})
    populate(s3_backend)
    from s3wq.handlers import worker

    doc = worker.handler({"worker_index": 0, "workers": 1}, LambdaContext(60))

    assert (doc["stopped_reason"], doc["service_error"], doc["unavailable"], doc["failed"]) == (
        "service_unavailable",
        processors.MESSAGE,
        1,
        0,
    )
    [stopped] = [r for r in caplog.records if "this worker stopped" in r.getMessage()]
    assert stopped.levelname == "ERROR" and processors.MESSAGE in stopped.getMessage()
    assert stopped.stopped_reason == "service_unavailable"  # the report, as the log's keys
