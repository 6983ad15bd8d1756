"""Writing how a group ended here: its done or failed flag, a hand-back, a release; each as a ``GroupEnd``.

Every write is conditional on the claim's lock: one that finds the lock
changed counts a lost lock, and nothing more is written for that group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from s3wq.config import MIN_RUN_SECONDS, WorkerSettings
from s3wq.host.run_ends import Returned
from s3wq.host.runners import Stopped
from s3wq.model import Group, GroupOutcome, Outcome, RunStop
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.protocol.lease import LeaseState
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
        # A group that returned, whose done flag and release go out beside the next run: the wait for them.
        self._deferred: Callable[[], object] | None = None
        self._records: ThreadPoolExecutor | None = None

    def _lost_lock(self) -> None:
        with self.report.tally() as report:
            report.lost_locks += 1

    def close(self) -> None:
        """Once the deferred records are finished: the thread that wrote them ends."""
        if self._records is not None:
            self._records.shutdown()
            self._records = None

    def take_deferred(self) -> Callable[[], object] | None:
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

    def hand_back(
        self, claim: Claim, outcome: Outcome, *, counted: bool, error: str | None = None, needs_seconds: float | None = None
    ) -> None:
        if not self.protocol.hand_back(claim, outcome, counted=counted, error=error, needs_seconds=needs_seconds):
            self._lost_lock()

    def give_back_unrun(self, claim: Claim, why: str) -> None:
        """Give up a claim whose group never ran here (ClaimProtocol.give_back_unrun: never written as finished)."""
        if not self.protocol.give_back_unrun(claim, why):
            self._lost_lock()

    def complete(self, group: Group, claim: Claim, lease: LeaseState, *, defer: bool, end: Returned = RETURNED_CLEAN) -> GroupEnd:
        """Record a run that returned -- input errors, done flag, then lock released -- while the lease still holds.

        With ``defer`` (the main walk, which claims ahead) the writes go out
        on a helper thread beside the next run, as it starts, and the group
        counts done now: a worker that dies in the first round trip of that
        run may take the done flag with it, but never the group, whose lock
        it still holds -- it goes stale, and a taker runs the group again.
        Without, they go out here, before anything else runs.
        """
        if not lease.held():
            return self.stopped(group, claim, Stopped(RunStop.EXPIRED), 0.0)
        if defer:
            if self._records is None:
                self._records = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3wq-record")
            # Out at once, one group's records after another's, as early as if written here; joined (its error
            # raised) by the next run's helpers or at the walk's end.
            self._deferred = self._records.submit(self._record_done, group, claim, lease, end, deferred=True).result
            return GroupEnd.of(GroupOutcome.DONE, claim, pages=end.pages)
        # A claim made behind this one runs only if the flag names this claim:
        # a taker tells whether it ran by that (see ClaimProtocol.claim).
        if self._record_done(group, claim, lease, end, deferred=False):
            return GroupEnd.of(GroupOutcome.DONE, claim, pages=end.pages)
        return GroupEnd.of(GroupOutcome.ALREADY_FINISHED, claim, heard=GroupOutcome.DONE, pages=end.pages)

    def _record_done(self, group: Group, claim: Claim, lease: LeaseState, end: Returned, *, deferred: bool) -> bool:
        """The input errors, the done flag and the release of a run that returned; whether the flag is this claim's."""
        if deferred and not lease.held():
            # Judged held with the lease's margin to spare a moment ago, on the thread that ran it: a helper that
            # got no CPU for that long writes nothing, and the lock goes stale with the group undone, to run again.
            log.warning("group %s: its lease ran out before its done flag could be written; it will run again", group.hash)
            self._undo_done()
            return False
        self.protocol.record_input_errors(claim, end.input_errors, end.inputs)
        ours = self.protocol.mark_done(claim, input_errors=end.input_errors, pages=end.pages)
        if ours and (end.input_errors or end.pages):
            with self.report.tally() as report:
                report.input_errors += end.input_errors
                report.pages += end.pages or 0
        if not ours and deferred:
            with self.report.tally() as report:  # counted done when the run returned: another completion came first
                report.processed -= 1
                report.already_finished += 1
        self.release(claim)
        return ours

    def _undo_done(self) -> None:
        with self.report.tally() as report:
            report.processed -= 1
            report.lost_locks += 1

    def fail(
        self,
        group: Group,
        claim: Claim,
        error: str,
        *,
        outcome: Outcome = Outcome.ERROR,
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
        self, group: Group, claim: Claim, end: Stopped, ran: float, *, run_budget: float | None = None, group_limited: bool = False
    ) -> GroupEnd:
        """A run the worker stopped: at a signal, at its time (``run_budget``, what the run had), or at a lost lease."""
        # What the lock records, if anything is written: RunStop.recorded_as is the one mapping of a stop to an outcome.
        outcome = end.reason.recorded_as
        if end.reason == RunStop.INTERRUPTED:
            assert outcome is not None
            self.hand_back(claim, outcome, counted=False, error="stopped by a signal")
            return GroupEnd.of(GroupOutcome.INTERRUPTED, claim)
        if end.reason == RunStop.TIMEOUT:
            assert outcome is not None
            return self._timed_out(group, claim, ran, outcome, run_budget=run_budget, group_limited=group_limited)
        # The lock was taken from us, or the store could not be reached for a
        # whole lease: the processor is stopped, and whatever we wrote now
        # could land after a new holder's writes. Only an expired lease that
        # nobody took yet is worth giving back.
        if end.reason == RunStop.UNKILLABLE:
            # Kill means gone: a process of the run outlived its SIGKILL, so the lock is left to its lease, which a taker honours.
            log.warning("group %s: a process of the run would not die; its lock is left to run out its lease", group.hash)
        else:
            log.warning("group %s: lease %s; processor stopped", group.hash, end.reason)
        if end.reason == RunStop.EXPIRED:
            # A store still out of reach raises StorageError here, and the
            # worker stops; its lock then goes stale by itself.
            assert outcome is not None
            self.protocol.hand_back(claim, outcome, counted=False, error="the lease could not be renewed")
        return GroupEnd.of(GroupOutcome.LOST, claim)

    def _timed_out(
        self, group: Group, claim: Claim, ran: float, outcome: Outcome, *, run_budget: float | None, group_limited: bool
    ) -> GroupEnd:
        # What this run had, not what the claim expected: a claim made ahead waits for the run before it.
        counted = timeout_counts(run_budget, self.budget.full_run)
        needs = max(ran, claim.body.needs_seconds or 0.0, MIN_RUN_SECONDS)
        if group_limited:
            error = f"ran past the group timeout of {self.settings.group_timeout:g} s: stopped after {ran:.1f} s"
        else:
            error = f"ran out of time: stopped after {ran:.1f} s (this worker could give it {self.budget.full:.1f} s at most)"
        log.warning("group %s: %s", group.hash, error)
        if counted and claim.attempt >= self.settings.max_attempts:
            self.report.count(GroupOutcome.TIMED_OUT)  # it timed out, and that failed it
            return self.fail(group, claim, error, outcome=outcome)
        self.hand_back(claim, outcome, counted=counted, error=error, needs_seconds=needs)
        return GroupEnd.of(GroupOutcome.TIMED_OUT, claim)
