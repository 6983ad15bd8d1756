"""Writing how a group ended here: its done or failed flag, a hand-back, a release; each as a ``GroupEnd``.

Every write is conditional on the claim's lock: one that finds the lock
changed counts a lost lock, and nothing more is written for that group.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from s3wq.config import MIN_RUN_SECONDS, WorkerSettings
from s3wq.host.run_ends import Returned
from s3wq.host.runners import UNKILLABLE, Stopped
from s3wq.model import Group, GroupOutcome
from s3wq.protocol.bodies import ERROR, INTERRUPTED, TIMEOUT
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.protocol.lease import EXPIRED, LeaseState
from s3wq.protocol.time_rules import timeout_counts
from s3wq.protocol.tracebacks import ErrorFrame
from s3wq.worker.budget import Budget
from s3wq.worker.report import GroupEnd, WorkerReport

log = logging.getLogger("s3wq")

# A run that returned with nothing to report (Returned is frozen, so one instance serves every call).
RETURNED_CLEAN = Returned()


class Finisher:
    """Ends a worker's claims in the store, and says how each ended."""

    def __init__(self, protocol: ClaimProtocol, settings: WorkerSettings, budget: Budget, report: WorkerReport):
        self.protocol = protocol
        self.settings = settings
        self.budget = budget
        self.report = report
        # A group that returned, whose release waits for the next run to overlap.
        self._deferred: Callable[[], None] | None = None

    def _lost_lock(self) -> None:
        with self.report.tally() as report:
            report.lost_locks += 1

    def take_deferred(self) -> Callable[[], None] | None:
        deferred, self._deferred = self._deferred, None
        return deferred

    def finish_deferred(self) -> None:
        deferred = self.take_deferred()
        if deferred is not None:
            deferred()

    def release(self, claim: Claim) -> None:
        if not self.protocol.release(claim):
            self._lost_lock()
            log.warning("lock on %s was taken over before release", claim.hash)

    def hand_back(self, claim: Claim, outcome: str, *, counted: bool, error: str | None = None, needs_seconds: float | None = None) -> None:
        if not self.protocol.hand_back(claim, outcome, counted=counted, error=error, needs_seconds=needs_seconds):
            self._lost_lock()

    def give_back_unrun(self, claim: Claim, why: str) -> None:
        """Give up a claim whose group never ran here (ClaimProtocol.give_back_unrun: never written as finished)."""
        if not self.protocol.give_back_unrun(claim, why):
            self._lost_lock()

    def complete(self, group: Group, claim: Claim, lease: LeaseState, *, defer_release: bool, end: Returned = RETURNED_CLEAN) -> GroupEnd:
        """Record a run that returned -- done flag, then lock released -- while the lease still holds.

        The done flag is always written before the next run starts: a worker
        that dies in that run must not take with it the record of this one.
        Only the release (which a taker could do as well) may wait for the
        next run to hide it.
        """
        if not lease.held():
            return self.stopped(group, claim, Stopped(EXPIRED), 0.0)
        self.protocol.record_input_errors(claim, end.input_errors, end.inputs)
        ours = self.protocol.mark_done(claim, input_errors=end.input_errors)
        if ours and end.input_errors:
            with self.report.tally() as report:
                report.input_errors += end.input_errors
        if defer_release:
            self._deferred = functools.partial(self.release, claim)
        else:
            self.release(claim)
        # A claim made behind this one runs only if the flag names this claim:
        # a taker tells whether it ran by that (see ClaimProtocol.claim).
        if ours:
            return GroupEnd.of(GroupOutcome.DONE, claim)
        return GroupEnd.of(GroupOutcome.ALREADY_FINISHED, claim, heard=GroupOutcome.DONE)

    def fail(
        self,
        group: Group,
        claim: Claim,
        error: str,
        *,
        outcome: str = ERROR,
        attempts: int | None = None,
        traceback: str = "",
        error_frame: ErrorFrame | None = None,
    ) -> GroupEnd:
        ours = self.protocol.finalize_failed(
            claim, group, error, outcome=outcome, attempts=attempts, traceback=traceback, error_frame=error_frame
        )
        if ours:
            return GroupEnd.of(GroupOutcome.FAILED, claim)
        # Failed here, but a taker changed the lock first: the walk treats the group as lost.
        self._lost_lock()
        return GroupEnd.of(GroupOutcome.LOST, claim, heard=GroupOutcome.FAILED, counted=GroupOutcome.FAILED)

    def stopped(
        self, group: Group, claim: Claim, end: Stopped, ran: float, *, budget: float | None = None, group_limited: bool = False
    ) -> GroupEnd:
        """A run the worker stopped: at a signal, at its time (``budget``, what the run had), or at a lost lease."""
        if end.reason == INTERRUPTED:
            self.hand_back(claim, INTERRUPTED, counted=False, error="stopped by a signal")
            return GroupEnd.of(GroupOutcome.INTERRUPTED, claim)
        if end.reason == TIMEOUT:
            return self._timed_out(group, claim, ran, budget=budget, group_limited=group_limited)
        # The lock was taken from us, or the store could not be reached for a
        # whole lease: the processor is stopped, and whatever we wrote now
        # could land after a new holder's writes. Only an expired lease that
        # nobody took yet is worth giving back.
        if end.reason == UNKILLABLE:
            # Kill means gone: a process of the run outlived its SIGKILL, so the lock is left to its lease, which a taker honours.
            log.warning("group %s: a process of the run would not die; its lock is left to run out its lease", group.hash)
        else:
            log.warning("group %s: lease %s; processor stopped", group.hash, end.reason)
        if end.reason == EXPIRED:
            # A store still out of reach raises StorageError here, and the
            # worker stops; its lock then goes stale by itself.
            self.protocol.hand_back(claim, INTERRUPTED, counted=False, error="the lease could not be renewed")
        return GroupEnd.of(GroupOutcome.LOST, claim)

    def _timed_out(self, group: Group, claim: Claim, ran: float, *, budget: float | None, group_limited: bool) -> GroupEnd:
        # What this run had, not what the claim expected: a claim made ahead waits for the run before it.
        counted = timeout_counts(budget, self.budget.full_run)
        needs = max(ran, claim.body.needs_seconds or 0.0, MIN_RUN_SECONDS)
        if group_limited:
            error = f"ran past the group timeout of {self.settings.group_timeout:g} s: stopped after {ran:.1f} s"
        else:
            error = f"ran out of time: stopped after {ran:.1f} s (this worker could give it {self.budget.full:.1f} s at most)"
        log.warning("group %s: %s", group.hash, error)
        if counted and claim.attempt >= self.settings.max_attempts:
            self.report.count(GroupOutcome.TIMED_OUT)  # it timed out, and that failed it
            return self.fail(group, claim, error, outcome=TIMEOUT)
        self.hand_back(claim, TIMEOUT, counted=counted, error=error, needs_seconds=needs)
        return GroupEnd.of(GroupOutcome.TIMED_OUT, claim)
