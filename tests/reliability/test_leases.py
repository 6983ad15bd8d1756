"""Leases against every fleet a user can build: real worker processes on the local S3 endpoint.

Each case runs ``s3wq work`` processes (or the Lambda handler, in processes
killed at their timeout as Lambda kills them) with a processor that records
from its own clock when it was running (:mod:`heartbeat_processor`), and
asserts that no two runs on one group ever overlapped, and that every group
ends done or failed -- none left stuck.

They assert what the protocol guarantees, never a schedule: on a loaded
machine a renewal can come back late and its holder must then stop, and a
worker can start seconds late. Where a test's point is one worker keeping a
group, it checks that any other worker ran it only after the holder had given
it up by its own record; runs end at events (a release file, a deadline), not
after a guess of how long start-ups take.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from support import REPO_ROOT, run_cli

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.dev.localcloud.runner import Invocation, LambdaRunner
from s3wq.errors import ObjectNotFound
from s3wq.model import LockState, Outcome
from s3wq.ops.status import queue_status
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.store import layout

from .heartbeat_processor import ONLY_FIRST_ENV, RUN_UNTIL_ENV, SECONDS_ENV, SECONDS_FOR_ENV, overlap_seconds, read_runs
from .worker_processes import WorkerProcess, alive
from .worker_processes import start_worker as start_worker_process

PROCESSOR = "reliability.heartbeat_processor:process"
TESTS_DIR = REPO_ROOT / "tests"


def start_worker(workspace: str, name: str, *args: str, env: dict, log_dir: Path) -> WorkerProcess:
    """``s3wq work`` with the heartbeat processor, as a user runs it, in its own process."""
    return start_worker_process(workspace, name, *args, processor=PROCESSOR, env=env, log_dir=log_dir)


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


def host_pids(worker_pid: int) -> list[int]:
    """The worker's processor host, from /proc: its children (the warden) and theirs (the runner)."""

    def children(pid: int) -> list[int]:
        found = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(child) for child in (task / "children").read_text().split()]
        return found

    wardens = children(worker_pid)
    return wardens + [runner for warden in wardens for runner in children(warden)]


# --- different limits, one group ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LockVersion:
    etag: str
    owner: str | None
    state: str | None
    claimed_at_ns: int | None  # when the holder made the claim, by its own clock (renewals keep it)


def watch_lock(s3_backend, hash_: str, seconds: float) -> list[LockVersion]:
    """Every distinct version of the group's lock, read every few beats for ``seconds``: what S3 holds, not what a worker says."""
    seen: list[LockVersion] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            stored = s3_backend.read(layout.lock_key(hash_))
        except ObjectNotFound:
            stored = None
        if stored is not None and (not seen or seen[-1].etag != stored.etag):
            body = LockBody.decode(stored.body)
            claimed_at_ns = body and int(datetime.fromisoformat(body.claimed_at).timestamp() * 1e9)
            seen.append(LockVersion(stored.etag, body and body.owner, body and body.state, claimed_at_ns))
        time.sleep(0.05)
    return seen


