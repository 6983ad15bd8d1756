"""Leases against every fleet a user can build: real worker processes on the local S3 endpoint.

Each case runs ``s3wq work`` processes (or the Lambda handler, in processes
killed at their timeout as Lambda kills them) with a processor that records
from its own clock when it was running (:mod:`heartbeat_processor`), and
asserts that no two runs on one group ever overlapped, and that every group
ends done or failed -- none left stuck.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from support import run_cli
from s3wq import WorkerSettings, WorkIndex, Worker, layout
from s3wq.bodies import FAILED, INTERRUPTED, RELEASED, TIMEOUT, LockBody
from s3wq.claims import Claim, ClaimProtocol
from s3wq.localcloud.runner import Invocation, LambdaRunner
from s3wq.status import queue_status

from .heartbeat_processor import ONLY_FIRST_ENV, SECONDS_ENV, SECONDS_FOR_ENV, overlap_seconds, read_runs

PROCESSOR = "reliability.heartbeat_processor:process"
REPO = Path(__file__).resolve().parent.parent.parent
TESTS_DIR = REPO / "tests"


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen
    out: Path
    err: Path

    def wait(self, timeout: float = 90) -> int:
        return self.process.wait(timeout=timeout)

    def report(self) -> dict:
        return json.loads(self.out.read_text())

    def stderr(self) -> str:
        return self.err.read_text()


def start_worker(workspace: str, name: str, *args: str, env: dict, log_dir: Path) -> WorkerProcess:
    """``s3wq work`` as a user runs it, in its own process."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out, err = log_dir / f"{name}.out", log_dir / f"{name}.err"
    command = [sys.executable, "-m", "s3wq", "work", workspace, "--worker-id", name, "--json", "--processor", PROCESSOR, *args]
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr)
    return WorkerProcess(name, process, out, err)


def wait_until(predicate, *, timeout: float, what: str) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.02)


def one_group(s3_backend, name: str = "s3://inputs/lease/group.pdf") -> str:
    WorkIndex(s3_backend).populate([name], 1)
    return layout.group_hash([name])


def lock_of(s3_backend, hash_: str) -> LockBody | None:
    return LockBody.decode(s3_backend.read(layout.lock_key(hash_)).body)


# --- different limits, one group ------------------------------------------------------------------------------


@pytest.mark.parametrize("holder_args", [[], ["--lease", "1"]], ids=["holder-lease-30s", "holder-lease-1s-renewed"])
def test_a_worker_with_a_short_lease_never_takes_a_group_from_a_holder_with_a_long_one(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path, holder_args
):
    hash_ = one_group(s3_backend)
    env = {**child_env, SECONDS_ENV: "8"}
    holder = start_worker(s3_workspace, "A", "--time-limit", "30", *holder_args, env=env, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="A's run to start")
    time.sleep(2.6)
    # A 3 s worker with a 2 s lease: by its own setting A's lock would look stale.
    short = start_worker(s3_workspace, "B", "--time-limit", "3", "--lease", "2", env=env, log_dir=tmp_path)

    assert (holder.wait(), short.wait()) == (0, 0), holder.stderr() + short.stderr()
    runs = read_runs(mark_dir)
    print(f"\nmixed limits ({' '.join(holder_args) or 'default lease'}): runs {[(r.worker, round(r.seconds, 2)) for r in runs]}, "
          f"A renewed {holder.report()['renewals']} times, overlap {overlap_seconds(runs)} s")
    assert [r.worker for r in runs] == ["A"] and runs[0].end_ns is not None
    assert overlap_seconds(runs) == 0
    assert (short.report()["processed"], short.report()["conflicts"]) == (0, 1), short.report()
    assert holder.report()["processed"] == 1
    # Renewed only when its lease was shorter than the run: every third of a second for 8 s.
    assert (holder.report()["renewals"] >= 16) if holder_args else (holder.report()["renewals"] == 0)
    assert s3_backend.exists(layout.done_key(hash_)) and not s3_backend.exists(layout.lock_key(hash_))


