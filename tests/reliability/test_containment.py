"""A run's processes end with the run, however they detach: real ``s3wq work`` processes on the local S3 endpoint.

Each processor (:mod:`escaping_processor`) starts helper processes that try
to outlive its run -- through a shell's ``&``, a daemon's double fork and
``setsid``, a child left behind as the worker freezes -- and every one of
them writes heartbeats naming its group, worker and attempt. The measure is
the time any process of one run was running beside a process of another run
of the same group (:func:`holder_overlap_seconds`): it must be 0, and every
group must end done or failed. Modules that keep threads of their own (a
warm pool, a lazily filled one) must get one processor host for all their
groups, counted by the hosts' own import-time markers.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.host import sandbox
from s3wq.host.runners import HostRunner
from s3wq.host.sandbox import ProcessorHost
from s3wq.host.stopping import GracefulStop
from s3wq.model import LockState
from s3wq.protocol import clock
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

from .escaping_processor import FROZEN, HOST_DIR_ENV, PID_DIR_ENV, RETURNING, DeathWatch, helpers, holder_overlap_seconds
from .heartbeat_processor import SECONDS_ENV, read_runs
from .worker_processes import WorkerProcess, alive
from .worker_processes import start_worker as start_worker_process

ESCAPING = "reliability.escaping_processor"


def start_worker(workspace: str, name: str, processor: str, *args: str, env: dict, log_dir: Path) -> WorkerProcess:
    """``s3wq work`` as a user runs it, in its own process."""
    return start_worker_process(workspace, name, *args, processor=processor, env=env, log_dir=log_dir)


def wait_until(predicate, *, timeout: float, what: str) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.02)


def populate(s3_backend, count: int = 1) -> list[str]:
    names = [f"s3://inputs/contain/group-{n}.pdf" for n in range(count)]
    WorkIndex(s3_backend).populate(names, 1)
    return [layout.group_hash([name]) for name in names]


def exists(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def recorded_pids(pid_dir: Path) -> list[int]:
    return [int(path.name) for path in pid_dir.iterdir() if path.name.isdigit()]


def outcome(s3_backend, hashes: list[str]) -> tuple[int, int]:
    """Groups done, groups failed."""
    return (sum(s3_backend.exists(layout.done_key(h)) for h in hashes), sum(s3_backend.exists(layout.failed_key(h)) for h in hashes))


@pytest.fixture
def pid_dir(tmp_path) -> Path:
    path = tmp_path / "pids"
    path.mkdir()
    yield path
    # The code before containment leaves helpers running: end them, checked by their command line (a pid may be reused).
    for pid in recorded_pids(path):
        try:
            if str(path) in Path(f"/proc/{pid}/cmdline").read_text():
                os.kill(pid, signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError):
            pass


@pytest.fixture
def host_dir(tmp_path) -> Path:
    path = tmp_path / "hosts"
    path.mkdir()
    return path


@pytest.fixture
def deaths(pid_dir):
    """When each helper died, seen from its pid file's lock: the measure of overlap is exact to a few milliseconds."""
    watch = DeathWatch(pid_dir)
    yield watch
    watch.close()


@pytest.fixture
def env(child_env, pid_dir, host_dir, deaths) -> dict[str, str]:
    return {**child_env, PID_DIR_ENV: str(pid_dir), HOST_DIR_ENV: str(host_dir)}


def figures(case: str, runs, host_dir: Path, done_failed: tuple[int, int], deaths: DeathWatch) -> float:
    # A helper that is gone has been seen to die within milliseconds; one the code before this left running, never.
    give_up = time.monotonic() + 2
    while len(deaths.died_ns) < len(helpers(runs)) and time.monotonic() < give_up:
        time.sleep(0.01)
    overlap = holder_overlap_seconds(runs, deaths)
    print(f"\ncontainment, {case}: overlap {overlap:.3f} s, {len(helpers(runs))} helpers ({len(deaths.died_ns)} seen to die), "
          f"{len(list(host_dir.iterdir()))} hosts, done {done_failed[0]}, failed {done_failed[1]}")  # fmt: skip
    return overlap


