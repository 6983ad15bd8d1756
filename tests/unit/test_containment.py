"""The warden's view of its processes: what counts as a run's leftover, and how it is named."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from s3wq.host.containment import MAX_LEFTOVERS_CHARS, describe_leftovers, not_kept
from s3wq.host.procfs import Member
from s3wq.host.procfs import read_stat as _read_stat
from s3wq.host.threads import ModuleThreads, idle_pool_worker, leftover_threads, track_pool_jobs


def member(pid: int, parent: int, started: int = 1, name: str = "sleep") -> Member:
    return Member(pid, parent, started, name, True)


def test_a_leftovers_line_names_counts_and_names_but_no_pid_and_stays_short():
    assert describe_leftovers(["sleep", "sh"], ["Thread-2 (beat)"]) == "2 processes (sh, sleep) and 1 thread (Thread-2 (beat))"
    assert describe_leftovers(["python3"], []) == "1 process (python3)"
    assert describe_leftovers([], []) == ""
    many = describe_leftovers([f"helper-{n}" for n in range(500)], [])
    assert many.startswith("500 processes (helper-0, helper-1, helper-10, ...)") and len(many) <= MAX_LEFTOVERS_CHARS


def test_only_the_exact_processes_of_the_import_are_kept_and_what_they_start_later_or_a_reused_pid_is_not():
    warden, runner = 10, 11
    members = {
        11: member(11, warden, name="python"),
        12: member(12, warden, name="forkserver"),  # started at import: the baseline
        13: member(13, 12, name="forkserver-child"),  # what it started for a run, since: the run's
        14: member(14, runner),  # the run's child
        15: member(15, warden, name="helper"),  # a run's orphan, reparented to the warden
        16: member(16, warden, started=99),  # a pid of the baseline, died and reused by a run's process
        17: member(17, 12, name="pool-worker"),  # the forkserver's child that existed at import: the baseline
    }
    baseline = {(12, 1), (16, 1), (17, 1)}

    left = [m.pid for m in not_kept(members, baseline) if m.pid != runner]

    assert left == [13, 14, 15, 16]


def test_a_proc_read_refused_for_want_of_descriptors_raises_and_is_never_taken_for_gone():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))  # stdin, stdout, stderr: no descriptor left for /proc
    try:
        with pytest.raises(OSError) as refused:
            _read_stat(os.getpid())
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert refused.value.errno == errno.EMFILE
    assert _read_stat(2**22 + 1) is None  # no such process: gone


def test_a_process_name_with_spaces_and_parentheses_is_read_whole(tmp_path):
    script = tmp_path / "odd) (name"
    script.write_text("#!/bin/sh\nsleep 5\n")
    script.chmod(0o755)
    child = subprocess.Popen([str(script)])
    try:
        time.sleep(0.2)
        read = _read_stat(child.pid)
    finally:
        child.kill()
        child.wait()
    assert read is not None and read.parent == os.getpid() and read.name == "odd) (name" and read.alive


def test_an_idle_pool_worker_is_no_leftover_and_a_busy_one_or_a_plain_thread_is():
    own = ModuleThreads()
    pool = ThreadPoolExecutor(2, thread_name_prefix="lazy")
    try:
        list(pool.map(time.sleep, [0.01, 0.01]))  # the pool's threads, started now, then idle
        assert leftover_threads(own) == []

        release = threading.Event()
        busy = pool.submit(release.wait)
        plain = threading.Thread(target=release.wait, name="beat")
        plain.start()
        try:
            left = leftover_threads(own)
        finally:
            release.set()
            busy.result()
            plain.join()
        assert len(left) == 2 and "beat" in left and any(name.startswith("lazy") for name in left)
    finally:
        pool.shutdown()


def test_the_modules_own_threads_at_their_own_work_are_no_leftovers_but_a_job_a_run_gave_its_pool_is():
    track_pool_jobs()  # as the runner does before it loads the processor
    stop, release = threading.Event(), threading.Event()
    flusher = threading.Thread(target=stop.wait, name="sdk-flusher")
    flusher.start()
    warm = ThreadPoolExecutor(2, thread_name_prefix="warm")
    own_loop = warm.submit(stop.wait)  # a job the module keeps running from its import
    list(warm.map(time.sleep, [0.01]))
    own = ModuleThreads()
    try:
        assert leftover_threads(own) == []
        job = warm.submit(release.wait)  # what a run submits and does not wait for
        try:
            left = leftover_threads(own)
        finally:
            release.set()
            job.result()
        assert len(left) == 1 and left[0].startswith("warm")
        assert leftover_threads(own) == []
    finally:
        stop.set()
        own_loop.result()
        flusher.join()
        warm.shutdown()


def test_a_thread_is_judged_by_its_innermost_frame_alone_and_only_a_pool_thread_can_be_idle():
    """Another thread's stack is never walked (CPython 3.11: ``f_back`` of a frame its thread has left can read freed memory).

    A plain thread is no pool worker whatever its frame; nor is a pool thread given a frame that is none.
    """
    release = threading.Event()
    plain = threading.Thread(target=release.wait, name="plain")
    pool = ThreadPoolExecutor(1, thread_name_prefix="judged")
    try:
        plain.start()
        list(pool.map(time.sleep, [0.01]))
        [worker] = [t for t in threading.enumerate() if t.name.startswith("judged")]
        give_up = time.monotonic() + 5
        while not idle_pool_worker(worker, sys._current_frames().get(worker.ident)):
            assert time.monotonic() < give_up, "the pool's thread never looked idle"
            time.sleep(0.005)
        assert idle_pool_worker(plain, sys._current_frames()[plain.ident]) is False
        assert idle_pool_worker(worker, None) is False
        assert idle_pool_worker(worker, {"not": "a frame"}) is False  # type: ignore[arg-type]
    finally:
        release.set()
        plain.join()
        pool.shutdown()
