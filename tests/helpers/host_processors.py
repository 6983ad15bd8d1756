"""Processors that misbehave towards their processor host (imported through PYTHONPATH by host processes).

Each leaves the pid of anything it starts in the file named by
S3WQ_TEST_PID_FILE, so a test can check that the process is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time


def _record(pid: int) -> None:
    with open(os.environ["S3WQ_TEST_PID_FILE"], "a") as f:
        f.write(f"{pid}\n")


def leaves_a_thread_working(group, ctx) -> None:
    """Returns while a thread it started is still at work on the group."""
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()


def raises_leaving_a_process(group, ctx) -> None:
    """Raises while a process it started is still running."""
    _record(subprocess.Popen(["sleep", "60"]).pid)
    raise RuntimeError("gave up, but left a process running")


def dies_leaving_a_forked_child(group, ctx) -> None:
    """Forks a child that keeps every inherited descriptor open, then the host dies."""
    child = os.fork()
    if child == 0:
        time.sleep(60)
        os._exit(0)
    _record(child)
    os._exit(3)


def hangs_with_a_process(group, ctx) -> None:
    """Starts a process of its own, then runs until it is stopped."""
    _record(subprocess.Popen(["sleep", "60"]).pid)
    while True:
        time.sleep(0.05)


def quick(group, ctx) -> None:
    pass


def leaves_a_thread_that_watches_its_claim(group, ctx) -> None:
    """Returns while a thread it started works on until ``ctx.claim_is_held()`` turns False; the thread records when."""

    def work_while_held() -> None:
        while ctx.claim_is_held():
            time.sleep(0.005)
        _record(os.getpid())

    threading.Thread(target=work_while_held, daemon=True).start()


def kills_its_warden_leaving_a_daemon(group, ctx) -> None:
    """Starts a daemon in a session of its own, then kills the warden above it: the daemon is an orphan of a dead host."""
    daemon = subprocess.Popen(["sleep", "60"], start_new_session=True)
    _record(daemon.pid)
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(60)


def _exit_after_starting_a_daemon(delay: float) -> None:
    """A forkserver's child: starts a daemon (a session of its own), spins ``delay`` seconds, exits."""
    _record(subprocess.Popen(["sleep", "60"], start_new_session=True).pid)
    end = time.monotonic() + delay
    while time.monotonic() < end:
        pass
    os._exit(0)


def returns_as_its_forkserver_child_exits(group, ctx) -> None:
    """Returns while a child of multiprocessing's forkserver (kept between runs) is exiting, its daemon on its way to the warden.

    The forkserver, a process the warden keeps, reaps that child: a scan that
    read the warden's children before the daemon was reparented to it, and the
    forkserver's after the child was gone, finds neither.
    """
    import multiprocessing
    import random

    before = len(open(os.environ["S3WQ_TEST_PID_FILE"]).read().split())
    child = multiprocessing.get_context("forkserver").Process(target=_exit_after_starting_a_daemon, args=(random.uniform(0.0, 0.004),))
    child.start()
    while len(open(os.environ["S3WQ_TEST_PID_FILE"]).read().split()) == before:
        time.sleep(0.0002)