@pytest.mark.parametrize("holder_lease", [30, 4], ids=["holder-lease-30s", "holder-lease-4s-renewed"])
def test_a_worker_with_a_short_lease_never_takes_a_group_from_a_holder_with_a_long_one(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path, holder_lease
):
    hash_ = one_group(s3_backend)
    # A's run goes on until the test releases it, once B has come and gone:
    # B's whole life falls inside A's run however slowly either one starts.
    release = tmp_path / "release"
    env = {**child_env, SECONDS_ENV: "hang", RUN_UNTIL_ENV: str(release)}
    holder = start_worker(s3_workspace, "A", "--time-limit", "30", "--lease", str(holder_lease), env=env, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="A's run to start")
    # B comes once A's lock is older than B's own lease (2 s) -- and, for the
    # renewed lease, older than A's lease too, so that only A's renewals keep
    # it fresh. Meanwhile, what S3 holds of the lock.
    versions = watch_lock(s3_backend, hash_, 2.6 if holder_lease > 10 else holder_lease + 0.2)
    short = start_worker(s3_workspace, "B", "--time-limit", "3", "--lease", "2", env=env, log_dir=tmp_path)
    assert short.wait() == 0, short.stderr()
    release.touch()
    assert holder.wait() == 0, holder.stderr()

    runs = read_runs(mark_dir)
    a, b = holder.report(), short.report()
    print(
        f"\nmixed limits (A's lease {holder_lease} s): runs {[(r.worker, round(r.seconds, 2)) for r in runs]}, "
        f"A renewed {a['renewals']} times, lost its lease {a['lost_locks']} times; B met A's lock {b['conflicts']} times; "
        f"overlap {overlap_seconds(runs)} s"
    )
    assert overlap_seconds(runs) == 0
    # B can never finish the group: a run ends only at the release, which comes after B's exit.
    assert b["processed"] == 0
    if holder_lease > 10 or a["lost_locks"] == 0:
        # A's lease never lapsed (a 30 s lease covers the whole run; a renewed one was renewed in time):
        # B -- whose own 2 s setting would call A's lock stale -- met a held lock on every try and never
        # ran the group, and A finished it in its one run.
        assert [r.worker for r in runs] == ["A"] and runs[0].end_ns is not None
        assert (a["processed"], a["lost_locks"]) == (1, 0) and b["conflicts"] >= 1
        if holder_lease > 10:
            assert a["renewals"] == 0 and len({v.etag for v in versions}) == 1
        else:
            # S3 saw A rewrite its own held lock, and A's run outlived the lease it started with.
            assert len({v.etag for v in versions if v.owner == versions[0].owner and v.state == LockState.HELD}) >= 2, versions
            assert runs[0].seconds > holder_lease
    else:
        # A renewal came back too late (a loaded machine), and A stopped its run by its own clock before
        # its lease could end. Only then may B have taken the group, after A's run had stopped (no overlap,
        # above). Still, a renewal had kept A's first run going past the lease of its claim: without one,
        # A's own clock (or its host's kernel timer, a quarter second later) stops it half a second before.
        assert runs[0].worker == "A" and runs[0].running_until_ns > versions[0].claimed_at_ns + holder_lease * 1e9, (runs, versions)
        assert all(r.end_ns is None for r in runs if r.worker == "B")
        if not s3_backend.exists(layout.done_key(hash_)):
            # Handed back, and nobody came back for it: the next worker (a Map round's) does.
            finisher = start_worker(s3_workspace, "C", env=env, log_dir=tmp_path)
            assert finisher.wait() == 0, finisher.stderr()
        runs = read_runs(mark_dir)
        assert overlap_seconds(runs) == 0 and all(r.end_ns is None for r in runs[:-1])
    flag = json.loads(s3_backend.read(layout.done_key(hash_)).body)
    assert runs[-1].end_ns is not None and (flag["worker_id"], flag["attempt"]) == (runs[-1].worker, runs[-1].attempt)
    assert not s3_backend.exists(layout.lock_key(hash_))


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
    print(
        f"\noverrun: {rounds} rounds, runs {[(r.worker, r.attempt, round(r.seconds, 2)) for r in runs]}, overlap {overlap_seconds(runs)} s"
    )
    assert overlap_seconds(runs) == 0
    assert all(r.end_ns is None and r.seconds < 3.0 for r in runs), "a run went on past its worker's 3 s limit"
    # A run that had nearly its worker's full time counts; one that started late is handed on without.
    assert [r.attempt for r in runs][-1] == 3 and len(runs) >= 3
    flag = json.loads(s3_backend.read(layout.failed_key(hash_)).body)
    assert (flag["kind"], flag["attempts"]) == (Outcome.TIMEOUT, 3) and "ran out of time" in flag["error"]
    assert lock_of(s3_backend, hash_).state == LockState.FAILED


