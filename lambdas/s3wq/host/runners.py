"""Where a processor runs, and how it is stopped before its lease can end.

* ``HostRunner`` runs it in a processor host (:mod:`s3wq.host.sandbox`), a child
  process the worker kills when the run must end -- its time is up, its lock
  was taken, its lease could not be renewed, or the operator pressed Ctrl-C --
  and then carries on. The command line and the Lambda handler use it.
* ``InProcessRunner`` calls it in the worker's own thread, for a ``Worker``
  embedded in a program. A thread cannot be stopped, so when a run must end
  its keeper kills the whole process with SIGKILL, as Lambda kills an
  invocation at its timeout, and on Linux a kernel timer stands behind the
  keeper (:mod:`s3wq.host.killtimer`); the lock is then left to go stale. A run
  that returns or raises while threads it started still run (or, on Linux,
  direct child processes) is not over: ``run`` waits for them, keeping the
  lease and that rule, and says what they were (``leftovers``).

  It does not contain processes. A child that leaves (``sh -c 'helper &'``,
  a double fork, a daemon), or any child once the process is killed, runs
  on beside the group's next holder. Only the processor host holds a run's
  processes: embed ``Worker(backend, None, settings,
  runner=HostRunner(ProcessorHost(spec, workspace_uri)))`` for that.

Either way nothing the run started in Python runs past its lease, and
``run`` returns only once the processor can do nothing more.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, replace
from types import FrameType
from typing import Protocol, cast

from s3wq.host.containment import describe_leftovers
from s3wq.host.killtimer import KillTimer, process_kill_timer
from s3wq.host.procfs import running_children
from s3wq.host.run_ends import Raised, Returned, Unkillable, unavailable_service
from s3wq.host.sandbox import ProcessorHost
from s3wq.host.stopping import GracefulStop
from s3wq.host.threads import idle_pool_worker
from s3wq.model import Group, RunStop
from s3wq.processors import Processor, ProcessorContext
from s3wq.protocol import clock
from s3wq.protocol.lease import LeaseKeeper
from s3wq.protocol.tracebacks import one_line_error, own_frame, processor_roots, processor_traceback
from s3wq.store import Backend

log = logging.getLogger("s3wq")


@dataclass(frozen=True)
class Stopped:
    """The worker stopped the run: ``timeout``, ``lost``, ``expired``, ``interrupted`` or ``unkillable``."""

    reason: RunStop


RunEnd = Returned | Raised | Stopped


class Runner(Protocol):
    def prepare(self) -> bool:
        """Get ready to run groups; False if a stop was requested meanwhile. Raises ProcessorNotFound."""

    def run(self, group: Group, keeper: LeaseKeeper, *, deadline_epoch: float) -> RunEnd:
        """Run the processor on ``group`` while ``keeper`` holds its lease; return once it can do nothing more."""

    @property
    def run_contained(self) -> bool:
        """False while a process of a run that ended by an exception (KeyboardInterrupt) may still live: its group must not be handed back."""


class HostRunner:
    def __init__(self, host: ProcessorHost, *, stop: GracefulStop | None = None):
        self.host = host
        self.stop = stop
        self._wake = stop.fds if stop else []
        self._contained = True
        if stop is not None:
            stop.on_second_signal(self._kill_host_now)

    def _kill_host_now(self) -> None:
        self.host.kill_now()  # the warden ends the host, and again when the worker's exit reaches it

    def prepare(self) -> bool:
        return self.host.start(self._wake)

    @property
    def run_contained(self) -> bool:
        return self._contained

    def run(self, group: Group, keeper: LeaseKeeper, *, deadline_epoch: float) -> RunEnd:
        self._contained = True
        if not self.host.start(self._wake):
            return Stopped(RunStop.INTERRUPTED)
        verdict = keeper.tick()  # a host restarted after a crash may have taken the lease's time
        if verdict is not None:
            return Stopped(verdict)
        reported = keeper.state.valid_until
        claim = keeper.claim
        self.host.run(
            group.hash,
            group.paths,
            worker_id=keeper.protocol.worker_id,
            attempt=claim.attempt,
            owner=claim.owner,
            deadline_epoch=deadline_epoch,
            held_until=reported,
        )
        try:
            while True:
                end = self.host.wait(min(keeper.next_wakeup() - clock.now(), keeper.wait_slice), self._wake)
                if isinstance(end, Unkillable):
                    return Stopped(RunStop.UNKILLABLE)
                if end is not None:
                    return end
                if self.stop is not None and self.stop.requested:
                    return Stopped(RunStop.INTERRUPTED if self.host.kill() else RunStop.UNKILLABLE)
                verdict = keeper.tick()
                if verdict is not None:
                    return Stopped(verdict if self.host.kill() else RunStop.UNKILLABLE)
                if keeper.state.valid_until != reported:
                    reported = keeper.state.valid_until
                    self.host.lease(reported)
        except BaseException:
            # A KeyboardInterrupt with no GracefulStop installed, say: the
            # processor must be stopped before the caller hands the group back.
            self._contained = self.host.kill()
            raise


# The keeper stops the process at the lease's margin; the kernel timer, a little later, if the keeper could not.
_KERNEL_GRACE_SECONDS = 0.25
# s3wq names every thread it starts in a worker so (the lease keeper, its
# renewals, the claim made ahead): one may be busy as a run ends, and none is the run's.
S3WQ_THREAD_PREFIX = "s3wq-"
# How long the runner waits on one leftover thread before it looks at them all again.
_LEFTOVER_POLL_SECONDS = 0.05
_LEFTOVER_NAME_CHARS = 40


@dataclass(frozen=True)
class _Running:
    """What runs in this process beside the worker: Python threads, and (Linux) direct child processes.

    ``idle_pool`` are the threads that were pool workers waiting for work:
    a job the run gives one of them is the run's.
    """

    threads: frozenset[threading.Thread]
    idle_pool: frozenset[threading.Thread]
    children: frozenset[int]

    @classmethod
    def now(cls) -> _Running:
        threads = threading.enumerate()
        frames = cast("dict[int | None, FrameType]", sys._current_frames())
        idle = frozenset(t for t in threads if idle_pool_worker(t, frames.get(t.ident)))
        return cls(frozenset(threads), idle, frozenset(running_children(os.getpid())))


def _left_running(before: _Running) -> tuple[list[threading.Thread], dict[int, str]]:
    """The threads and child processes started since ``before`` that still run, and the pool workers it set to work.

    s3wq's own threads and idle pool workers aside.
    """
    # A thread counts while it is listed, whatever its frames say: one that
    # ends between the two reads has started any thread of its own by then.
    threads = [
        t
        for t in threading.enumerate()
        if (t not in before.threads or t in before.idle_pool)
        and not t.name.startswith(S3WQ_THREAD_PREFIX)
        # Started by native code: it can be neither joined nor told alive.
        and not isinstance(t, threading._DummyThread)
    ]
    frames = cast("dict[int | None, FrameType]", sys._current_frames())
    threads = [t for t in threads if not idle_pool_worker(t, frames.get(t.ident))]
    return threads, {pid: name for pid, name in running_children(os.getpid()).items() if pid not in before.children}


def _printable(name: str) -> str:
    """A thread's name as a leftovers line shows it: any text a processor gave it, cut short and made printable."""
    return "".join(c if c.isprintable() else "?" for c in name[:_LEFTOVER_NAME_CHARS])