# --- helpers that detach ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "processor", ["shell_helper_then_raise", "setsid_daemon_then_raise"], ids=["sh-c-background", "double-fork-setsid"]
)
def test_a_helper_that_detached_ends_with_the_run_that_raised(
    processor, s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    # The same worker retries at once, in the same host: the helper of the first attempt must be gone by then.
    hashes = populate(s3_backend)
    worker = start_worker(s3_workspace, "A", f"{ESCAPING}:{processor}", "--retry-backoff", "0", env=env, log_dir=tmp_path)
    assert worker.wait() == 0, worker.stderr()

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures(processor, runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) == 1 and not any(alive(pid) for pid in recorded_pids(pid_dir))
    assert done_failed == (1, 0)
    # Its processes alone: the host was kept for the retry.
    assert len(list(host_dir.iterdir())) == 1


def test_a_child_left_by_a_run_that_returns_ends_though_its_worker_is_frozen(
    s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    hashes = populate(s3_backend)
    processor = f"{ESCAPING}:child_left_on_return"
    frozen = start_worker(s3_workspace, "A", processor, "--lease", "2", env=env, log_dir=tmp_path)
    # The run returns only once its worker is frozen (SIGSTOP: a laptop lid, a debugger): it cannot read the reply.
    wait_until(lambda: (tmp_path / RETURNING).exists() or frozen.process.poll() is not None, timeout=60, what="A's run to return")
    frozen.process.send_signal(signal.SIGSTOP)
    frozen_ns = time.time_ns()
    (tmp_path / FROZEN).touch()
    try:
        # B takes the group once A's 2 s lease is over by S3's clock.
        taker = start_worker(s3_workspace, "B", processor, "--lease", "2", env=env, log_dir=tmp_path)
        assert taker.wait() == 0, taker.stderr()
    finally:
        frozen.process.send_signal(signal.SIGCONT)
    frozen.wait()

    runs = read_runs(mark_dir)
    [child] = helpers(runs)
    print(
        f"\nfrozen worker: the child ran {(child.running_until_ns - frozen_ns) / 1e9:.2f} s past the freeze; A exited {frozen.process.returncode}"
    )
    done_failed = outcome(s3_backend, hashes)
    assert figures("frozen worker", runs, host_dir, done_failed, deaths) == 0
    assert not any(alive(pid) for pid in recorded_pids(pid_dir))
    assert done_failed == (1, 0) and taker.report()["processed"] == 1


# --- a worker stopped mid-run ----------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_stopped_workers_run_ends_with_its_setsid_daemon(
    signum, s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    # The run ignores SIGTERM; its daemon (setsid) and its child ignore SIGTERM and SIGHUP.
    hashes = populate(s3_backend)
    processor = f"{ESCAPING}:hardy_daemon_and_hang"
    # SIGTERM: the group is handed back at once. SIGKILL: nobody hands it back, and B waits out A's 2 s lease.
    lease = ("--lease", "2") if signum == signal.SIGKILL else ()
    stopped = start_worker(s3_workspace, "A", processor, *lease, env=env, log_dir=tmp_path)
    # Two helpers and the runner.
    wait_until(lambda: len(recorded_pids(pid_dir)) == 3 or stopped.process.poll() is not None, timeout=60, what="A's run and its helpers")
    stopped.process.send_signal(signum)
    assert stopped.wait(timeout=30) == (143 if signum == signal.SIGTERM else -signal.SIGKILL), stopped.stderr()
    taker = start_worker(s3_workspace, "B", processor, *lease, env=env, log_dir=tmp_path)
    assert taker.wait() == 0, taker.stderr()

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures(f"worker {signal.Signals(signum).name} mid-run", runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) == 2 and not any(alive(pid) for pid in recorded_pids(pid_dir))
    assert done_failed == (1, 0) and taker.report()["processed"] == 1


# --- threads the module keeps ----------------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["warm_pool_processor", "lazy_pool_processor"], ids=["threads-from-import", "lazily-filled-pool"])
def test_a_module_that_keeps_threads_of_its_own_gets_one_host_for_every_group(
    module, s3_workspace, s3_backend, env, mark_dir, host_dir, tmp_path, deaths
):
    hashes = populate(s3_backend, 6)
    worker = start_worker(s3_workspace, "A", f"reliability.{module}:process", env={**env, SECONDS_ENV: "0.05"}, log_dir=tmp_path)
    assert worker.wait() == 0, worker.stderr()

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures(module, runs, host_dir, done_failed, deaths) == 0
    assert done_failed == (6, 0) and len(runs) == 6
    assert len(list(host_dir.iterdir())) == 1


# --- kill means gone -------------------------------------------------------------------------------------------


@pytest.fixture
def host_env(monkeypatch, mark_dir, pid_dir, host_dir) -> None:
    """What a processor host started from this process needs (it inherits the environment)."""
    monkeypatch.setenv("S3WQ_TEST_MARK_DIR", str(mark_dir))
    monkeypatch.setenv(PID_DIR_ENV, str(pid_dir))
    monkeypatch.setenv(HOST_DIR_ENV, str(host_dir))


def test_kill_returns_once_every_process_of_the_run_is_gone(local_workspace, pid_dir, host_env):
    host = ProcessorHost(f"{ESCAPING}:hardy_daemon_and_hang", local_workspace)
    try:
        host.start()
        host.run(
            "0" * 40, ["s3://in/a"], worker_id="w", attempt=1, owner="w:1", deadline_epoch=time.time() + 60, held_until=clock.now() + 60
        )
        wait_until(lambda: len(recorded_pids(pid_dir)) == 3, timeout=30, what="the run and its helpers")
        members = [host._process.pid, *recorded_pids(pid_dir)]
        killed = host.kill()
        # No waiting here: the daemon (setsid) and the child are gone, reaped, the moment kill returns.
        left = [pid for pid in members if exists(pid)]
    finally:
        host.close()

    assert left == [] and killed is True


def test_a_host_that_cannot_show_its_run_gone_leaves_the_lock_to_go_stale(s3_backend, mark_dir, host_env, monkeypatch):
    # A host that never confirms (its reaper frozen here; in life a process stuck in uninterruptible sleep): nothing is written.
    [hash_] = populate(s3_backend)
    monkeypatch.setenv(SECONDS_ENV, "hang")
    monkeypatch.setattr(sandbox, "KILL_WAIT_SECONDS", 0.5, raising=False)
    # Uninterruptible sleep, unlike SIGSTOP, is not undone by the SIGCONT that kill() sends.
    monkeypatch.setattr(sandbox, "_resume", lambda pid: None, raising=False)
    host = ProcessorHost("reliability.heartbeat_processor:process", s3_backend.uri)
    stop = GracefulStop()
    worker = Worker(s3_backend, None, WorkerSettings(time_limit=60, lease=30), runner=HostRunner(host, stop=stop), worker_id="A", stop=stop)

    def freeze_the_reaper_then_stop() -> None:
        wait_until(lambda: read_runs(mark_dir), timeout=30, what="the run to start")
        os.kill(host._process.pid, signal.SIGSTOP)
        stop.request(signal.SIGTERM)

    stopper = threading.Thread(target=freeze_the_reaper_then_stop)
    stopper.start()
    try:
        report = worker.run()
    finally:
        stopper.join()
        host.close()

    lock = LockBody.decode(s3_backend.read(layout.lock_key(hash_)).body)
    print(f"\nunkillable host: lock {lock.state} by {lock.worker_id}; lost_locks {report.lost_locks}, interrupted {report.interrupted}")
    # Not handed back: the lock is left to its lease, which is what a taker honours.
    assert (lock.state, lock.worker_id) == (LockState.HELD, "A")
    assert (report.lost_locks, report.interrupted) == (1, 0)
    assert not s3_backend.exists(layout.done_key(hash_))
