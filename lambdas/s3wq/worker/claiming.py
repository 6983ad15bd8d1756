"""Claiming along the walk: the next group this worker can take, its lock, and a claim made ahead kept fresh.

A claim is a lock taken and a done flag checked; what the claim finds
steers the walk: a group held by a peer waits for the drain, and a peer
run into (its group held or finished) makes the walk jump into the largest
stretch nobody has finished (``walk.jump_into_largest_gap``).
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Callable

from s3wq.config import WorkerSettings
from s3wq.host.runners import Runner
from s3wq.model import Group, GroupOutcome, RunStop
from s3wq.protocol import clock
from s3wq.protocol.claims import Claim, ClaimProtocol, Finished, Held, NotEnoughTime
from s3wq.protocol.lease import LeaseKeeper
from s3wq.worker.budget import Budget
from s3wq.worker.finish import Finisher
from s3wq.worker.report import WorkerObserver, WorkerReport
from s3wq.worker.walk import SegmentLoader, SegmentView, Walk, jump_into_largest_gap


class Claimer:
    """Makes a worker's claims: along its walk, ahead of a run, and of single groups (the drain)."""

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
        segments: SegmentLoader,
        rng: random.Random,
        stopping: Callable[..., bool],
    ):
        self.protocol = protocol
        # Only to have the processor host up before a claim (see claim).
        self.runner = runner
        self.settings = settings
        self.budget = budget
        self.finisher = finisher
        self.observer = observer
        self.report = report
        self.segments = segments
        self.rng = rng
        # Whether to claim nothing more (Worker._stopping): given the time to keep, and whether to record why.
        self.stopping = stopping
        # The run budget each claim of the main walk or the drain was made with, by owner token (see GroupRunner.run).
        self.claimed_with: dict[str, float] = {}
        # When the locks of groups found held go stale, by group; only for groups last found held by others.
        self.stale_at: dict[str, float] = {}

    def claim_ahead(self, walk: Walk, running: Claim) -> tuple[Group, Claim] | None:
        """The next claim, made while ``running`` runs: only if there is time for both, and marked as made behind it."""
        return self.next(walk, reserve=self.budget.longest_group_seconds, behind=running)

    def next(self, walk: Walk, reserve: float | None = None, behind: Claim | None = None) -> tuple[Group, Claim] | None:
        """Walk on to the next group this worker can claim, and claim it; None once the walk is over.

        ``reserve``, for a claim made ahead while a group runs, is the time
        this worker still owes that group: a claim is made only if there is
        time for both.
        """
        ahead_of_a_run = reserve is not None
        reserve = reserve or 0.0
        while True:
            if walk.view is None or not walk.upcoming:
                if walk.next_segment >= len(walk.refs) or self.stopping(reserve, record=not ahead_of_a_run):
                    return None
                self._enter_next_segment(walk)
                continue
            view, upcoming = walk.view, walk.upcoming
            if upcoming[0].hash in view.finished:
                upcoming.popleft()
                continue
            # Checked before the group leaves the walk: a claim ahead that
            # stops here leaves it for the main walk.
            if self.stopping(reserve, record=not ahead_of_a_run):
                return None
            group = upcoming.popleft()
            outcome = self.claim(group, checked_failed=view.listed, reserve=reserve, host_in_use=ahead_of_a_run, behind=behind)
            if isinstance(outcome, Claim):
                return group, outcome
            if ahead_of_a_run and outcome == GroupOutcome.NOT_ENOUGH_TIME:
                # Too little time with the run in front subtracted, not with
                # this worker's whole time: the main walk tries it again.
                upcoming.appendleft(group)
                return None
            self._steer(walk, view, group, outcome)

    def _enter_next_segment(self, walk: Walk) -> None:
        n = walk.next_segment
        walk.next_segment += 1
        walk.view = self.segments.load(walk.refs[(walk.first + n) % len(walk.refs)], walk.total_groups, previous=walk.view)
        # Only the first segment is entered part-way, at this worker's spot.
        cut = int((walk.spot - walk.first) * len(walk.view.groups)) if n == 0 else 0
        walk.upcoming = deque(walk.view.groups[cut:] + walk.view.groups[:cut])

    def _steer(self, walk: Walk, view: SegmentView, group: Group, outcome: GroupOutcome | Held) -> None:
        """Walk on after a claim that did not take ``group``: note what is left of it, and jump if a peer is here."""
        if isinstance(outcome, Held):
            walk.waiting[group.hash] = group
        elif outcome == GroupOutcome.NOT_ENOUGH_TIME:
            walk.short[group.hash] = group
        elif outcome == GroupOutcome.ALREADY_FINISHED and view.listed:
            # Our listing is out of date: peers have been finishing
            # groups here. One LIST now saves a lock round trip for
            # each of them.
            self.segments.list_finished(view)
        if outcome == GroupOutcome.ALREADY_FINISHED or isinstance(outcome, Held):
            # We ran into a peer. Walking on would trail right behind
            # it, colliding at every step: jump into the largest
            # stretch left that nobody has finished, near its middle.
            jump_into_largest_gap(walk.upcoming, view.finished, self.rng)

    def claim(
        self, group: Group, *, checked_failed: bool, reserve: float = 0.0, host_in_use: bool = False, behind: Claim | None = None
    ) -> Claim | GroupOutcome | Held:
        """Take the group's lock and check it is not done; a Claim, or why not."""
        # The processor host is ready before the claim: starting it (loading
        # a model, say) must not come out of the group's lease. (A claim made
        # ahead is made while the host runs a group: it is up.)
        if not host_in_use and not self.runner.prepare():
            return GroupOutcome.INTERRUPTED
        available = self.budget.left() - reserve
        # The first claim: what this worker has now is the most it will
        # ever give a run (time only shrinks), so this claim is "full",
        # however long the start-up before it took.
        self.budget.first_claim(available)
        run_budget = self.settings.run_budget(available)
        claimed = self.protocol.claim(group.hash, budget=run_budget, full_budget=self.budget.full_run, behind=behind)
        if not isinstance(claimed, Held):
            self.stale_at.pop(group.hash, None)
        if isinstance(claimed, Finished):
            self.report.count(GroupOutcome.ALREADY_FINISHED)
            return GroupOutcome.ALREADY_FINISHED
        if isinstance(claimed, Held):
            with self.report.tally() as report:
                report.conflicts += 1
            self.stale_at[group.hash] = clock.now() + claimed.stale_in
            self.observer.conflict(group.hash)
            return claimed
        if isinstance(claimed, NotEnoughTime):
            # This worker's time only shrinks, so it will never have enough
            # for this group: leave it to a worker that has (not a drop of a
            # claimable group -- nobody can take it from here).
            self.report.count(GroupOutcome.NOT_ENOUGH_TIME)
            return GroupOutcome.NOT_ENOUGH_TIME
        if claimed.reclaimed:
            with self.report.tally() as report:
                report.reclaimed += 1
        # A failed group keeps a lock marked failed, so a free lock means "not
        # failed" unless that lock was removed (expired, or an operator's
        # cleanup); only then does the failed flag need its own check.
        if self.protocol.is_done(group.hash) or (not checked_failed and self.protocol.is_failed(group.hash)):
            self.report.count(GroupOutcome.ALREADY_FINISHED)
            self.finisher.release(claimed)
            return GroupOutcome.ALREADY_FINISHED
        if behind is None:
            # What the run is judged by, once it starts (see GroupRunner.run).
            self.claimed_with[claimed.owner] = run_budget
        return claimed

    def keep_ahead(self, walk: Walk, claimed: tuple[Group, Claim], run_over: threading.Event) -> tuple[Group, Claim] | None:
        """Keep the lease of a claim made ahead until the run in front is over, as a run's keeper does; None if it was taken.

        A claim ahead may wait a whole run (the first is made at once).
        Unwritten, its lock would look stale to an olmocr worker after the
        foreign timeout, however long our lease; and olmocr checks a lock's
        age, then PUTs without a condition: a check made before the renewal
        that precedes our run and a PUT landing after it would let both run.
        Renewed as a running claim is, while the worker's time may outlast
        what its last write covers, it never looks stale to anyone. A renewal
        that fails for good is left to the check before the run (GroupRunner._keeper_for_run).
        """
        group, claim = claimed
        # No run of this worker goes past its budget: a lease covering that is never renewed (a Lambda worker's).
        keeper = LeaseKeeper(self.protocol, claim, stop_at=clock.now() + self.budget.left())
        verdict = None
        while verdict is None and not run_over.wait(max(0.0, min(keeper.next_wakeup() - clock.now(), keeper.wait_slice))):
            verdict = keeper.tick()
        keeper.settle()
        with self.report.tally() as report:
            report.renewals += keeper.renewals
        if keeper.state.lost and verdict != RunStop.EXPIRED:
            # A renewal found the lock changed (an expired lease is not that:
            # the check before the run tries once more). Taken, by an olmocr
            # worker say: no attempt of ours ran, and the group is its
            # taker's. Come back to it after the walk, as to any group found held.
            with self.report.tally() as report:
                report.lost_locks += 1
            walk.waiting[group.hash] = group
            return None
        return group, keeper.claim

    def give_back_ahead(self, claimed: tuple[Group, Claim] | None) -> None:
        if claimed is not None:
            self.finisher.give_back_unrun(claimed[1], "claimed ahead, never run")