def _wait_for_leftovers(before: _Running, group: Group, ended: str) -> str:
    """Wait until the threads and child processes the run left have ended; what they were (``describe_leftovers``, "" if none).

    The caller keeps the lease meanwhile, and its rule: at the lease's end
    or the deadline, its keeper kills the process.
    """
    started = time.monotonic()
    threads: dict[threading.Thread, str] = {}
    processes: dict[int, str] = {}
    try:
        while True:
            running, children = _left_running(before)
            if not running and not children:
                break
            if not threads and not processes:
                log.warning("group %s: the run %s with threads or processes still running; waiting for them", group.hash, ended)
            threads.update((t, _printable(t.name)) for t in running if t not in threads)
            processes.update((pid, name) for pid, name in children.items() if pid not in processes)
            if running:
                running[0].join(_LEFTOVER_POLL_SECONDS)
            else:
                time.sleep(_LEFTOVER_POLL_SECONDS)
    except BaseException:
        # A second Ctrl-C, say: the group must not be handed back while they run, and they cannot be stopped.
        log.critical("group %s: interrupted while what the run left still runs; stopping the process", group.hash)
        os.kill(os.getpid(), signal.SIGKILL)
        raise
    if not threads and not processes:
        return ""
    what = describe_leftovers(list(processes.values()), list(threads.values()))
    log.warning("group %s: %s ran on for %.1f s after the run %s", group.hash, what, time.monotonic() - started, ended)
    return what


