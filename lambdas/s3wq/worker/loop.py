"""The worker: walk the index, claim each group, run it under a lease, and record how it ended.

A group reads claim -> run -> finish: ``Worker._work_on`` has the
``Claimer`` (``claiming``) take the lock, the ``GroupRunner`` (``running``)
run the processor (retrying while attempts and time allow) and record the
group's end once, and the ``Finisher`` (``finish``) write it. The policies
are units of their own: the walk (``walk``), claiming ahead (``ahead``), the
breaker (``breaker``), the worker's time (``budget``). After the walk,
``Worker._drain_waiting`` comes back for groups that were held or waiting.
"""

from __future__ import annotations

import functools
import logging
import random
import select
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from s3wq.config import MIN_RUN_SECONDS, WorkerSettings
from s3wq.errors import NoIndex
from s3wq.host.runners import InProcessRunner, Runner
from s3wq.host.stopping import GracefulStop
from s3wq.index import WorkIndex
from s3wq.model import Group, GroupOutcome, StopReason
from s3wq.processors import Processor
from s3wq.protocol import clock
from s3wq.protocol.claims import Claim, ClaimProtocol, Held
from s3wq.protocol.probe import probe_store
from s3wq.store import Backend
from s3wq.worker.ahead import ClaimAhead, ClaimTiming
from s3wq.worker.breaker import Breaker
from s3wq.worker.budget import Budget
from s3wq.worker.claiming import Claimer
from s3wq.worker.finish import Finisher
from s3wq.worker.report import WorkerObserver, WorkerReport
from s3wq.worker.running import GroupRunner
from s3wq.worker.walk import SegmentLoader, Walk, start_position

log = logging.getLogger("s3wq")

# How a run ends that leaves its group done or failed for good, by this worker.
DONE_OR_FAILED = frozenset({GroupOutcome.DONE, GroupOutcome.FAILED})
# How a claim or a run ends that leaves nothing for this worker to come back to.
# Any other end (handed back at a timeout, a lost lease, out of time for a
# retry's pause) leaves the group pending: the worker revisits it before it stops.
NOTHING_TO_REVISIT = DONE_OR_FAILED | {GroupOutcome.ALREADY_FINISHED, GroupOutcome.NOT_ENOUGH_TIME}


