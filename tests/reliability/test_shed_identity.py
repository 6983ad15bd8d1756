"""A run's processes are ended by their ancestry, which they cannot shed: real ``s3wq work`` processes on the local S3 endpoint.

Each processor (:mod:`shedding_processor`) starts a daemon with nothing to
find it by but its ancestry -- an empty environment (``env -i``), or its
environment's memory overwritten as ``setproctitle`` does, in a session of
its own -- then ends a process of its host by a common mistake: ``killpg``
of a helper's group (the run's own), or a SIGKILL to the warden. A second
worker takes the group. The measure is the time any process of one run was
running beside a process of another run of the same group
(:func:`holder_overlap_seconds`, from the helpers' own heartbeats and
deaths): 0, and the group ends done. The kind the first attempt is recorded
with is checked too: the run left a process behind, and nothing says it ran
out of memory.
"""

from __future__ import annotations

import os
import signal

import pytest

from s3wq.protocol.bodies import load_object
from s3wq.store import layout

from . import test_containment
from .escaping_processor import HELPER_SECONDS, helpers
from .heartbeat_processor import read_runs
from .test_containment import figures, outcome, populate, recorded_pids, start_worker, wait_until
from .worker_processes import alive

# The containment tests' fixtures: helpers' pids and deaths, hosts started, the workers' environment.
deaths, env, host_dir, pid_dir = test_containment.deaths, test_containment.env, test_containment.host_dir, test_containment.pid_dir

SHEDDING = "reliability.shedding_processor"


def _first_attempt_error(s3_backend, hash_: str) -> str:
    """The error the group's first attempt was handed back or retried with, as the done flag's history keeps it."""
    flag = load_object(s3_backend.read(layout.done_key(hash_)).body)
    return str(flag)


@pytest.mark.parametrize(
    "processor",
    [
        "env_i_daemon_then_killpg_helper",
        "title_daemon_then_killpg_helper",
        "env_i_daemon_then_kill_warden",
        "title_daemon_then_kill_warden",
    ],
    ids=["env-i-killpg", "setproctitle-killpg", "env-i-kill-warden", "setproctitle-kill-warden"],
)
def test_a_daemon_without_marks_ends_before_a_second_worker_takes_its_group(
    processor, s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    # A's first attempt ends its host by mistake; A hands the group back (one attempt each, no retry here), B takes it.
    hashes = populate(s3_backend)
    args = ("--lease", "3", "--max-attempts", "2", "--retry-backoff", "30")
    first = start_worker(s3_workspace, "A", f"{SHEDDING}:{processor}", *args, "--time-limit", "10", env=env, log_dir=tmp_path)
    wait_until(lambda: recorded_pids(pid_dir) or first.process.poll() is not None, timeout=60, what="A's daemon")
    taker = start_worker(s3_workspace, "B", f"{SHEDDING}:{processor}", *args, env=env, log_dir=tmp_path)
    assert taker.wait() == 0, taker.stderr()
    assert first.wait() == 0, first.stderr()

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures(processor, runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) >= 1 and not any(alive(pid) for pid in recorded_pids(pid_dir))
    assert done_failed == (1, 0)
    # A's attempt: the run left its daemon behind (killed), and the host was not out of memory.
    a_log = first.stderr()
    assert "left 1 process" in a_log and "python" in a_log, a_log
    assert "OOM killer ran" not in a_log and "(out of memory" not in a_log, a_log


def test_a_daemon_that_stops_the_warden_and_the_worker_ends_at_the_lease(
    s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    # A is stopped by its own run's daemon and stays stopped; the warden's lease timer resumes the warden, which ends
    # the daemon at A's lease; B takes the group once A's lock is stale (3 s), and finds no process of A's run running.
    hashes = populate(s3_backend)
    processor = f"{SHEDDING}:daemon_stops_warden_and_worker"
    args = ("--lease", "3", "--retry-backoff", "0")
    stopped = start_worker(s3_workspace, "A", processor, *args, env=env, log_dir=tmp_path)
    try:
        wait_until(lambda: recorded_pids(pid_dir), timeout=60, what="A's daemon")
        wait_until(lambda: _stopped(stopped.process.pid), timeout=10, what="A to be stopped")
        taker = start_worker(s3_workspace, "B", processor, *args, env=env, log_dir=tmp_path)
        assert taker.wait(timeout=HELPER_SECONDS + 30) == 0, taker.stderr()
        # The daemon was ended while A was still stopped: nothing resumed A but the test, below.
        assert _stopped(stopped.process.pid)
    finally:
        os.kill(stopped.process.pid, signal.SIGCONT)
    assert stopped.wait() == 0, stopped.stderr()

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures("daemon SIGSTOPs warden and worker", runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) == 1 and not any(alive(pid) for pid in recorded_pids(pid_dir))
    assert done_failed == (1, 0)


def _stopped(pid: int) -> bool:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T"
