"""Where a processor runs, and how it is stopped before its lease can end.

* ``HostRunner`` runs it in a processor host (:mod:`s3wq.sandbox`), a child
  process the worker kills when the run must end -- its time is up, its lock
  was taken, its lease could not be renewed, or the operator pressed Ctrl-C --
  and then carries on. The command line and the Lambda handler use it.
* ``InProcessRunner`` calls it in the worker's own thread, for a ``Worker``
  embedded in a program. A thread cannot be stopped, so when a run must end
  its keeper kills the whole process with SIGKILL, as Lambda kills an
  invocation at its timeout, and on Linux a kernel timer stands behind the
  keeper (:mod:`s3wq.killtimer`); the lock is then left to go stale.

Either way nothing runs past its lease, and ``run`` returns only once the
processor can do nothing more.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass
from typing import Protocol

from . import clock
from .backends import Backend
from .index import Group
from .killtimer import KillTimer, process_kill_timer
from .lease import LeaseKeeper
from .processors import Processor, ProcessorContext
from .sandbox import ProcessorHost, Raised, Returned, one_line_error, processor_traceback
from .stopping import GracefulStop
from .tracebacks import own_frame, processor_roots

log = logging.getLogger("s3wq")

INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class Stopped:
    """The worker stopped the run: ``timeout``, ``lost``, ``expired`` or ``interrupted``."""

    reason: str


RunEnd = Returned | Raised | Stopped


class Runner(Protocol):
    def prepare(self) -> bool:
        """Get ready to run groups; False if a stop was requested meanwhile. Raises ProcessorNotFound."""

    def run(self, group: Group, keeper: LeaseKeeper, *, deadline_epoch: float) -> RunEnd:
        """Run the processor on ``group`` while ``keeper`` holds its lease; return once it can do nothing more."""


class HostRunner:
    def __init__(self, host: ProcessorHost, *, stop: GracefulStop | None = None):
        self.host = host
        self.stop = stop
        self._wake = stop.fds if stop else []
        if stop is not None:
            stop.on_second_signal(self._kill_host_now)

    def _kill_host_now(self) -> None:
        process = self.host._process
        if process is not None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def prepare(self) -> bool:
        return self.host.start(self._wake)

    def run(self, group: Group, keeper: LeaseKeeper, *, deadline_epoch: float) -> RunEnd:
        if not self.host.start(self._wake):
            return Stopped(INTERRUPTED)
        verdict = keeper.tick()  # a host restarted after a crash may have taken the lease's time
        if verdict is not None:
            return Stopped(verdict)
        reported = keeper.state.valid_until
        claim = keeper.claim
        self.host.run(
            group.hash, group.paths, worker_id=keeper.protocol.worker_id, attempt=claim.attempt, owner=claim.owner,
            deadline_epoch=deadline_epoch, held_until=reported,
        )
        try:
            while True:
                end = self.host.wait(min(keeper.next_wakeup() - clock.now(), keeper.wait_slice), self._wake)
                if end is not None:
                    return end
                if self.stop is not None and self.stop.requested:
                    self.host.kill()
                    return Stopped(INTERRUPTED)
                verdict = keeper.tick()
                if verdict is not None:
                    self.host.kill()
                    return Stopped(verdict)
                if keeper.state.valid_until != reported:
                    reported = keeper.state.valid_until
                    self.host.lease(reported)
        except BaseException:
            # A KeyboardInterrupt with no GracefulStop installed, say: the
            # processor must be stopped before the caller hands the group back.
            self.host.kill()
            raise


# The keeper stops the process at the lease's margin; the kernel timer, a little later, if the keeper could not.
_KERNEL_GRACE_SECONDS = 0.25


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

    def run(self, group: Group, keeper: LeaseKeeper, *, deadline_epoch: float) -> RunEnd:
        finished = threading.Event()
        timer = self._kernel_timer()
        armed_for = keeper.stop_by()
        if timer is not None:
            timer.arm(armed_for + _KERNEL_GRACE_SECONDS)

        def keep() -> None:
            nonlocal armed_for
            while not finished.wait(max(0.0, min(keeper.next_wakeup() - clock.now(), keeper.wait_slice))):
                try:
                    verdict = keeper.tick()
                except BaseException:  # noqa: BLE001 -- a keeper that cannot keep the lease must not leave the processor running
                    log.critical("group %s: the lease keeper failed; stopping the process", group.hash, exc_info=True)
                    verdict = "keeper failed"
                if verdict is not None and not finished.is_set():
                    log.critical("group %s: %s; stopping the process (an in-process processor cannot be stopped alone)", group.hash, verdict)
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
            self.processor(group, ctx)
            return Returned(ctx.input_error_count, tuple(ctx.input_errors))
        except Exception as exc:  # a processor failure is an attempt, never a crash of the worker
            return Raised(one_line_error(exc), "".join(processor_traceback(exc)), own_frame(exc, self._roots))
        finally:
            finished.set()
            keeper_thread.join()  # before disarming: the keeper may be re-arming the timer
            if timer is not None:
                timer.disarm()