def test_a_hung_processor_whose_lease_cannot_be_renewed_is_stopped_before_the_lease_ends(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path, fault_proxy
):
    hash_ = one_group(s3_backend)
    # The first run hangs; any later run is quick.
    env = {**child_env, SECONDS_ENV: "hang", ONLY_FIRST_ENV: "1"}
    holder = start_worker(
        s3_workspace, "A", "--time-limit", "120", "--lease", "3", env={**env, "AWS_ENDPOINT_URL": fault_proxy.endpoint}, log_dir=tmp_path
    )
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="A's run to start")
    time.sleep(1.5)  # A renews at 1 s
    fault_proxy.set_plan(lambda request: "reset")  # from now on A cannot reach S3
    # Read after the plan is in place: every write of A's that reached S3 was sent before this.
    cut_off_ns = time.time_ns()

    taker = start_worker(s3_workspace, "B", "--time-limit", "30", "--lease", "3", env=env, log_dir=tmp_path)
    assert taker.wait() == 0, taker.stderr()
    fault_proxy.set_plan(lambda request: None)
    holder_code = holder.wait(timeout=120)

    runs = read_runs(mark_dir)
    first, finisher = runs[0], runs[-1]
    print(
        f"\nhung processor, renewals failing: A's run stopped {(first.running_until_ns - cut_off_ns) / 1e9:.2f} s after S3 went away "
        f"(lease 3 s); runs {[(r.worker, r.attempt, round(r.seconds, 2)) for r in runs]}; A exited {holder_code}"
    )
    # A's last write reached S3 before the cut: its lease ended at most 3 s after it. Its processor stopped before.
    assert first.worker == "A" and first.end_ns is None
    assert first.running_until_ns < cut_off_ns + 3e9
    assert overlap_seconds(runs) == 0
    # A quick run finished the group -- B's, unless A lost its lease by its own clock before the cut
    # (a late renewal) and ran the group again itself.
    assert finisher.end_ns is not None
    flag = json.loads(s3_backend.read(layout.done_key(hash_)).body)
    assert (flag["worker_id"], flag["attempt"]) == (finisher.worker, finisher.attempt)
    assert taker.report()["processed"] == (finisher.worker == "B")
    if finisher.worker == "B" and first.running_until_ns >= cut_off_ns:
        # A was still running at the cut, so it never handed the group back: B took a stale lock.
        assert taker.report()["reclaimed"] == 1
    assert not s3_backend.exists(layout.lock_key(hash_))


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

    runs = read_runs(mark_dir)
    first, finisher = runs[0], runs[-1]
    print(
        f"\nfrozen worker: its processor stopped {(first.running_until_ns - frozen_ns) / 1e9:.2f} s after the freeze (lease 3 s); "
        f"runs {[(r.worker, r.attempt, round(r.seconds, 2)) for r in runs]}"
    )
    # A's last renewal was sent before the freeze: the lease ended within 3 s of it, and the processor before that.
    assert first.worker == "A" and first.end_ns is None
    assert first.running_until_ns < frozen_ns + 3e9
    assert overlap_seconds(runs) == 0
    # B finished the group -- unless A's lease lapsed by its own clock before the freeze (a late renewal) and A
    # ran it again; a run of A's that ended while A was frozen never got its done flag written, and B redid it.
    assert finisher.end_ns is not None
    flag = json.loads(s3_backend.read(layout.done_key(hash_)).body)
    assert (flag["worker_id"], flag["attempt"]) == (finisher.worker, finisher.attempt)
    assert taker.report()["processed"] == (finisher.worker == "B")


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
    # The processor hangs: a worker that waited for it would never exit.
    assert stopped.wait(timeout=30) == code, stopped.stderr()
    exit_seconds = time.monotonic() - signalled
    lock = lock_of(s3_backend, hash_)
    # A default worker, started at once, takes the group at once: no waiting out A's 300 s lease.
    started = time.monotonic()
    taker = start_worker(s3_workspace, "B", env=env, log_dir=tmp_path)
    assert taker.wait() == 0, taker.stderr()
    taker_seconds = time.monotonic() - started

    runs = read_runs(mark_dir)
    print(
        f"\n{signal.Signals(signum).name}: A exited {code} after {exit_seconds:.2f} s; B took the group and was done in {taker_seconds:.2f} s"
    )
    assert (lock.state, lock.outcome, lock.counted, lock.attempt) == (LockState.RELEASED, Outcome.INTERRUPTED, False, 1)
    assert stopped.report()["interrupted"] == 1 and stopped.report()["stopped_reason"] == "interrupted"
    assert f"stopped by {signal.Signals(signum).name}" in stopped.stderr()
    assert [r.worker for r in runs] == ["A", "B"] and overlap_seconds(runs) == 0
    # Taken at once: B never met a held lock, nor waited for a stale one (A's lease is 300 s).
    assert (taker.report()["processed"], taker.report()["conflicts"], taker.report()["reclaimed"]) == (1, 0, 0)
    assert json.loads(s3_backend.read(layout.done_key(hash_)).body)["attempt"] == 1  # the interrupted run used no attempt


def test_a_second_signal_exits_at_once(s3_workspace, s3_backend, child_env, mark_dir, tmp_path, fault_proxy):
    one_group(s3_backend)
    env = {**child_env, SECONDS_ENV: "hang", "AWS_ENDPOINT_URL": fault_proxy.endpoint}
    stopped = start_worker(s3_workspace, "A", env=env, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="A's run to start")
    # Handing the group back will take a long time: S3 is slow to answer it.
    fault_proxy.slow_seconds = 30
    fault_proxy.set_plan(lambda request: "slow" if request.kind == "PUT If-Match" else None)

    host = host_pids(stopped.process.pid)
    assert host, "no processor host found"
    stopped.process.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert stopped.process.poll() is None, "the first signal should still be handing the group back"
    second = time.monotonic()
    stopped.process.send_signal(signal.SIGINT)

    # Well before the hand-back's 30 s could end: the second signal does not wait for it.
    assert stopped.wait(timeout=20) == 130
    exit_seconds = time.monotonic() - second
    wait_until(lambda: not any(alive(pid) for pid in host), timeout=10, what="the processor host to end with its worker")
    [run] = read_runs(mark_dir)
    print(
        f"\nsecond SIGINT: exited {exit_seconds:.2f} s after it; the processor had stopped {(time.time_ns() - run.running_until_ns) / 1e9:.1f} s before the test looked"
    )
    assert exit_seconds < 10
    assert run.end_ns is None


