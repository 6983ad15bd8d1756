"""A worker comes back to every group it handed back unfinished, and a worker's first claim is always "full".

Real workers with real timing: the ``Worker`` in this process, with its
processor in a processor host (a child process, as ``s3wq work`` runs it),
on a local directory and on the local S3 server. "Load" is simulated
deterministically by a store that is slow to answer the worker: slow on its
lease renewals, or slow on every request from its start to its first claim.
The processor records from its own clock when it ran
(:mod:`heartbeat_processor`), so the tests assert the guarantees -- no
overlap, every group done or failed after exactly its attempts, stop reasons
that say what is left -- never a schedule.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from s3wq import Worker, WorkerSettings, WorkIndex, open_backend
from s3wq.errors import ObjectNotFound
from s3wq.host.runners import HostRunner
from s3wq.host.sandbox import ProcessorHost
from s3wq.model import LockState, Outcome
from s3wq.ops.status import queue_status
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

from .heartbeat_processor import MARK_DIR_ENV, ONLY_FIRST_ENV, SECONDS_ENV, SECONDS_FOR_ENV, overlap_seconds, read_runs

PROCESSOR = "reliability.heartbeat_processor:process"


class SlowStore:
    """The worker's store, with a pause before some of its requests: a loaded machine, a congested network.

    ``slow_renewals`` renewals of a held lock (a rewrite of a lock by the
    claim that holds it) each wait ``renewal_seconds`` before they are sent;
    every request before the worker's first claim is made (the probe, the
    index, the listing, the claim's create and the done check after it) waits
    ``start_seconds``. Everything else goes through at once.
    """

    def __init__(self, inner, *, renewal_seconds: float = 0.0, slow_renewals: int = 0, start_seconds: float = 0.0):
        self.inner = inner
        self.renewal_seconds, self.slow_renewals, self.start_seconds = renewal_seconds, slow_renewals, start_seconds
        self.renewals_slowed = 0
        self._starting = start_seconds > 0
        self._lock = threading.Lock()

    def __getattr__(self, name):
        attribute = getattr(self.inner, name)
        if not callable(attribute) or not self._starting:
            return attribute

        def slowly(*args, **kwargs):
            if self._starting:
                time.sleep(self.start_seconds)
                if name == "exists" and args and args[0].startswith(layout.DONE_PREFIX):
                    # The done check right after a claim: the run starts now.
                    self._starting = False
            return attribute(*args, **kwargs)

        return slowly

    def replace(self, key: str, body: bytes, etag: str) -> str:
        if self._starting:
            time.sleep(self.start_seconds)  # a takeover: the claim
        new = LockBody.decode(body) if key.startswith("worker_locks/") else None
        if new is not None and new.state == LockState.HELD:
            try:
                current = LockBody.decode(self.inner.read(key).body)
            except ObjectNotFound:
                current = None
            with self._lock:
                renewal = current is not None and current.owner == new.owner and self.renewals_slowed < self.slow_renewals
                self.renewals_slowed += renewal
            if renewal:
                time.sleep(self.renewal_seconds)
        return self.inner.replace(key, body, etag)


@pytest.fixture
def store(request, workspace):
    """The workspace opened in this process, and its URI for the processor host."""
    s3_client = request.getfixturevalue("s3_client") if workspace.startswith("s3://") else None
    return workspace, open_backend(workspace, s3_client=s3_client)


@pytest.fixture
def heartbeat_env(monkeypatch, mark_dir):
    monkeypatch.setenv(MARK_DIR_ENV, str(mark_dir))
    monkeypatch.setenv(ONLY_FIRST_ENV, "1")
    return monkeypatch


def populated(backend, names: list[str]) -> dict[str, str]:
    paths = [f"s3://inputs/revisit/{name}" for name in names]
    WorkIndex(backend).populate(paths, 1)
    return {name: layout.group_hash([path]) for name, path in zip(names, paths)}


def run_worker(workspace: str, backend, settings: WorkerSettings, worker_id: str, **kwargs):
    host = ProcessorHost(PROCESSOR, workspace)
    try:
        return Worker(backend, None, settings, runner=HostRunner(host), worker_id=worker_id, **kwargs).run()
    finally:
        host.close()


def test_a_worker_whose_lease_lapsed_on_a_late_renewal_comes_back_to_the_group_and_finishes_it(store, heartbeat_env, mark_dir):
    workspace, backend = store
    groups = populated(backend, ["slow.txt", "a.txt", "b.txt"])
    # The slow group's first run outlives a third of the 3 s lease, so it renews; that renewal comes back after
    # 3.5 s, past the lease: the worker must stop the run by its own clock, and it hands the group back.
    heartbeat_env.setenv(SECONDS_ENV, "0.1")
    heartbeat_env.setenv(SECONDS_FOR_ENV, json.dumps({"slow.txt": "hang"}))
    slow = SlowStore(backend, renewal_seconds=3.5, slow_renewals=1)

    report = run_worker(workspace, slow, WorkerSettings(time_limit=60, lease=3), "w1")

    runs = read_runs(mark_dir)
    print(f"\nlease lost on a late renewal: report {report.to_dict()}; runs {[(r.hash[:6], r.attempt, round(r.seconds, 2)) for r in runs]}")
    assert slow.renewals_slowed == 1 and report.lost_locks == 1
    assert overlap_seconds(runs) == 0
    # It came back to the group it handed back, and finished it: nothing is left, so "queue_empty" is true.
    assert (report.processed, report.failed, report.stopped_reason) == (3, 0, "queue_empty")
    slow_runs = [r for r in runs if r.hash == groups["slow.txt"]]
    assert len(slow_runs) == 2 and slow_runs[0].end_ns is None and slow_runs[1].end_ns is not None
    flag = json.loads(backend.read(layout.done_key(groups["slow.txt"])).body)
    # A lease lost with the run stopped by its holder used no attempt.
    assert (flag["worker_id"], flag["attempt"]) == ("w1", 1)
    status = queue_status(backend)
    assert (status["done"], status["failed"], status["remaining"], status["locked"]) == (3, 0, 0, 0)


def test_a_worker_whose_renewals_are_always_late_never_reports_an_empty_queue(local_backend, local_workspace, heartbeat_env, mark_dir):
    (hash_,) = populated(local_backend, ["slow.txt"]).values()
    heartbeat_env.setenv(SECONDS_ENV, "hang")
    heartbeat_env.delenv(ONLY_FIRST_ENV)
    slow = SlowStore(local_backend, renewal_seconds=3.5, slow_renewals=1000)

    report = run_worker(local_workspace, slow, WorkerSettings(time_limit=9, lease=3), "w1")

    runs = read_runs(mark_dir)
    print(f"\nrenewals always late: report {report.to_dict()}; runs {[(r.attempt, round(r.seconds, 2)) for r in runs]}")
    assert overlap_seconds(runs) == 0
    # It kept coming back to the group until its time was up, and says so: the group is still pending.
    assert report.lost_locks == len(runs) >= 2
    assert (report.processed, report.stopped_reason) == (0, "time_limit")
    assert queue_status(local_backend)["remaining"] == 1
    assert not local_backend.exists(layout.done_key(hash_)) and not local_backend.exists(layout.failed_key(hash_))


def test_a_hung_group_fails_after_max_attempts_worker_lives_however_slow_each_start_up(store, heartbeat_env, mark_dir):
    workspace, backend = store
    # The hung group first in the index, so that each worker's first claim is that group.
    names = ["a.txt", "b.txt"]
    first = min(layout.group_hash([f"s3://inputs/revisit/{name}"]) for name in names)
    hung_name = next(n for i in range(1000) if layout.group_hash([f"s3://inputs/revisit/{(n := f'hung-{i}.txt')}"]) < first)
    hung = populated(backend, [hung_name, *names])[hung_name]
    heartbeat_env.setenv(SECONDS_ENV, "0.1")
    heartbeat_env.setenv(SECONDS_FOR_ENV, json.dumps({"hung-": "hang"}))
    heartbeat_env.delenv(ONLY_FIRST_ENV)
    max_attempts = 3
    # A 4 s limit: a run may have 3.8 s at most. Every request up to the first claim takes 0.1 s more --
    # the probe, the index, the listing, the claim itself, the done check -- which is more than the 5 %
    # that makes a run "nearly full" if the run is judged by what is left when it starts.
    settings = WorkerSettings(time_limit=4, max_attempts=max_attempts)

    reports = []
    for life in range(1, max_attempts + 1):
        slow = SlowStore(backend, start_seconds=0.1)
        report = run_worker(workspace, slow, settings, f"life{life}", position=0.0)
        reports.append(report)
        print(f"\nlife {life}: {report.to_dict()}")
        lock = LockBody.decode(backend.read(layout.lock_key(hung)).body)
        # The hung group was this worker's first claim, stopped at the worker's deadline, and it counted.
        assert (report.timed_out, report.not_enough_time, lock.attempt, lock.counted) == (1, 0, life, True), lock
        if life < max_attempts:
            # Nothing else fits in what is left: the worker stops, saying its time is up, not that the queue is empty.
            assert (report.failed, report.stopped_reason) == (0, "time_limit")

    runs = read_runs(mark_dir)
    print(f"\nhung group, slow start-ups: runs {[(r.worker, r.attempt, round(r.seconds, 2)) for r in runs if r.hash == hung]}")
    assert overlap_seconds(runs) == 0
    assert reports[-1].failed == 1
    assert [r.attempt for r in runs if r.hash == hung] == list(range(1, max_attempts + 1))
    flag = json.loads(backend.read(layout.failed_key(hung)).body)
    assert (flag["kind"], flag["attempts"], flag["worker_id"]) == (Outcome.TIMEOUT, max_attempts, f"life{max_attempts}")
    assert "ran out of time" in flag["error"]
    assert LockBody.decode(backend.read(layout.lock_key(hung)).body).state == LockState.FAILED

    # One more worker of the same settings finishes the rest, and only then is the queue empty.
    last = run_worker(workspace, backend, settings, "finisher", position=0.0)
    assert (last.processed, last.failed, last.stopped_reason) == (2, 0, "queue_empty")
    status = queue_status(backend)
    assert (status["done"], status["failed"], status["remaining"]) == (2, 1, 0)
    assert overlap_seconds(read_runs(mark_dir)) == 0