class InProcessRunner:
    def __init__(self, processor: Processor, backend: Backend):
        self.processor = processor
        self.backend = backend
        self._roots = processor_roots(processor)

    @staticmethod
    def _kernel_timer() -> KillTimer | None:
        """This process's kernel timer, where the kernel keeps one on the lease clock (Linux)."""
        timer = process_kill_timer()
        return timer if timer.kernel_clock else None

    def prepare(self) -> bool:
        return True

    @property
    def run_contained(self) -> bool:
        return True  # run() returns or raises only once what the run left has ended, or the process is killed

    def _call(self, group: Group, ctx: ProcessorContext) -> Returned | Raised:
        try:
            self.processor(group, ctx)
            return Returned(ctx.input_error_count, tuple(ctx.input_errors), pages=ctx.pages)
        except Exception as exc:  # noqa: BLE001 -- a processor failure is an attempt, never a crash of the worker
            service = unavailable_service(exc)
            error = one_line_error(exc) if service is None else service
            return Raised(error, "".join(processor_traceback(exc)), own_frame(exc, self._roots), unavailable=service is not None)
        finally:
            ctx.end_run()  # a thread the processor left must not go on believing it holds the group

    def run(self, group: Group, keeper: LeaseKeeper, *, deadline_epoch: float) -> RunEnd:
        """Run the processor here; return once it and every thread (and child process) it started have ended."""
        before = _Running.now()
        finished = threading.Event()
        timer = self._kernel_timer()
        armed_for = keeper.stop_by()
        if timer is not None:
            timer.arm(armed_for + _KERNEL_GRACE_SECONDS)

        def keep() -> None:
            nonlocal armed_for
            while not finished.wait(max(0.0, min(keeper.next_wakeup() - clock.now(), keeper.wait_slice))):
                verdict: RunStop | str | None
                try:
                    verdict = keeper.tick()
                except BaseException:
                    log.critical("group %s: the lease keeper failed; stopping the process", group.hash, exc_info=True)
                    verdict = "keeper failed"
                if verdict is not None and not finished.is_set():
                    log.critical(
                        "group %s: %s; stopping the process (an in-process processor cannot be stopped alone)", group.hash, verdict
                    )
                    os.kill(os.getpid(), signal.SIGKILL)
                if timer is not None and keeper.stop_by() != armed_for:
                    armed_for = keeper.stop_by()
                    timer.arm(armed_for + _KERNEL_GRACE_SECONDS)

        keeper_thread = threading.Thread(target=keep, daemon=True, name=f"s3wq-lease-{group.hash[:8]}")
        keeper_thread.start()
        claim = keeper.claim
        ctx = ProcessorContext(
            worker_id=keeper.protocol.worker_id,
            attempt=claim.attempt,
            deadline=deadline_epoch,
            group=group,
            backend=self.backend,
            owner=claim.owner,
            _held=keeper.state.held,
        )
        try:
            try:
                end = self._call(group, ctx)
            except BaseException:  # KeyboardInterrupt: the worker hands the group back, so nothing of the run may go on
                _wait_for_leftovers(before, group, "was interrupted")
                raise
            leftovers = _wait_for_leftovers(before, group, "returned" if isinstance(end, Returned) else "raised")
            return replace(end, leftovers=leftovers) if leftovers else end
        finally:
            finished.set()
            keeper_thread.join()  # before disarming: the keeper may be re-arming the timer
            if timer is not None:
                timer.disarm()