def test_a_killed_workers_processor_dies_with_it_and_release_locks_hands_its_group_on(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    hash_ = one_group(s3_backend)
    env = {**child_env, SECONDS_ENV: "hang", ONLY_FIRST_ENV: "1"}
    dead = start_worker(s3_workspace, "gpu-box-3", env=env, log_dir=tmp_path)
    wait_until(lambda: read_runs(mark_dir), timeout=30, what="the run to start")

    host = host_pids(dead.process.pid)
    assert host, "no processor host found"

    dead.process.kill()  # SIGKILL: no handler runs, no hand-back
    dead.wait()
    killed_ns = time.time_ns()
    # The processor host goes down with its worker (the kernel's parent-death signal, or its closed pipe),
    # not when the worker's 300 s lease would end.
    wait_until(lambda: not any(alive(pid) for pid in host), timeout=10, what="the processor host to end with its worker")
    [run] = read_runs(mark_dir)
    print(f"\nSIGKILL: the processor's last beat came {((run.beat_ns or run.start_ns) - killed_ns) / 1e9:.2f} s after its worker's death")
    assert run.end_ns is None
    # Its lock would hold the group for its 300 s lease; the operator knows this instance is gone (its
    # owner token, as inspect shows it: a worker id alone, with a live lease, is refused without --force).
    dead_lock = lock_of(s3_backend, hash_)
    assert dead_lock.worker_id == "gpu-box-3"
    refused = run_cli("release-locks", s3_workspace, "--worker-id", "gpu-box-3")
    assert refused.returncode == 2 and dead_lock.owner in refused.stderr, refused.stderr
    released = run_cli("release-locks", s3_workspace, "--owner", dead_lock.owner, "--json")
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

    worker = start_worker(
        s3_workspace, "A", "--time-limit", "20", "--foreign-lock-timeout", "2", env={**child_env, SECONDS_ENV: "0.1"}, log_dir=tmp_path
    )

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
        s3_workspace,
        "A",
        "--time-limit",
        "6",
        "--foreign-lock-timeout",
        "2",
        env={**child_env, SECONDS_ENV: "0.1", "AWS_ENDPOINT_URL": fault_proxy.endpoint},
        log_dir=tmp_path,
    )
    wait_until(
        lambda: any(e.request.kind == "PUT If-Match" for e in fault_proxy.journal.exchanges) or worker.process.poll() is not None,
        timeout=30,
        what="A's takeover to be on its way",
    )
    # An olmocr worker judges the same lock stale and takes it, as olmocr does: an unconditional empty PUT.
    s3_client.put_object(Bucket=bucket, Key=f"ws/{layout.lock_key(hash_)}", Body=b"")
    olmocr_took_it_ns = time.time_ns()

    assert worker.wait() == 0, worker.stderr()
    stored = s3_backend.read(layout.lock_key(hash_))
    print(
        f"\nslow takeover of an empty lock: worker report {worker.report()['processed']} processed; lock now {stored.body!r}, age {stored.age_seconds:.0f} s"
    )
    assert worker.report()["processed"] == 0 and read_runs(mark_dir) == []
    # An empty, fresh lock again: olmocr's worker keeps the group for olmocr's 1,800 s.
    assert stored.body == b"" and stored.age_seconds < (time.time_ns() - olmocr_took_it_ns) / 1e9 + 3
    assert not s3_backend.exists(layout.done_key(hash_))


# --- a long group among Lambda workers ----------------------------------------------------------------------


