"""Running one claimed group: the processor under its lease, retried here while attempts and time allow.

A run ends in one ``GroupEnd`` -- done, failed, handed back, stopped or lost
-- which ``GroupRunner.run`` records once: one observer call, one counter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from s3wq.config import WorkerSettings
from s3wq.host.run_ends import Returned
from s3wq.host.runners import RunEnd, Runner, Stopped
from s3wq.host.stopping import GracefulStop
from s3wq.model import Group, GroupOutcome, Outcome, RunStop, StopReason
from s3wq.protocol import clock
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.protocol.lease import LeaseKeeper
from s3wq.protocol.time_rules import enough_time
from s3wq.wording import plural
from s3wq.worker.ahead import ClaimAhead, ClaimTiming
from s3wq.worker.breaker import Breaker, Failure, failure_of
from s3wq.worker.budget import Budget
from s3wq.worker.finish import Finisher
from s3wq.worker.report import GroupEnd, WorkerObserver, WorkerReport

log = logging.getLogger("s3wq")


class GroupRunner:
    """Runs a worker's claimed groups one at a time, through its runner, and records how each ended."""

    def __init__(
        self,
        *,
        protocol: ClaimProtocol,
        runner: Runner,
        settings: WorkerSettings,
        budget: Budget,
        finisher: Finisher,
        observer: WorkerObserver,
        report: WorkerReport,
        breaker: Breaker,
        timing: ClaimTiming,
        stop: GracefulStop | None,
        sleep: Callable[[float], None],
    ):
        self.protocol = protocol
        self.runner = runner
        self.settings = settings
        self.budget = budget
        self.finisher = finisher
        self.observer = observer
        self.report = report
        self.breaker = breaker
        self.timing = timing
        self.stop = stop
        self.sleep = sleep
        # When a group handed back for a retry's pause may be tried again.
        self.retry_at: dict[str, float] = {}
        # Set once a run says this worker must claim nothing more (SERVICE_UNAVAILABLE): the worker stops after it.
        self.halted: StopReason | None = None

    def run(self, group: Group, claim: Claim, ahead: ClaimAhead | None, *, claimed_with: float | None) -> GroupOutcome:
        """Run the group until it is done, failed or given up here; record how it ended, once, and return that.

        ``claimed_with`` is the budget a claim of the main walk or the drain
        was made with: its own round trips, and the is-done check after it,
        are not time another group had, and on a loaded machine they can take
        more than FULL_SHARE leaves -- a worker's first claim would not be
        "full". A claim made ahead (None) waits for the run in front, which is
        time another group had: it is judged by what is left when its own run starts.
        """
        started = clock.now()
        end = self._run_to_end(group, claim, ahead, claimed_with)
        # Counted before the observer hears of it, so an observer that reads the report sees this group in it.
        if end.counted is not None:
            self.report.count(end.counted)
        if end.heard is not None:
            seconds = clock.now() - started
            # What `-v` shows of each group: how it ended, its pages, its time.
            pages = "" if end.pages is None else f", {plural(end.pages, 'page')}"
            log.info("group %s %s%s in %.1f s", group.hash, end.heard, pages, seconds)
            self.observer.group_finished(group, end.claim, end.heard, seconds)
        return end.outcome

    def _run_to_end(self, group: Group, claim: Claim, ahead: ClaimAhead | None, claimed_with: float | None) -> GroupEnd:
        while True:
            if claim.attempt > self.settings.max_attempts:
                # Taken over from a holder that vanished on the last allowed attempt.
                error = "worker lost (killed, or its lease ran out) on every attempt"
                return self.finisher.fail(group, claim, error, outcome=Outcome.LOST, attempts=claim.attempt - 1)
            if not self.budget.has_time():
                # The claim took what time we had (a foreign takeover pauses),
                # or it was made ahead and the run before took it: give it back unrun.
                self.finisher.give_back_unrun(claim, "claimed with no time left to run it")
                return GroupEnd.of(GroupOutcome.RELEASED, claim, heard=False)
            available = self.budget.left()
            run_budget = self.settings.run_budget(available)
            # Whether the group timeout, not the worker's deadline, ends this run if it goes on.
            group_limited = run_budget < available
            judged = run_budget if claimed_with is None else max(run_budget, claimed_with)
            if not enough_time(claim.body.needs_seconds, judged, self.budget.full_run):
                # Claimed ahead, and the run before took what this group needs.
                self.finisher.hand_back(claim, Outcome.TIMEOUT, counted=False, error=claim.body.error)
                return GroupEnd.of(GroupOutcome.NOT_ENOUGH_TIME, claim, heard=False)
            self.observer.group_started(group, claim)
            keeper = self._keeper_for_run(group, claim, stop_at=clock.now() + run_budget)
            if isinstance(keeper, GroupEnd):
                return keeper
            end, ran = self._run_once(group, keeper, ahead)
            claim = keeper.claim
            if isinstance(end, Stopped):
                return self.finisher.stopped(group, claim, end, ran, run_budget=judged, group_limited=group_limited)
            self.budget.ran(ran)
            failure = failure_of(end)
            if failure is None:
                assert isinstance(end, Returned)
                self.breaker.disarm()
                self.timing.run_seconds.append(ran)
                return self.finisher.complete(group, claim, keeper.state, defer=ahead is not None, end=end)
            if failure.kind == Outcome.UNAVAILABLE:
                return self._service_unavailable(group, claim, failure)
            retry = self._after_failure(group, claim, failure)
            if isinstance(retry, GroupEnd):
                return retry
            claim, claimed_with = retry

    def _keeper_for_run(self, group: Group, claim: Claim, *, stop_at: float) -> LeaseKeeper | GroupEnd:
        """The keeper of the run about to start, its lock written first if it is due; or how the group ended here.

        A claim made a while ago (ahead of a long run, a slow store since) may
        be near the end of what its last write covers for the strictest judge
        (``LeaseKeeper.hold_seconds``): our lease for s3wq takers, the foreign
        timeout for olmocr's workers, which check a lock's age and then PUT
        without a condition. Renewed only once the processor runs, a takeover
        between the start and the renewal's answer would run beside it;
        renewed here, before it starts, a taker either sees a fresh lock or has
        changed the ETag our write is conditional on, and nothing runs here.
        """
        keeper = LeaseKeeper(self.protocol, claim, stop_at=stop_at)
        if keeper.renewal_due():
            renewed = self.protocol.renew(claim)
            if renewed is None:
                # Taken over: the group is its taker's now.
                return GroupEnd.of(GroupOutcome.LOST, claim, heard=False)
            with self.report.tally() as report:
                report.renewals += 1
            keeper = LeaseKeeper(self.protocol, renewed, stop_at=stop_at)
        if not keeper.state.held():
            # The renewal took what it covers (a store that barely answers): a taker may be starting.
            return self.finisher.stopped(group, keeper.claim, Stopped(RunStop.EXPIRED), 0.0)
        return keeper

    def _run_once(self, group: Group, keeper: LeaseKeeper, ahead: ClaimAhead | None) -> tuple[RunEnd, float]:
        """Run the processor once under ``keeper``: how the run ended, as its lease judges it, and how long it took."""
        if ahead is not None:
            ahead.start()
        # Awake time (time.monotonic stops while the machine sleeps): a laptop that slept through a run did not need longer.
        run_started = time.monotonic()
        assert keeper.stop_at is not None
        try:
            end = self.runner.run(group, keeper, deadline_epoch=clock.epoch_at(keeper.stop_at))
        except BaseException:
            # KeyboardInterrupt or SystemExit in an embedding program: the
            # processor has stopped (the runner saw to it); give the group back --
            # unless a process of the run would not die: its lock is then left to its lease.
            keeper.settle()
            if self.runner.run_contained:
                self.finisher.hand_back(keeper.claim, Outcome.INTERRUPTED, counted=False, error="interrupted")
            raise
        keeper.settle()
        ran = time.monotonic() - run_started
        if ahead is not None:
            # The claim made ahead may still be on its way: it is due now
            # (the caller waits for it before the next run, beside which
            # this run's done flag goes out).
            ahead.ran(ran)
        with self.report.tally() as report:
            report.renewals += keeper.renewals
        if not keeper.state.held() and not (isinstance(end, Stopped) and end.reason in (RunStop.LOST, RunStop.EXPIRED)):
            # The lock was taken (a renewal in flight said so), or the run
            # ended just as the lease did: a taker may be starting, and a
            # flag written now could land after its writes.
            end = Stopped(RunStop.LOST if keeper.state.lost else RunStop.EXPIRED)
        return end, ran

    def _service_unavailable(self, group: Group, claim: Claim, failure: Failure) -> GroupEnd:
        """The processor said a service it needs is down: the group goes back unrun, no attempt used, and the worker stops.

        Neither an attempt nor the breaker's business: every group run now
        would fail the same way through no fault of its own, and using up
        their attempts would fail the queue for an outage. The lock is
        released, so the group is claimable at once by a later worker.
        """
        # A warning, as a run that failed is: what stops the worker is said once, where it stops (the CLI, the handler).
        log.warning(
            "group %s: a service the processor needs is unavailable: %s; handed back unrun, and this worker stops",
            group.hash,
            failure.error,
        )
        if failure.traceback:
            log.info("group %s traceback:\n%s", group.hash, failure.traceback.rstrip())
        self.finisher.hand_back(claim, Outcome.UNAVAILABLE, counted=False, error=failure.error)
        self.report.service_error = failure.error
        self.halted = StopReason.SERVICE_UNAVAILABLE
        return GroupEnd.of(GroupOutcome.UNAVAILABLE, claim)

    def _after_failure(self, group: Group, claim: Claim, failure: Failure) -> tuple[Claim, float] | GroupEnd:
        """After a run that raised or left work behind: the claim and budget of the next attempt here, or how the group ended."""
        at = f" (at {failure.frame})" if failure.frame else ""
        log.warning("group %s attempt %d failed: %s%s", group.hash, claim.attempt, failure.error, at)
        if failure.traceback:
            log.info("group %s attempt %d traceback:\n%s", group.hash, claim.attempt, failure.traceback.rstrip())
        if failure.kind == Outcome.LEFTOVER:
            with self.report.tally() as report:
                report.leftovers += 1
        tripped = self.breaker.tripped_by(group.hash, failure.bug)
        if tripped:
            self.report.breaker_error = failure.error
        if claim.attempt >= self.settings.max_attempts:
            return self.finisher.fail(
                group, claim, failure.error, outcome=failure.kind, traceback=failure.traceback, error_frame=failure.frame
            )
        backoff = self.settings.backoff_before(claim.attempt + 1)
        if tripped or not self.budget.has_time(backoff):
            # A broken processor (the breaker tripped): stop before it fails the
            # whole queue; or out of time for the pause. The group keeps this
            # attempt's count and is free at once for another worker (a fixed
            # processor), without waiting for staleness; this one comes back to
            # it only after the pause, if it has the time then.
            self.finisher.hand_back(claim, failure.kind, counted=True, error=failure.error)
            if not tripped:
                self._retried()
                self.retry_at[group.hash] = clock.now() + backoff
            return GroupEnd.of(GroupOutcome.RELEASED, claim)
        self._retried()
        # The lock stays ours while we wait: its lease was renewed up to the
        # run's end and the backoff is at most a third of what a write covers.
        self.sleep(backoff)
        if self.stop is not None and self.stop.requested:
            self.finisher.hand_back(claim, failure.kind, counted=True, error=failure.error)
            return GroupEnd.of(GroupOutcome.INTERRUPTED, claim)
        run_budget = self.budget.for_run()
        next_claim = self.protocol.next_attempt(claim, failure.error, budget=run_budget)
        if next_claim is None:
            return GroupEnd.of(GroupOutcome.LOST, claim, heard=False)
        return next_claim, run_budget

    def _retried(self) -> None:
        with self.report.tally() as report:
            report.retried += 1
