"""An embedded ``Worker(backend, fn, settings)`` hands back no group while a thread its run started still runs.

The processor runs in the worker's own thread (``InProcessRunner``), and a
thread cannot be stopped: a run that returns or raises while threads it
started run on is not over until they have ended, the lease kept
meanwhile, and ``ctx.claim_is_held()`` is False from the moment the run
ends. Real worker processes on the local S3 endpoint, heartbeats from the
processor's own thread (:mod:`leftover_thread_processor`); the tests
assert no overlap and every group done or failed, never a schedule.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.host.run_ends import Raised, Returned
from s3wq.host.runners import InProcessRunner
from s3wq.ops.status import queue_status
from s3wq.protocol import clock
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import ClaimProtocol
from s3wq.protocol.lease import LeaseKeeper
from s3wq.store import layout

from .heartbeat_processor import read_runs
from .leftover_thread_processor import THREAD_SECONDS_ENV, is_thread, overlap_between_runs

# Bounds on failure only: each worker's whole queue takes a few seconds.
WORKER_TIMEOUT_SECONDS = 120
SETTINGS = {"time_limit": 60, "lease": 10, "max_attempts": 2, "retry_backoff": 0.1, "breaker_groups": 0}
LEASE = 30.0


def populated(backend, names: list[str]) -> dict[str, str]:
    paths = [f"s3://inputs/embedded/{name}" for name in names]
    WorkIndex(backend).populate(paths, 1)
    return {name: layout.group_hash([path]) for name, path in zip(names, paths)}


def start_embedded_worker(workspace: str, worker_id: str, settings: dict, *, env: dict, log_dir: Path, go: Path) -> subprocess.Popen:
    """``Worker(open_backend(ws), process, WorkerSettings(...)).run()`` in a process of its own, started once ``go`` exists."""
    log_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-c", "from reliability.leftover_thread_processor import main; main()",
        workspace, worker_id, json.dumps(settings), str(log_dir / f"{worker_id}.json"), str(go),
    ]  # fmt: skip
    with open(log_dir / f"{worker_id}.err", "wb") as stderr:
        return subprocess.Popen(command, env=env, stderr=stderr)


def stderr_of(log_dir: Path, worker_id: str) -> str:
    return (log_dir / f"{worker_id}.err").read_text()[-3000:]


def test_threads_left_by_failed_runs_never_run_beside_their_groups_next_run(s3_workspace, s3_backend, child_env, mark_dir, tmp_path):
    # Two threads that never look at the claim, two that stop once it is not held.
    groups = populated(s3_backend, ["plain-1.txt", "checks-1.txt", "plain-2.txt", "checks-2.txt"])
    go, log_dir = tmp_path / "go", tmp_path / "logs"
    workers = {name: start_embedded_worker(s3_workspace, name, SETTINGS, env=child_env, log_dir=log_dir, go=go) for name in ("w1", "w2")}
    go.touch()
    for name, process in workers.items():
        assert process.wait(timeout=WORKER_TIMEOUT_SECONDS) == 0, stderr_of(log_dir, name)

    records = read_runs(mark_dir)
    assert {r.hash for r in records if is_thread(r)} == set(groups.values())  # every group's first run left a thread
    overlap = overlap_between_runs(records)
    assert overlap == 0, f"a thread a run left ran {overlap:.2f} s beside another run of its group"
    status = queue_status(s3_backend)
    assert (status["remaining"], status["done"] + status["failed"]) == (0, len(groups))


def test_a_thread_that_never_ends_keeps_its_group_until_the_runs_deadline_kills_the_worker(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    (hash_,) = populated(s3_backend, ["plain-forever.txt"]).values()
    go, log_dir = tmp_path / "go", tmp_path / "logs"
    settings = {**SETTINGS, "group_timeout": 2}
    worker = start_embedded_worker(s3_workspace, "w1", settings, env={**child_env, THREAD_SECONDS_ENV: "inf"}, log_dir=log_dir, go=go)
    go.touch()

    # Killed, as Lambda kills an invocation at its timeout: the thread could not be stopped alone.
    assert worker.wait(timeout=WORKER_TIMEOUT_SECONDS) == -signal.SIGKILL, stderr_of(log_dir, "w1")
    lock = LockBody.decode(s3_backend.read(layout.lock_key(hash_)).body)
    assert (lock.held, lock.worker_id, lock.attempt) == (True, "w1", 1)  # never handed back: it goes stale by itself
    assert not s3_backend.exists(layout.done_key(hash_)) and not s3_backend.exists(layout.failed_key(hash_))
    assert [(r.attempt, is_thread(r)) for r in read_runs(mark_dir)] == [(1, False), (1, True)]


def _running_in(thread: threading.Thread, function) -> bool:
    frame = sys._current_frames().get(thread.ident)
    while frame is not None:
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back
    return False


def test_claim_is_held_is_false_for_a_thread_once_its_run_has_returned(s3_backend):
    (hash_,) = populated(s3_backend, ["watched.txt"]).values()
    seen: dict[str, bool] = {}

    def processor(group, ctx):
        runner = threading.current_thread()

        def watch() -> None:
            give_up = time.monotonic() + LEASE / 2  # the lease is still held then: only the run's end turns it False
            while _running_in(runner, processor) and time.monotonic() < give_up:
                time.sleep(0.001)
            seen["returned"] = not _running_in(runner, processor)
            seen["held_after_return"] = ctx.claim_is_held()
            lock = LockBody.decode(s3_backend.read(layout.lock_key(hash_)).body)
            seen["group_still_ours"] = lock.held and lock.owner == ctx.owner and not s3_backend.exists(layout.done_key(hash_))

        threading.Thread(target=watch, name="watcher").start()
        seen["held_during_run"] = ctx.claim_is_held()

    Worker(s3_backend, processor, WorkerSettings(time_limit=60, lease=LEASE, max_attempts=1, breaker_groups=0), worker_id="w1").run()

    assert seen == {"held_during_run": True, "returned": True, "held_after_return": False, "group_still_ours": True}
    status = queue_status(s3_backend)
    assert (status["remaining"], status["done"] + status["failed"]) == (0, 1)


def run_once(backend, name: str, processor) -> Returned | Raised:
    """One run of ``processor`` on a fresh group through the in-process runner, as a worker makes it."""
    hash_ = populated(backend, [name])[name]
    (group,) = [g for g in WorkIndex(backend).iter_groups() if g.hash == hash_]
    protocol = ClaimProtocol(backend, worker_id="w1", lease_seconds=LEASE)
    keeper = LeaseKeeper(protocol, protocol.claim(hash_), stop_at=clock.now() + LEASE)
    try:
        return InProcessRunner(processor, backend).run(group, keeper, deadline_epoch=time.time() + LEASE)
    finally:
        keeper.settle()


def test_a_run_ends_only_once_the_threads_it_left_have_and_names_them(s3_backend):
    left: list[threading.Thread] = []

    def processor(group, ctx):
        left.append(threading.Thread(target=time.sleep, args=(0.3,), name="beat"))
        left[0].start()
        raise ValueError("bad input")

    end = run_once(s3_backend, "raises.txt", processor)

    assert isinstance(end, Raised) and end.error == "ValueError: bad input"
    assert not left[0].is_alive()
    assert end.leftovers == "1 thread (beat)"


def test_an_idle_pool_kept_between_runs_is_no_leftover_and_its_busy_worker_is(s3_backend):
    pool = ThreadPoolExecutor(max_workers=2)  # a module's kept-warm executor, filled by the runs that use it
    try:

        def waits_for_its_job(group, ctx):
            assert pool.submit(sum, [1, 2]).result() == 3

        def leaves_its_job_running(group, ctx):
            pool.submit(time.sleep, 0.3)

        quiet = run_once(s3_backend, "pool-idle.txt", waits_for_its_job)
        busy = run_once(s3_backend, "pool-busy.txt", leaves_its_job_running)
    finally:
        pool.shutdown()

    assert quiet == Returned()
    assert isinstance(busy, Returned) and busy.leftovers.startswith("1 thread (ThreadPoolExecutor-")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child processes are seen through /proc")
def test_a_run_ends_only_once_the_child_process_it_left_has(s3_backend):
    children: list[subprocess.Popen] = []

    def processor(group, ctx):
        children.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"]))

    end = run_once(s3_backend, "child.txt", processor)

    assert children[0].poll() == 0  # it had exited: the runner waited for it
    assert isinstance(end, Returned) and end.leftovers.startswith("1 process (") and "thread" not in end.leftovers