def test_a_long_group_picked_up_late_by_a_lambda_is_handed_on_and_never_fails(
    s3_server, s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    """A group longer than an invocation among 0.8 s ones, on worker Lambdas with one attempt per group.

    The first invocation (8 s timeout) reaches the long group after one short
    one, late whatever its start-up took: the run is stopped at the deadline,
    handed back with how long it ran, and must not count as the group's one
    attempt; a later invocation finishes it (its second run is quick: only the
    first call of a group outlasts an invocation). The later invocations have
    a 16 s timeout, so that twice what the stopped run had fits in them however
    long their start-up took: at 8 s, a start-up that took more than 5 % of
    the invocation (a loaded machine) leaves too little for the group, by
    time_rules.enough_time, in every invocation alike. The lease is the function's
    timeout, so nobody renews.
    """
    shorts = [f"s3://inputs/lambda/short-{n}.txt" for n in range(6)]
    hashes = sorted(layout.group_hash([p]) for p in shorts)
    # A long group that a worker starting at the top meets after one short one.
    long_path = next(p for n in range(1000) if hashes[0] < layout.group_hash([p := f"s3://inputs/lambda/long-{n}.txt"]) < hashes[1])
    paths = [*shorts, long_path]
    WorkIndex(s3_backend).populate(paths, 1)
    long_hash = layout.group_hash([long_path])
    timeout = 8.0
    runner = LambdaRunner(
        endpoint=s3_server.endpoint, lambdas_dir=REPO_ROOT / "lambdas", log_dir=tmp_path / "lambda", extra_pythonpath=(str(TESTS_DIR),)
    )
    worker = Invocation(
        function_name="worker",
        handler="s3wq.handlers.worker.handler",
        timeout=timeout,
        memory_mb=1769,
        environment={
            "S3WQ_WORKSPACE": s3_workspace,
            "S3WQ_LEASE_SECONDS": str(timeout),
            "S3WQ_MAX_ATTEMPTS": "1",
            "S3WQ_PROCESSOR": PROCESSOR,
            "S3WQ_TEST_MARK_DIR": child_env["S3WQ_TEST_MARK_DIR"],
            SECONDS_ENV: "0.8",
            SECONDS_FOR_ENV: json.dumps({"long-": "hang"}),
            ONLY_FIRST_ENV: "1",
        },
    )
    later = dataclasses.replace(worker, timeout=2 * timeout, environment={**worker.environment, "S3WQ_LEASE_SECONDS": str(2 * timeout)})
    reports = []
    for round_ in range(5):
        outcome = runner.invoke(later if round_ else worker, json.dumps({"worker_index": 0, "workers": 1}).encode())
        assert not outcome.function_error, outcome.payload
        reports.append(json.loads(outcome.payload))
        if queue_status(s3_backend)["remaining"] == 0:
            break

    runs = read_runs(mark_dir)
    long_runs = [r for r in runs if r.hash == long_hash]
    print(
        f"\nlong group on Lambda: {len(reports)} invocations; long runs {[(round(r.seconds, 2), r.end_ns is not None) for r in long_runs]}; "
        f"PUTs per invocation {[r['s3_requests'].get('PutObject', 0) for r in reports]}, renewals {[r['renewals'] for r in reports]}"
    )
    status = queue_status(s3_backend)
    assert (status["done"], status["failed"], status["remaining"]) == (len(paths), 0, 0)
    assert len(long_runs) == 2 and long_runs[0].end_ns is None and long_runs[1].end_ns is not None
    # Stopped at its own deadline, before the invocation's (a Lambda worker keeps at least a second
    # between the two), not killed with it.
    assert long_runs[0].running_until_ns < long_runs[0].deadline_ns + 1e9
    assert long_runs[0].seconds < timeout
    assert overlap_seconds(runs) == 0
    assert sum(r["timed_out"] for r in reports) == 1 and sum(r["failed"] for r in reports) == 0
    # The lease is the function's timeout: no renewal, though the long run outlasted a third of it.
    assert all(r["renewals"] == 0 for r in reports)
    # Every PUT is accounted for, and none is a renewal: two per group done (the lock, the done flag), two for the
    # stopped run (the lock, its hand-back), the taker's create that found the handed-back lock, and one for each
    # claim made ahead that the worker gave back unrun (deleted: the DELETEs beyond one per group done, and beyond
    # the one that clears any input-error list of the run before, made by the taker of the handed-back lock), and
    # each invocation's probe of the store (three PUTs and two DELETEs, see probe.probe_store).
    puts = sum(r["s3_requests"].get("PutObject", 0) for r in reports) - 3 * len(reports)
    given_back_unrun = sum(r["s3_requests"].get("DeleteObject", 0) for r in reports) - len(paths) - 1 - 2 * len(reports)
    assert puts == 2 * len(paths) + 2 + 1 + given_back_unrun, json.dumps(reports)
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
    # Never before the lease (2 s) is up by S3's clock. The upper bound only catches a waiter that
    # oversleeps by whole seconds (its 20 s time limit, say): how it waits is the conflict count below.
    assert 2 < waited < 15
    # A few polls with backoff (a holder may finish early), never a request loop at the boundary.
    assert report.conflicts <= 6
