"""The threads a run left at work in the runner: told from the module's own (a warm pool, an SDK's) and from idle pool workers.

A thread cannot be stopped alone: a process whose run left one must end.
What ran before any run is the module's (:class:`ModuleThreads`); a stdlib
``ThreadPoolExecutor`` worker waiting on an empty queue runs nothing of any
run, whoever started it (:func:`idle_pool_worker`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import thread as _futures_thread
from types import FrameType

# A thread that is just returning, or a pool worker just handed an item, settles within this.
_THREAD_SETTLE_SECONDS = 0.05
_POOL_WORKER_CODE = _futures_thread._worker.__code__
_POOL_JOB_CODE = _futures_thread._WorkItem.run.__code__


def _frames(frame: FrameType | None) -> Iterator[FrameType]:
    """A thread's stack from ``frame`` outwards, ending where it ends or stops being a stack of frames.

    Another thread's stack moves while it is walked (the GIL passes between
    our bytecodes), and on CPython 3.11 a frame's ``f_back`` read then has
    been seen to give an object that is no frame (a dict): that is the end
    of what can be known of that stack, not an error of the run.
    """
    while isinstance(frame, FrameType):
        yield frame
        frame = frame.f_back


def _pool_worker_frame(frame: FrameType | None) -> FrameType | None:
    """The frame of a stdlib ThreadPoolExecutor's worker loop in a thread's stack, if it is one of a pool's threads."""
    return next((f for f in _frames(frame) if f.f_code is _POOL_WORKER_CODE), None)


def _pool_job(frame: FrameType | None) -> object | None:
    """The work item a pool's thread is running (None: not a pool's thread, or between jobs)."""
    loop = _pool_worker_frame(frame)
    return None if loop is None else loop.f_locals.get("work_item")


def idle_pool_worker(frame: FrameType | None) -> bool:
    """Whether a thread is a stdlib ThreadPoolExecutor worker waiting on its work queue, with nothing queued.

    Such a thread runs nothing of any run, so it is not a leftover: a pool
    the module fills lazily (its threads start in the first runs that submit
    work) must not cost a new host and a failed attempt per group, nor hold
    up every in-process run until its lease ends. Idle: the pool's
    ``_worker`` loop holds no work item whose future is pending, and the
    queue is empty; a worker still tidying up after a job whose future is
    done (the processor's ``result()`` came back first) is idle too. A work
    item just popped but not yet stored is in neither: callers look twice, a
    moment apart.
    """
    finished = True
    loop = None
    for here in _frames(frame):
        if here.f_code is _POOL_WORKER_CODE:
            loop = here
            break
        if here.f_code is _POOL_JOB_CODE:
            job = here.f_locals.get("self")  # None once the job has set its exception
            finished = job is None or job.future.done()
    if loop is None:
        return False
    local = loop.f_locals
    job, queue = local.get("work_item"), local.get("work_queue")
    return finished and (job is None or job.future.done()) and queue is not None and queue.empty()


class ModuleThreads:
    """The threads that ran before any run -- the module's own from its import (a warm pool, an SDK's), and s3wq's."""

    def __init__(self) -> None:
        frames = sys._current_frames()
        self.threads = set(threading.enumerate())
        # The job each pool thread of the module was running then (a loop it keeps running is its own).
        self._jobs = {thread: _pool_job(frames.get(thread.ident)) for thread in self.threads}

    def add(self, thread: threading.Thread) -> None:
        self.threads.add(thread)

    def at_own_work(self, thread: threading.Thread, frame: FrameType | None) -> bool:
        """Whether ``thread`` is one of these doing what it did then: its own loop, or the pool job it had then.

        A pool thread of the module running another job runs one a run
        submitted, most likely, and left running.
        """
        if thread not in self.threads:
            return False
        if _pool_worker_frame(frame) is None:
            return True
        job = _pool_job(frame)
        return job is not None and job is self._jobs.get(thread)


def _threads_of_runs(own: ModuleThreads) -> tuple[list[threading.Thread], bool]:
    """Threads at work that are not at the module's own (nor s3wq's), and whether an idle pool worker was passed over."""
    frames = sys._current_frames()
    busy, pooled = [], False
    for thread in threading.enumerate():
        frame = frames.get(thread.ident)
        # A native thread that once called into Python stays listed as a dummy forever: not ours to judge.
        if thread is threading.current_thread() or isinstance(thread, threading._DummyThread) or not thread.is_alive():
            continue
        if own.at_own_work(thread, frame):
            continue
        if idle_pool_worker(frame):
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