class Worker:
    """Drain the queue until it is empty, the time budget is spent, or a stop is requested.

    The processor runs through ``runner`` (a processor host on the command
    line and on Lambda); given only ``processor``, it runs in this thread.
    """

    def __init__(
        self,
        backend: Backend,
        processor: Processor | None,
        settings: WorkerSettings,
        *,
        runner: Runner | None = None,
        worker_id: str | None = None,
        position: float | None = None,
        remaining_time: Callable[[], float] | None = None,
        observer: WorkerObserver | None = None,
        stop: GracefulStop | None = None,
        require_index: bool = False,
        processor_name: str | None = None,
    ):
        if (runner is None) == (processor is None):
            raise TypeError("give a processor or a runner, not both")
        self.backend = backend
        self.settings = settings
        self.runner: Runner = runner or InProcessRunner(cast(Processor, processor), backend)
        self.worker_id = worker_id or f"w-{uuid.uuid4().hex[:8]}"
        self.position = start_position(self.worker_id) if position is None else position % 1.0
        self.rng = random.Random(self.worker_id)
        started = clock.now()
        self.budget = Budget(settings, remaining_time or (lambda: settings.time_limit - (clock.now() - started)))
        self.observer = observer or WorkerObserver()
        self.stop = stop
        # A worker someone started by hand on a workspace with no index has a
        # mistyped URI, not an empty queue; a Lambda worker is started by a
        # populate and finds an empty queue normal.
        self.require_index = require_index
        # ``processor_name`` (the spec the runner's host loads) goes into each done flag: see flags.write_done.
        self.protocol = ClaimProtocol(
            backend,
            worker_id=self.worker_id,
            lease_seconds=settings.effective_lease,
            foreign_lock_timeout=settings.foreign_lock_timeout,
            processor=processor_name,
        )
        self.index = WorkIndex(backend)
        self.report = WorkerReport(worker_id=self.worker_id)
        self._breaker = Breaker(settings.breaker_groups)
        self._timing = ClaimTiming()
        self._ahead_pool: ThreadPoolExecutor | None = None
        self.finisher = Finisher(self.protocol, settings, self.budget, self.report)
        self.claimer, self.group_runner = self._claimer_and_runner(backend)

    def _claimer_and_runner(self, backend: Backend) -> tuple[Claimer, GroupRunner]:
        """The two halves of a group's way through the worker: its claim, and its runs."""
        claimer = Claimer(
            protocol=self.protocol,
            runner=self.runner,
            settings=self.settings,
            budget=self.budget,
            finisher=self.finisher,
            observer=self.observer,
            report=self.report,
            segments=SegmentLoader(backend, self.index, self.report),
            rng=self.rng,
            stopping=self._stopping,
        )
        group_runner = GroupRunner(
            protocol=self.protocol,
            runner=self.runner,
            settings=self.settings,
            budget=self.budget,
            finisher=self.finisher,
            observer=self.observer,
            report=self.report,
            breaker=self._breaker,
            timing=self._timing,
            stop=self.stop,
            sleep=self._sleep,
        )
        return claimer, group_runner

    def has_time(self, reserve: float = 0.0) -> bool:
        return self.budget.has_time(reserve)

    def _halted(self) -> StopReason | None:
        """Why a run told this worker to claim nothing more -- the breaker tripped, or a service is down -- or None."""
        if self._breaker.tripped:
            return StopReason.PROCESSOR_FAILING
        return self.group_runner.halted

    def _stopping(self, reserve: float = 0.0, *, record: bool = True) -> bool:
        """Whether to claim nothing more; ``record``, the reason goes in the report (not for a claim ahead, which only defers)."""
        if self._halted() is not None:
            return True
        if self._stop_requested():
            if record:
                self.report.stopped_reason = StopReason.INTERRUPTED
            return True
        if not self.budget.has_time(reserve):
            if record:
                self.report.stopped_reason = StopReason.TIME_LIMIT
            return True
        return False

    def _stop_requested(self) -> bool:
        return self.stop is not None and self.stop.requested

    def _sleep(self, seconds: float) -> None:
        """Sleep, waking early if a stop is requested."""
        if self.stop is None:
            time.sleep(seconds)
        else:
            select.select(self.stop.fds, [], [], seconds)

    # --- the loop -------------------------------------------------------------------------------------------

    def run(self) -> WorkerReport:
        if not self.runner.prepare():
            self.report.stopped_reason = StopReason.INTERRUPTED
            return self.report
        # Before the first claim: a store whose conditions do not hold refuses here.
        self.protocol.conditional_delete = probe_store(self.backend)
        refs = self.index.segment_refs()
        if not refs and self.require_index:
            raise NoIndex(self.backend.uri)
        walk = Walk(refs, total_groups=sum(r.groups or 0 for r in refs), spot=self.position * len(refs))
        try:
            self._walk(walk)
        except BaseException:
            # The last group that returned may have its done flag still on its way (it goes out beside the next
            # run): finished on the way out, as if the walk had ended, while the error that ended it goes on up.
            try:
                self.finisher.finish_deferred()
            except Exception as exc:  # noqa: BLE001 -- said here; the walk's own error is the one raised
                log.warning("the last done flag could not be written (%s): its group will run again", exc)
            raise
        else:
            self.finisher.finish_deferred()
        finally:
            self.finisher.close()
            if self._ahead_pool is not None:
                self._ahead_pool.shutdown()
                self._ahead_pool = None
        if not self._stop_requested() and self.report.stopped_reason != StopReason.TIME_LIMIT and self._halted() is None:
            self._drain_waiting(walk)
        halted = self._halted()
        if self._stop_requested():
            self.report.stopped_reason = StopReason.INTERRUPTED
        elif halted is not None:
            # Whatever ended the walk after it (the last group of the drain phase, say).
            self.report.stopped_reason = halted
        return self.report

    def _walk(self, walk: Walk) -> None:
        """Claim and run group after group along the walk, each next one claimed ahead while the last runs."""
        claimed = self.claimer.next(walk)
        while claimed is not None:
            group, claim = claimed
            outcome, claimed_ahead = self._attempt(group, claim, walk=walk)
            if outcome == GroupOutcome.NOT_ENOUGH_TIME:
                walk.short[group.hash] = group
            elif outcome not in NOTHING_TO_REVISIT:
                # Handed back unfinished (a timeout, a lost lease, no time for
                # a retry's pause) or taken from us: this worker comes back to
                # it once its walk is over, if nobody has finished it by then
                # and it still has the time (see _drain_waiting).
                walk.waiting[group.hash] = group
            if claimed_ahead is not None and (outcome not in DONE_OR_FAILED or self._halted() is not None):
                # The group in front did not finish (handed back, lost, stopped), or a run halted the worker
                # (the breaker, a service down): the claim made behind it is given back unrun, and walked to again.
                self.claimer.give_back_ahead(claimed_ahead)
                walk.upcoming.appendleft(claimed_ahead[0])
                claimed_ahead = None
            claimed = claimed_ahead if claimed_ahead is not None else self.claimer.next(walk)

    def _drain_waiting(self, walk: Walk) -> None:
        """Come back to the groups the walk left pending: held by others, or handed back by this worker unfinished.

        Others' groups may finish, be released or go stale; this worker's own
        (a timeout, a lost lease, a retry's pause) are claimed again under the
        same rules as any claim -- enough time (``enough_time``), the attempts
        left, the retry's pause. Sleep until the soonest lock goes stale by the
        store's clock or the soonest pause ends (or a backoff poll, to notice
        holders that finish), never in a busy loop. Stop early when nothing
        left can be started before our deadline: waiting would only burn the
        invocation's time, and the next Map round picks up whatever is left.
        The stop reason says what is left; ``queue_empty`` only when nothing
        is that this worker could take.
        """
        waiting = walk.waiting
        pause = 0.2
        while waiting:
            soonest = min(self._revisit_at(h) for h in waiting) - clock.now()
            if self.budget.left() - max(0.0, soonest) < max(self.budget.longest_group_seconds, MIN_RUN_SECONDS):
                # Some of what is left is held by live workers, or all of it is ours to retry and there is no time.
                held = any(h in self.claimer.stale_at for h in waiting)
                self.report.stopped_reason = StopReason.LOCKED_BY_OTHERS if held else StopReason.TIME_LIMIT
                return
            self._sleep(max(0.0, min(pause, soonest)))
            # Back off, but not past a group's length: the held groups are
            # most often simply finished by their holders, and the last of
            # them decides when this round of the fleet ends.
            # (A worker that has run nothing yet knows no length: up to 5 s.)
            pause = min(pause * 2, max(0.2, min(5.0, self.budget.longest_group_seconds or 5.0)))
            if not self._revisit(walk):
                return
        self.report.stopped_reason = StopReason.NOT_ENOUGH_TIME if self._still_pending(walk.short) else StopReason.QUEUE_EMPTY

    def _revisit(self, walk: Walk) -> bool:
        """Try each waiting group whose pause is over once more; False if the worker is to stop."""
        waiting = walk.waiting
        for hash_, group in list(waiting.items()):
            if self._stopping():
                return False
            if self.group_runner.retry_at.get(hash_, 0.0) > clock.now():
                continue  # its retry's pause is not over
            # A HEAD is cheaper than a lock round trip, and most held
            # groups are simply finished by their holder.
            if self.protocol.is_done(hash_):
                del waiting[hash_]
                continue
            outcome = self._work_on(group, checked_failed=False)
            # Held, or handed back again (stopped at its group timeout with
            # attempts left, a lease lost again): once more, after the
            # others. A timed-out run that had this worker's full run
            # budget counts, so the group ends failed rather than looping;
            # one that had less leaves too little for the next
            # (not_enough_time), and the group is left to a worker with more.
            if outcome == GroupOutcome.NOT_ENOUGH_TIME:
                walk.short[hash_] = group
            if outcome in NOTHING_TO_REVISIT:  # (a Held is none of them)
                del waiting[hash_]
        return True

    def _revisit_at(self, hash_: str) -> float:
        """The soonest moment a claim of a waiting group can succeed: its lock stale, its retry's pause over."""
        return max(self.claimer.stale_at.get(hash_, 0.0), self.group_runner.retry_at.get(hash_, 0.0))

    def _still_pending(self, groups: dict[str, Group]) -> bool:
        """Whether any of ``groups`` (left for want of time) is still neither done nor failed."""
        return any(not self.protocol.is_done(h) and not self.protocol.is_failed(h) for h in groups)

    def _work_on(self, group: Group, *, checked_failed: bool) -> GroupOutcome | Held:
        """Claim one group and run it, then and there (the drain phase: no claim ahead)."""
        claimed = self.claimer.claim(group, checked_failed=checked_failed)
        if isinstance(claimed, Claim):
            return self._attempt(group, claimed)[0]
        return claimed

    def _run_group(self, group: Group, claim: Claim, ahead: ClaimAhead | None) -> GroupOutcome:
        return self.group_runner.run(group, claim, ahead, claimed_with=self.claimer.claimed_with.pop(claim.owner, None))

    def _attempt(self, group: Group, claim: Claim, *, walk: Walk | None = None) -> tuple[GroupOutcome, tuple[Group, Claim] | None]:
        """Run one group to its end, retrying it here while attempts and time allow; how it ended.

        On the main ``walk`` the worker pipelines: while the processor runs,
        helper threads write the previous group's done flag and release its
        lock -- sent as that group's run returned, and finished before this
        run's group is recorded -- and claim the next group ahead of time,
        which is returned beside the outcome. Every step is the one the
        sequential worker takes, in the same order for each group; only the
        waiting on the store overlaps the processing. At most one claim is
        made ahead, and it is renewed while it waits. It names the group it
        was made behind, so that if this worker dies before that group
        finished, the claim made ahead -- which never ran -- costs its group
        no attempt; and it runs only once the group in front has returned (its done flag on its way) or failed.
        """
        if walk is None:
            return self._run_group(group, claim, None), None
        if self._ahead_pool is None:
            self._ahead_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="s3wq-ahead")
        ahead = ClaimAhead(
            self._ahead_pool,
            finish=self.finisher.take_deferred(),
            prefetch=functools.partial(self.claimer.claim_ahead, walk, claim),
            claim_after=self._timing.due_after(),
            keep=functools.partial(self.claimer.keep_ahead, walk),
        )
        try:
            outcome = self._run_group(group, claim, ahead)
        except BaseException:
            self.claimer.give_back_ahead(ahead.result(quiet=True))
            raise
        try:
            claimed = ahead.result()
        except BaseException:
            # The release of the last group failed (a storage error) or the
            # wait was interrupted: the claim made ahead goes back unrun.
            self.claimer.give_back_ahead(ahead.result(quiet=True))
            raise
        if ahead.claim_seconds is not None:
            self._timing.claim_seconds.append(ahead.claim_seconds)
        if ahead.overlapped:
            with self.report.tally() as report:
                report.overlapped_seconds = round(report.overlapped_seconds + round(ahead.seconds, 3), 3)
        if claimed is not None and self._stop_requested():
            self.claimer.give_back_ahead(claimed)
            claimed = None
        return outcome, claimed
