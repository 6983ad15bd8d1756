"""The warden's boundary against processors that attack it: real ``s3wq work`` processes on the local S3 endpoint.

As in :mod:`test_containment`, every process a run starts beats under its
run (:mod:`hostile_processor`), overlap is measured from those beats and the
helpers' deaths, and it must be 0 with every group done or failed. The
attacks: a fork chain (no generation lives long enough to be listed and
killed in one round), a runner thread that starts a child every few
milliseconds, a process started through a forkserver the module started at
import, and a warden made to fail by the processor (bytes that are no
message on the runner's socket; its file limit lowered so that its poll and
its /proc reads fail). A run that left processes is a failed attempt of kind
leftover; the retry (by the same worker) is quick and done.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from s3wq.host.run_ends import Returned
from s3wq.host.sandbox import ProcessorHost
from s3wq.protocol import clock

from . import test_containment
from .escaping_processor import PID_DIR_ENV, helpers
from .heartbeat_processor import read_runs
from .hostile_processor import CHAIN_BINARY_ENV
from .test_containment import exists, figures, outcome, populate, recorded_pids, start_worker, wait_until
from .worker_processes import alive

HOSTILE = "reliability.hostile_processor"
# test_containment's fixtures: its pid and host directories, the watch on helpers' deaths, the workers' environment.
pid_dir, host_dir, deaths, env = test_containment.pid_dir, test_containment.host_dir, test_containment.deaths, test_containment.env


@pytest.fixture(autouse=True)
def end_what_the_old_code_left(pid_dir):
    """The code before this leaves helpers running whose command line does not name the pid directory: find them by environment."""
    yield
    for pid in recorded_pids(pid_dir):
        try:
            if f"{PID_DIR_ENV}={pid_dir}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                os.kill(pid, signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass


def work(s3_workspace, s3_backend, processor: str, env: dict, tmp_path: Path, groups: int = 1):
    hashes = populate(s3_backend, groups)
    worker = start_worker(s3_workspace, "A", f"{HOSTILE}:{processor}", "--retry-backoff", "0", "--lease", "5", env=env, log_dir=tmp_path)
    assert worker.wait() == 0, worker.stderr()
    return worker, hashes


def nothing_left_running(pid_dir: Path) -> list[int]:
    return [pid for pid in recorded_pids(pid_dir) if alive(pid)]


def built_chain(tmp_path: Path) -> str:
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler: the Python chain alone")
    binary = tmp_path / "fork_chain"
    subprocess.run(["gcc", "-O2", "-o", str(binary), str(Path(__file__).with_name("fork_chain.c"))], check=True)
    return str(binary)


@pytest.mark.parametrize("chain", ["python", "c"], ids=["python-chain", "c-chain"])
def test_a_fork_chain_left_by_a_run_that_returns_is_a_leftover_and_ends_with_it(
    chain, s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    if chain == "c":
        env = {**env, CHAIN_BINARY_ENV: built_chain(tmp_path)}
    # A warden that lists and kills in rounds misses a chain now and then: three groups, eight chains each, nearly always.
    worker, hashes = work(s3_workspace, s3_backend, "fork_chain_then_return", env, tmp_path, groups=3)

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures("fork chains", runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) == 24 and nothing_left_running(pid_dir) == []
    # Not done by the run that left them: a leftover, then the quick retry.
    assert (worker.report()["leftovers"], worker.report()["processed"]) == (3, 3) and done_failed == (3, 0)
    assert len(list(host_dir.iterdir())) == 1  # processes alone: the host is kept


@pytest.mark.parametrize(
    "processor", ["thread_respawning_children", "raw_thread_respawning_children"], ids=["threading-thread", "raw-thread"]
)
def test_a_runner_thread_that_keeps_starting_children_ends_with_the_host(
    processor, s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    worker, hashes = work(s3_workspace, s3_backend, processor, env, tmp_path)

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures(processor, runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) > 1 and nothing_left_running(pid_dir) == []
    # A failed attempt, then the quick retry. A leftover: except that a runner whose raw thread forks is now
    # and then seen to exit (code 0) before its reply is handled, which ends the host as well.
    leftovers = 1 if processor == "thread_respawning_children" else worker.report()["leftovers"]
    assert (worker.report()["retried"], worker.report()["leftovers"], worker.report()["processed"]) == (1, leftovers, 1)
    assert done_failed == (1, 0)
    assert "could not end" not in worker.stderr()  # the code before this gave up after 10 s, leaving orphans
    assert len(list(host_dir.iterdir())) == 2  # the runner was starting them: its host went


def test_a_process_started_through_the_modules_forkserver_is_a_leftover_of_the_run(
    s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    worker, hashes = work(s3_workspace, s3_backend, "through_forkserver_then_return", env, tmp_path)

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures("forkserver", runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) == 1 and nothing_left_running(pid_dir) == []
    assert (worker.report()["leftovers"], worker.report()["processed"]) == (1, 1) and done_failed == (1, 0)
    # The forkserver is the module's: kept, with its host (its child imported this module too, and is no host).
    assert len([p for p in host_dir.iterdir() if int(p.name) not in recorded_pids(pid_dir)]) == 1


@pytest.mark.parametrize(
    "processor", ["junk_on_the_runners_socket", "wardens_file_limit_lowered"], ids=["junk-on-socket", "file-limit-lowered"]
)
def test_a_warden_the_processor_made_fail_still_ends_the_run(
    processor, s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    worker, hashes = work(s3_workspace, s3_backend, processor, env, tmp_path)

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures(processor, runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) == 1 and nothing_left_running(pid_dir) == []
    # The run failed with its host, which ended every process of it; the retry, in a new host, is done.
    assert (worker.report()["processed"], worker.report()["retried"]) == (1, 1) and done_failed == (1, 0)
    assert len(list(host_dir.iterdir())) == 2


def zombies_of(pid: int) -> list[int]:
    """The dead children of ``pid`` nobody waited for."""
    children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]
    return [c for c in children if exists(c) and not alive(c)]


def test_a_long_lived_runner_keeps_no_zombie_of_the_children_the_warden_killed(local_workspace, monkeypatch, mark_dir):
    # Each run leaves a child it never waits for; the warden kills it; the host is kept for the next run.
    monkeypatch.setenv("S3WQ_TEST_MARK_DIR", str(mark_dir))
    host = ProcessorHost("reliability.leftover_processor:returns", local_workspace)
    try:
        host.start()
        [runner] = [int(c) for c in Path(f"/proc/{host._process.pid}/task/{host._process.pid}/children").read_text().split()]
        for attempt in range(1, 4):
            host.run(
                "0" * 40, ["s3://in/a"], worker_id="w", attempt=attempt, owner="w:1", deadline_epoch=time.time() + 60,
                held_until=clock.now() + 60,
            )  # fmt: skip
            end = host.wait(30)
            assert isinstance(end, Returned) and "1 process" in end.leftovers
            wait_until(lambda: zombies_of(runner) == [], timeout=5, what="the runner to wait for its killed child")
    finally:
        host.close()