def test_a_run_that_outlasts_its_worker_is_stopped_at_the_deadline_and_fails_as_a_timeout(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    # Both workers' limits are 3 s, the group takes 6 s: no worker here can finish it.
    hash_ = one_group(s3_backend)
    env = {**child_env, SECONDS_ENV: "6"}
    rounds = 0
    while not (s3_backend.exists(layout.failed_key(hash_)) or s3_backend.exists(layout.done_key(hash_))):
        rounds += 1
        assert rounds <= 10, "the group neither finished nor failed"
        first = start_worker(s3_workspace, f"r{rounds}a", "--time-limit", "3", "--lease", "2", env=env, log_dir=tmp_path)
        time.sleep(0.5)
        second = start_worker(s3_workspace, f"r{rounds}b", "--time-limit", "3", "--lease", "2", env=env, log_dir=tmp_path)
        # A worker exits 1 when it recorded a failed group, else 0.
        for worker in (first, second):
            assert worker.wait() == (1 if worker.report()["failed"] else 0), worker.stderr()

    runs = read_runs(mark_dir)
    print(f"\noverrun: {rounds} rounds, runs {[(r.worker, r.attempt, round(r.seconds, 2)) for r in runs]}, overlap {overlap_seconds(runs)} s")
    assert overlap_seconds(runs) == 0
    assert all(r.end_ns is None and r.seconds < 3.0 for r in runs), "a run went on past its worker's 3 s limit"
    # A run that had nearly its worker's full time counts; one that started late is handed on without.
    assert [r.attempt for r in runs][-1] == 3 and len(runs) >= 3
    flag = json.loads(s3_backend.read(layout.failed_key(hash_)).body)
    assert (flag["kind"], flag["attempts"]) == (TIMEOUT, 3) and "ran out of time" in flag["error"]
    assert lock_of(s3_backend, hash_).state == FAILED


def test_a_hung_processor_whose_lease_cannot_be_renewed_is_stopped_before_the_lease_ends(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path, fault_proxy
):
    hash_ = one_group(s3_backend)
    # The first run hangs; any later run is quick.
    env = {**child_env, SECONDS_ENV: "hang", ONLY_FIRST_ENV: "1"}
    holder = start_worker(s3_workspace, "A", "--time-limit", "120", "--lease", "3", env={**env, "AWS_ENDPOINT_URL": fault_proxy.endpoint}, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="A's run to start")
    time.sleep(1.5)  # A renews at 1 s
    cut_off_ns = time.time_ns()
    fault_proxy.set_plan(lambda request: "reset")  # from now on A cannot reach S3

    taker = start_worker(s3_workspace, "B", "--time-limit", "30", "--lease", "3", env=env, log_dir=tmp_path)
    assert taker.wait() == 0, taker.stderr()
    fault_proxy.set_plan(lambda request: None)
    holder_code = holder.wait(timeout=120)

    runs = read_runs(mark_dir)
    first, second = runs
    print(f"\nhung processor, renewals failing: A's run stopped {(first.running_until_ns - cut_off_ns) / 1e9:.2f} s after S3 went away "
          f"(lease 3 s); B started {(second.start_ns - first.running_until_ns) / 1e9:.2f} s after that; A exited {holder_code}")
    assert (first.worker, second.worker) == ("A", "B")
    # A's last write reached S3 before the cut: its lease ended at most 3 s after it. Its processor stopped before.
    assert first.running_until_ns < cut_off_ns + 3e9
    assert overlap_seconds(runs) == 0
    assert taker.report()["processed"] == 1 and taker.report()["reclaimed"] == 1
    assert s3_backend.exists(layout.done_key(hash_)) and not s3_backend.exists(layout.lock_key(hash_))


def test_a_frozen_worker_cannot_keep_its_processor_running_past_the_lease(s3_workspace, s3_backend, child_env, mark_dir, tmp_path):
    # SIGSTOP: the worker can neither renew nor stop its processor host. The host stops itself (a kernel timer).
    hash_ = one_group(s3_backend)
    env = {**child_env, SECONDS_ENV: "hang", ONLY_FIRST_ENV: "1"}
    frozen = start_worker(s3_workspace, "A", "--lease", "3", env=env, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="A's run to start")
    time.sleep(1.2)  # A renewed at 1 s
    frozen.process.send_signal(signal.SIGSTOP)
    frozen_ns = time.time_ns()
    try:
        taker = start_worker(s3_workspace, "B", "--lease", "3", env=env, log_dir=tmp_path)
        assert taker.wait() == 0, taker.stderr()
    finally:
        frozen.process.kill()
        frozen.process.wait()

    first, second = read_runs(mark_dir)
    print(f"\nfrozen worker: its processor stopped {(first.running_until_ns - frozen_ns) / 1e9:.2f} s after the freeze (lease 3 s); "
          f"B started {(second.start_ns - first.running_until_ns) / 1e9:.2f} s later")
    assert (first.worker, second.worker) == ("A", "B")
    # A's last renewal was sent before the freeze: the lease ended within 3 s of it, and the processor before that.
    assert first.running_until_ns < frozen_ns + 3e9
    assert overlap_seconds([first, second]) == 0
    assert taker.report()["processed"] == 1 and s3_backend.exists(layout.done_key(hash_))


# --- stopping a worker -------------------------------------------------------------------------------------


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_group_hands_the_group_back_for_an_immediate_takeover(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path, signum, code
):
    hash_ = one_group(s3_backend)
    env = {**child_env, SECONDS_ENV: "hang", ONLY_FIRST_ENV: "1"}
    stopped = start_worker(s3_workspace, "A", env=env, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="A's run to start")
    time.sleep(0.3)

    signalled = time.monotonic()
    stopped.process.send_signal(signum)
    assert stopped.wait(timeout=10) == code, stopped.stderr()
    exit_seconds = time.monotonic() - signalled
    lock = lock_of(s3_backend, hash_)
    # A default worker, started at once, takes the group at once: no waiting out A's 300 s lease.
    started = time.monotonic()
    taker = start_worker(s3_workspace, "B", env=env, log_dir=tmp_path)
    assert taker.wait() == 0, taker.stderr()
    taker_seconds = time.monotonic() - started

    runs = read_runs(mark_dir)
    print(f"\n{signal.Signals(signum).name}: A exited {code} after {exit_seconds:.2f} s; B took the group and was done in {taker_seconds:.2f} s")
    assert exit_seconds < 3
    assert (lock.state, lock.outcome, lock.counted, lock.attempt) == (RELEASED, INTERRUPTED, False, 1)
    assert stopped.report()["interrupted"] == 1 and stopped.report()["stopped_reason"] == "interrupted"
    assert f"stopped by {signal.Signals(signum).name}" in stopped.stderr()
    assert [r.worker for r in runs] == ["A", "B"] and overlap_seconds(runs) == 0
    assert taker_seconds < 10 and taker.report()["processed"] == 1
    assert json.loads(s3_backend.read(layout.done_key(hash_)).body)["attempt"] == 1  # the interrupted run used no attempt


def test_a_second_signal_exits_at_once(s3_workspace, s3_backend, child_env, mark_dir, tmp_path, fault_proxy):
    one_group(s3_backend)
    env = {**child_env, SECONDS_ENV: "hang", "AWS_ENDPOINT_URL": fault_proxy.endpoint}
    stopped = start_worker(s3_workspace, "A", env=env, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="A's run to start")
    # Handing the group back will take a long time: S3 is slow to answer it.
    fault_proxy.slow_seconds = 30
    fault_proxy.set_plan(lambda request: "slow" if request.kind == "PUT If-Match" else None)

    stopped.process.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert stopped.process.poll() is None, "the first signal should still be handing the group back"
    second = time.monotonic()
    stopped.process.send_signal(signal.SIGINT)

    assert stopped.wait(timeout=10) == 130
    exit_seconds = time.monotonic() - second
    [run] = read_runs(mark_dir)
    print(f"\nsecond SIGINT: exited {exit_seconds:.2f} s after it; the processor had stopped {(time.time_ns() - run.running_until_ns) / 1e9:.1f} s before the test looked")
    assert exit_seconds < 1.5
    assert run.end_ns is None
    time.sleep(0.2)
    assert read_runs(mark_dir)[0].running_until_ns == run.running_until_ns  # no beat after the exit: the processor is gone


def test_a_killed_workers_processor_dies_with_it_and_release_locks_hands_its_group_on(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    hash_ = one_group(s3_backend)
    env = {**child_env, SECONDS_ENV: "hang", ONLY_FIRST_ENV: "1"}
    dead = start_worker(s3_workspace, "gpu-box-3", env=env, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="the run to start")

    dead.process.kill()  # SIGKILL: no handler runs, no hand-back
    dead.wait()
    killed_ns = time.time_ns()
    time.sleep(0.5)
    [run] = read_runs(mark_dir)
    # The processor host went down with its worker (the kernel's parent-death signal, or its closed pipe).
    assert run.running_until_ns < killed_ns + 0.3e9
    # Its lock would hold the group for its 300 s lease; the operator knows the box is gone.
    assert lock_of(s3_backend, hash_).worker_id == "gpu-box-3"
    released = run_cli("release-locks", s3_workspace, "--worker-id", "gpu-box-3", "--json")
    assert released.returncode == 0, released.stderr
    assert json.loads(released.stdout) == {"released": [hash_]}

    taker = start_worker(s3_workspace, "B", env=env, log_dir=tmp_path)
    assert taker.wait(timeout=30) == 0, taker.stderr()
    assert taker.report()["processed"] == 1 and overlap_seconds(read_runs(mark_dir)) == 0
    assert json.loads(s3_backend.read(layout.done_key(hash_)).body)["attempt"] == 1  # released by an operator: no attempt used


# --- olmocr in the same workspace --------------------------------------------------------------------------


def test_a_fresh_olmocr_lock_is_honoured_for_olmocrs_timeout(s3_workspace, s3_backend, child_env, mark_dir, tmp_path):
    hash_ = one_group(s3_backend)
    etag = s3_backend.create(layout.lock_key(hash_), b"")  # what olmocr writes

    worker = start_worker(s3_workspace, "A", "--time-limit", "5", "--lease", "1", env={**child_env, SECONDS_ENV: "0.1"}, log_dir=tmp_path)

    assert worker.wait() == 0, worker.stderr()
    assert (worker.report()["processed"], worker.report()["stopped_reason"]) == (0, "locked_by_others")
    assert read_runs(mark_dir) == []
    assert s3_backend.read(layout.lock_key(hash_)).etag == etag


def test_an_olmocr_lock_the_operator_calls_stale_is_taken_over(s3_workspace, s3_backend, child_env, mark_dir, tmp_path):
    hash_ = one_group(s3_backend)
    s3_backend.create(layout.lock_key(hash_), b"")

    worker = start_worker(s3_workspace, "A", "--time-limit", "20", "--foreign-lock-timeout", "2", env={**child_env, SECONDS_ENV: "0.1"}, log_dir=tmp_path)

    assert worker.wait() == 0, worker.stderr()
    assert (worker.report()["processed"], worker.report()["reclaimed"]) == (1, 1)
    [run] = read_runs(mark_dir)
    assert run.attempt == 2  # olmocr's run is presumed lost
    assert s3_backend.exists(layout.done_key(hash_))


def test_a_fresh_olmocr_lock_written_during_a_slow_takeover_is_not_run_over(
    s3_workspace, s3_backend, s3_client, bucket, child_env, mark_dir, tmp_path, fault_proxy
):
    # Every empty lock has one ETag: the takeover's If-Match would also match
    # an empty lock that an olmocr worker writes while the takeover is on its way.
    hash_ = one_group(s3_backend)
    s3_backend.create(layout.lock_key(hash_), b"")
    time.sleep(2.5)  # stale by the foreign timeout the worker is given
    fault_proxy.slow_seconds = 2.0
    fault_proxy.set_plan(lambda request: "slow" if request.kind == "PUT If-Match" and "worker_locks/" in request.key else None)
    worker = start_worker(
        s3_workspace, "A", "--time-limit", "6", "--foreign-lock-timeout", "2",
        env={**child_env, SECONDS_ENV: "0.1", "AWS_ENDPOINT_URL": fault_proxy.endpoint}, log_dir=tmp_path,
    )
    wait_until(lambda: any(e.request.kind == "PUT If-Match" for e in fault_proxy.journal.exchanges) or worker.process.poll() is not None,
               timeout=30, what="A's takeover to be on its way")
    # An olmocr worker judges the same lock stale and takes it, as olmocr does: an unconditional empty PUT.
    s3_client.put_object(Bucket=bucket, Key=f"ws/{layout.lock_key(hash_)}", Body=b"")
    olmocr_took_it_ns = time.time_ns()

    assert worker.wait() == 0, worker.stderr()
    stored = s3_backend.read(layout.lock_key(hash_))
    print(f"\nslow takeover of an empty lock: worker report {worker.report()['processed']} processed; lock now {stored.body!r}, age {stored.age_seconds:.0f} s")
    assert worker.report()["processed"] == 0 and read_runs(mark_dir) == []
    # An empty, fresh lock again: olmocr's worker keeps the group for olmocr's 1,800 s.
    assert stored.body == b"" and stored.age_seconds < (time.time_ns() - olmocr_took_it_ns) / 1e9 + 3
    assert not s3_backend.exists(layout.done_key(hash_))


# --- a long group among Lambda workers ----------------------------------------------------------------------


def test_a_long_group_picked_up_late_by_a_lambda_is_handed_on_and_never_fails(s3_server, s3_workspace, s3_backend, child_env, mark_dir, tmp_path):
    """A 4 s group among 0.8 s ones, on worker Lambdas with an 8 s timeout and one attempt per group.

    The first invocation reaches the long group with about 3 s left: it is
    stopped at the deadline, handed back with how long it ran, and must not
    count as the group's one attempt; a later invocation with enough time
    finishes it. The lease is the function's timeout, so nobody renews.
    """
    shorts = [f"s3://inputs/lambda/short-{n}.txt" for n in range(6)]
    hashes = sorted(layout.group_hash([p]) for p in shorts)
    # A long group that a worker starting at the top meets after five short ones.
    long_path = next(p for n in range(1000) if hashes[4] < layout.group_hash([p := f"s3://inputs/lambda/long-{n}.txt"]) < hashes[5])
    WorkIndex(s3_backend).populate([*shorts, long_path], 1)
    long_hash = layout.group_hash([long_path])
    timeout = 8.0
    runner = LambdaRunner(endpoint=s3_server.endpoint, lambdas_dir=REPO / "lambdas", log_dir=tmp_path / "lambda", extra_pythonpath=(str(TESTS_DIR),))
    worker = Invocation(
        function_name="worker",
        handler="handlers.worker.handler",
        timeout=timeout,
        memory_mb=1769,
        environment={
            "S3WQ_WORKSPACE": s3_workspace,
            "S3WQ_LEASE_SECONDS": str(timeout),
            "S3WQ_MAX_ATTEMPTS": "1",
            "S3WQ_PROCESSOR": PROCESSOR,
            "S3WQ_TEST_MARK_DIR": child_env["S3WQ_TEST_MARK_DIR"],
            SECONDS_ENV: "0.8",
            SECONDS_FOR_ENV: json.dumps({"long-": 4.0}),
        },
    )
    reports = []
    for _ in range(5):
        outcome = runner.invoke(worker, json.dumps({"worker_index": 0, "workers": 1}).encode())
        assert not outcome.function_error, outcome.payload
        reports.append(json.loads(outcome.payload))
        if queue_status(s3_backend)["remaining"] == 0:
            break

    runs = read_runs(mark_dir)
    long_runs = [r for r in runs if r.hash == long_hash]
    print(f"\nlong group on Lambda: {len(reports)} invocations; long runs {[(round(r.seconds, 2), r.end_ns is not None) for r in long_runs]}; "
          f"PUTs per invocation {[r['s3_requests'].get('PutObject', 0) for r in reports]}, renewals {[r['renewals'] for r in reports]}")
    status = queue_status(s3_backend)
    assert (status["done"], status["failed"], status["remaining"]) == (7, 0, 0)
    assert len(long_runs) == 2 and long_runs[0].end_ns is None and long_runs[1].end_ns is not None
    assert long_runs[0].seconds < timeout  # stopped before the invocation's deadline, not killed with it
    assert overlap_seconds(runs) == 0
    assert sum(r["timed_out"] for r in reports) == 1 and sum(r["failed"] for r in reports) == 0
    # The lease is the function's timeout: no renewal, though the long run outlasted a third of it.
    assert all(r["renewals"] == 0 for r in reports)
    # Every PUT is accounted for, and none is a renewal: two per group done (the lock, the done flag), two for the
    # stopped run (the lock, its hand-back), the taker's create that found the handed-back lock, and one for each
    # claim made ahead that the worker gave back unrun (deleted: the DELETEs beyond one per group done, and beyond
    # the one that clears any input-error list of the run before, made by the taker of the handed-back lock), and
    # each invocation's probe of the store (three PUTs and two DELETEs, see claims.probe_store).
    puts = sum(r["s3_requests"].get("PutObject", 0) for r in reports) - 3 * len(reports)
    given_back_unrun = sum(r["s3_requests"].get("DeleteObject", 0) for r in reports) - 7 - 1 - 2 * len(reports)
    assert puts == 2 * 7 + 2 + 1 + given_back_unrun, json.dumps(reports)
    assert "Task timed out" not in (tmp_path / "lambda" / "worker.log").read_text()


def test_waiting_for_a_lock_to_go_stale_sleeps_until_s3_will_call_it_stale(s3_backend):
    """No busy loop at the boundary: S3's clock has one-second resolution, and the wait allows for it."""
    hash_ = one_group(s3_backend)
    abandoned = ClaimProtocol(s3_backend, worker_id="gone", lease_seconds=2).claim(hash_)
    assert isinstance(abandoned, Claim)
    calls = []
    started = time.monotonic()

    report = Worker(s3_backend, lambda group, ctx: calls.append(ctx.attempt), WorkerSettings(time_limit=20), worker_id="waiter").run()

    waited = time.monotonic() - started
    print(f"\nwaiting for a 2 s lease on S3: taken over after {waited:.1f} s with {report.conflicts} conflicts")
    assert calls == [2] and report.reclaimed == 1
    # The lease (2 s) plus S3's clock resolution (up to 2 s) plus a little: not sooner, hardly later.
    assert 2 < waited < 7
    # A few polls with backoff (a holder may finish early), never a request loop at the boundary.
    assert report.conflicts <= 6
