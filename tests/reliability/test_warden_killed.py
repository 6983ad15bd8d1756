"""A processor that kills, stops or crashes its own warden does not let its run's processes escape: real ``s3wq work`` processes.

The warden alone ends a run's processes; a processor can end the warden
first (``os.kill(os.getppid(), SIGKILL)``, ``os.killpg(0, SIGKILL)``) or
stop it (SIGSTOP). The worker is then the subreaper of what the warden
left, and ends it before the next run. The measure is
:func:`holder_overlap_seconds` over every process's heartbeats against the
next holder's run: it must be 0, and the group must end done or failed.
"""

from __future__ import annotations

import pytest

from . import test_containment
from .escaping_processor import HELPER_SECONDS, helpers
from .heartbeat_processor import read_runs
from .test_containment import figures, outcome, populate, recorded_pids, start_worker, wait_until
from .worker_processes import alive

# The containment tests' fixtures: helpers' pids and deaths, hosts started, the workers' environment.
deaths, env, host_dir, pid_dir = test_containment.deaths, test_containment.env, test_containment.host_dir, test_containment.pid_dir

KILLING = "reliability.warden_killing_processor"


@pytest.mark.parametrize(
    "processor",
    ["setsid_daemon_then_kill_warden", "child_then_kill_warden", "setsid_daemon_then_kill_own_group"],
    ids=["daemon-SIGKILL-warden", "child-SIGKILL-warden", "daemon-killpg-0"],
)
def test_a_run_that_kills_its_warden_leaves_nothing_running(
    processor, s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    # A retries at once in a new host; B (after A) would take a lock A left to its 3 s lease.
    hashes = populate(s3_backend)
    args = ("--lease", "3", "--retry-backoff", "0")
    first = start_worker(s3_workspace, "A", f"{KILLING}:{processor}", *args, env=env, log_dir=tmp_path)
    assert first.wait() == 0, first.stderr()
    taker = start_worker(s3_workspace, "B", f"{KILLING}:{processor}", *args, env=env, log_dir=tmp_path)
    assert taker.wait() == 0, taker.stderr()

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures(processor, runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) == 1 and not any(alive(pid) for pid in recorded_pids(pid_dir))
    assert done_failed == (1, 0)


def test_a_run_that_stops_its_warden_ends_with_its_daemon_before_a_taker_runs(
    s3_workspace, s3_backend, env, mark_dir, pid_dir, host_dir, tmp_path, deaths
):
    # The group timeout (5 s) ends the run; a lease of 6 s runs out while the worker waits for a warden that cannot answer.
    hashes = populate(s3_backend)
    processor = f"{KILLING}:setsid_daemon_then_stop_warden"
    args = ("--lease", "6", "--group-timeout", "5", "--retry-backoff", "0")
    stopper = start_worker(s3_workspace, "A", processor, *args, env=env, log_dir=tmp_path)
    wait_until(lambda: recorded_pids(pid_dir) or stopper.process.poll() is not None, timeout=60, what="A's daemon")
    taker = start_worker(s3_workspace, "B", processor, *args, env=env, log_dir=tmp_path)
    assert stopper.wait(timeout=HELPER_SECONDS + 30) == 0, stopper.stderr()
    assert taker.wait() == 0, taker.stderr()

    runs = read_runs(mark_dir)
    done_failed = outcome(s3_backend, hashes)
    assert figures("warden SIGSTOPped", runs, host_dir, done_failed, deaths) == 0
    assert len(helpers(runs)) == 1 and not any(alive(pid) for pid in recorded_pids(pid_dir))
    assert sum(done_failed) == 1
