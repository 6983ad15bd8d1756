"""The threads a run left at work in the runner: told from the module's own (a warm pool, an SDK's) and from idle pool workers.

A thread cannot be stopped alone: a process whose run left one must end.
What ran before any run is the module's (:class:`ModuleThreads`); a stdlib
``ThreadPoolExecutor`` worker waiting on an empty queue runs nothing of any
run, whoever started it (:func:`idle_pool_worker`).

Another thread is judged by its innermost Python frame alone, never by
walking its stack: on CPython 3.11 ``f_back`` of a frame that its thread
has left while we looked (the GIL passes between our bytecodes) can read
freed memory -- seen here as a dict where a frame should be, and as a
segfault of the process that looked. Which job a pool thread runs is told
by the job itself (:func:`track_pool_jobs`), not by its frames.
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
import time
from concurrent.futures import thread as _futures_thread
from types import FrameType
from typing import cast

# A thread that is just returning, or a pool worker just handed an item, settles within this.
_THREAD_SETTLE_SECONDS = 0.05
_POOL_WORKER_CODE = _futures_thread._worker.__code__
_ORIGINAL_JOB_RUN = _futures_thread._WorkItem.run
# The job each pool thread runs, by thread id, once track_pool_jobs() is on (the processor host's runner).
_RUNNING_JOBS: dict[int | None, object] = {}


@functools.wraps(_ORIGINAL_JOB_RUN)
def _tracked_job_run(self, *args, **kwargs):
    ident = threading.get_ident()
    _RUNNING_JOBS[ident] = self
    try:
        return _ORIGINAL_JOB_RUN(self, *args, **kwargs)
    finally:
        _RUNNING_JOBS.pop(ident, None)


# The frames a pool thread is innermost in while a job of C code runs (time.sleep, sum): the job's run.
_POOL_JOB_CODES = (_ORIGINAL_JOB_RUN.__code__, _tracked_job_run.__code__)  # type: ignore[attr-defined]  # functools.wraps's type hides __code__


def track_pool_jobs() -> None:
    """Have every ``ThreadPoolExecutor`` job say which thread runs it, from now on (the runner does, before it loads the processor).

    The one change to the stdlib s3wq makes, in the processor host alone:
    ``_WorkItem.run`` records itself while it runs, so that a pool thread of
    the module is known to be at its own job (one the module gave it at
    import) or at one a run gave it.
    """
    _futures_thread._WorkItem.run = _tracked_job_run  # type: ignore[method-assign]  # the one patch, on purpose


def _is_pool_thread(thread: threading.Thread) -> bool:
    return getattr(thread, "_target", None) is _futures_thread._worker


def _pool_queue(thread: threading.Thread) -> queue.SimpleQueue | None:
    """The work queue a pool thread takes its jobs from: among the arguments its pool started it with (their order varies)."""
    return next((arg for arg in getattr(thread, "_args", ()) if isinstance(arg, queue.SimpleQueue)), None)


def _finished(job: object) -> bool:
    """Whether a pool's work item (or the (item, name) pair newer Pythons queue) has nothing left to run."""
    item = job[0] if isinstance(job, tuple) and job else job
    future = getattr(item, "future", None)
    return item is None or future is None or future.done()


def idle_pool_worker(thread: threading.Thread, frame: FrameType | None) -> bool:
    """Whether ``thread`` is a stdlib ThreadPoolExecutor worker waiting on its work queue, with nothing queued.

    Such a thread runs nothing of any run, so it is not a leftover: a pool
    the module fills lazily (its threads start in the first runs that submit
    work) must not cost a new host and a failed attempt per group, nor hold
    up every in-process run until its lease ends. Idle: its innermost frame
    (``frame``) is the pool's ``_worker`` loop holding no work item whose
    future is pending, or a job's run whose future is done (the processor's
    ``result()`` came back first), and its queue is empty. A work item just
    popped but not yet stored is in neither: callers look twice, a moment apart.
    """
    if not _is_pool_thread(thread) or not isinstance(frame, FrameType):
        return False
    if frame.f_code is _POOL_WORKER_CODE:
        job = frame.f_locals.get("work_item")
    elif frame.f_code in _POOL_JOB_CODES:
        job = frame.f_locals.get("self")
    else:
        return False
    work_queue = _pool_queue(thread)
    return _finished(job) and work_queue is not None and work_queue.empty()


class ModuleThreads:
    """The threads that ran before any run -- the module's own from its import (a warm pool, an SDK's), and s3wq's."""

    def __init__(self) -> None:
        self.threads = set(threading.enumerate())
        # The job each pool thread of the module was running then (track_pool_jobs: a loop it keeps running is its own).
        self._jobs = {thread: _RUNNING_JOBS.get(thread.ident) for thread in self.threads if _is_pool_thread(thread)}

    def add(self, thread: threading.Thread) -> None:
        self.threads.add(thread)

    def at_own_work(self, thread: threading.Thread) -> bool:
        """Whether ``thread`` is one of these doing what it did then: its own loop, or the pool job it had then.

        A pool thread of the module running another job runs one a run
        submitted, most likely, and left running.
        """
        if thread not in self.threads:
            return False
        if not _is_pool_thread(thread):
            return True
        job = _RUNNING_JOBS.get(thread.ident)
        return job is not None and job is self._jobs.get(thread)


def _threads_of_runs(own: ModuleThreads) -> tuple[list[threading.Thread], bool]:
    """Threads at work that are not at the module's own (nor s3wq's), and whether an idle pool worker was passed over."""
    frames = cast("dict[int | None, FrameType]", sys._current_frames())
    busy, pooled = [], False
    for thread in threading.enumerate():
        frame = frames.get(thread.ident)
        # A native thread that once called into Python stays listed as a dummy forever: not ours to judge.
        if thread is threading.current_thread() or isinstance(thread, threading._DummyThread) or not thread.is_alive():
            continue
        if own.at_own_work(thread):
            continue
        if idle_pool_worker(thread, frame):
            pooled = True
        else:
            busy.append(thread)
    return busy, pooled


def leftover_threads(own: ModuleThreads) -> list[str]:
    """The names of the threads a run left at work: not ``own``'s at their own work, nor idle in a pool.

    A thread cannot be stopped alone: a process whose run left one must end.
    """
    busy, pooled = _threads_of_runs(own)
    if not busy and not pooled:
        return []
    give_up = time.monotonic() + _THREAD_SETTLE_SECONDS
    for thread in busy:
        if thread not in own.threads:  # a pool thread of the module goes back to its queue, not away
            thread.join(max(0.0, give_up - time.monotonic()))
    time.sleep(max(0.001, give_up - time.monotonic()) if busy else 0.001)  # and the GIL to a pool worker holding an item not yet stored
    return sorted(thread.name for thread in _threads_of_runs(own)[0])
