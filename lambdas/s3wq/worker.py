"""The worker loop: walk the index, claim groups, run the processor under a lease, record the outcome.

Workers spread out instead of all starting at the top: worker ``i`` of ``n``
starts ``i/n`` of the way through the index (a worker that does not know its
index picks a place from its id) and walks on from there, wrapping around;
after running into a peer it jumps to a random place. Each then mostly finds
groups nobody else has touched.

How a run ends, and what it costs the group:

* the processor returns: done flag, lock deleted;
* it raises (or its host dies): one attempt used; retried here while time
  allows, else handed back with its count; failed after the last attempt;
* it is stopped at the worker's deadline: handed back with how long it ran,
  so that only a worker with enough time takes it next; the run counts as an
  attempt only if it had the worker's full time (see ``claims.enough_time``);
* it is stopped by SIGINT or SIGTERM: handed back, no attempt used;
* the lock was lost or the lease could not be renewed: stopped, nothing written.
"""

from __future__ import annotations

import hashlib
import logging
import random
import select
import time
import uuid
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Callable

from . import clock, layout
from .backends import Backend
from .bodies import ERROR, INTERRUPTED, LOST, TIMEOUT
from .claims import MIN_RUN_SECONDS, Claim, ClaimProtocol, Finished, Held, NotEnoughTime, timeout_counts
from .config import WorkerSettings
from .index import Group, SegmentRef, WorkIndex
from .lease import EXPIRED, LeaseKeeper
from .processors import Processor
from .runners import InProcessRunner, Runner, Stopped
from .sandbox import Raised, Returned
from .stopping import GracefulStop

log = logging.getLogger("s3wq")

# A segment's done flags are listed (instead of checked one by one) when the
# listing is expected to cost at most one request per this many groups.
_LISTING_GROUPS_PER_PAGE = 50
_LIST_PAGE = 1000


@dataclass
class WorkerReport:
    worker_id: str
    processed: int = 0
    failed: int = 0
    conflicts: int = 0
    reclaimed: int = 0
    already_finished: int = 0
    retried: int = 0
    timed_out: int = 0
    interrupted: int = 0
    not_enough_time: int = 0
    lost_locks: int = 0
    renewals: int = 0
    listings: int = 0
    stopped_reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class WorkerObserver:
    """Hooks for logging and metrics (the Lambda handler plugs Powertools in); all no-ops here."""

    def group_started(self, group: Group, claim: Claim) -> None: ...

    def group_finished(self, group: Group, claim: Claim, outcome: str, seconds: float) -> None: ...

    def conflict(self, hash_: str) -> None: ...


def start_position(worker_id: str) -> float:
    """A stable, uniformly spread place in [0, 1) for a worker that does not know its index."""
    digest = hashlib.sha1(worker_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass
class _SegmentView:
    """A loaded segment and what this worker knows of its finished groups."""

    ref: SegmentRef
    groups: list[Group]
    listed: bool
    finished: set[str] = field(default_factory=set)


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
    ):
        if (runner is None) == (processor is None):
            raise TypeError("give a processor or a runner, not both")
        self.backend = backend
        self.settings = settings
        self.runner: Runner = runner or InProcessRunner(processor, backend)
        self.worker_id = worker_id or f"w-{uuid.uuid4().hex[:8]}"
        self.position = start_position(self.worker_id) if position is None else position % 1.0
        self.rng = random.Random(self.worker_id)
        started = clock.now()
        self.remaining_time = remaining_time or (lambda: settings.time_limit - (clock.now() - started))
        self.observer = observer or WorkerObserver()
        self.stop = stop
        self.protocol = ClaimProtocol(
            backend, worker_id=self.worker_id, lease_seconds=settings.effective_lease, foreign_lock_timeout=settings.foreign_lock_timeout
        )
        self.index = WorkIndex(backend)
        self.report = WorkerReport(worker_id=self.worker_id)
        self.longest_group_seconds = 0.0
        # The most this worker can give one run: what it has left once ready
        # to claim (set in run). Its start-up -- the processor host, the index
        # -- is not time a group could have had.
        self.full_budget = self._budget()
        self._stale_at: dict[str, float] = {}

    # --- time ---------------------------------------------------------------------------------------------

    def _budget(self) -> float:
        """How long a run started now may take: up to the deadline less the safety margin."""
        return self.remaining_time() - self.settings.effective_safety_margin

    def has_time(self) -> bool:
        return self._budget() >= max(self.longest_group_seconds, MIN_RUN_SECONDS)

    def _stopping(self) -> bool:
        if self.stop is not None and self.stop.requested:
            self.report.stopped_reason = "interrupted"
            return True
        if not self.has_time():
            self.report.stopped_reason = "time_limit"
            return True
        return False

    def _sleep(self, seconds: float) -> None:
        """Sleep, waking early if a stop is requested."""
        if self.stop is None:
            time.sleep(seconds)
        else:
            select.select(self.stop.fds, [], [], seconds)

    # --- the loop -------------------------------------------------------------------------------------------

    def run(self) -> WorkerReport:
        if not self.runner.prepare():
            self.report.stopped_reason = "interrupted"
            return self.report
        refs = self.index.segment_refs()
        self.full_budget = self._budget()
        total_groups = sum(r.groups or 0 for r in refs)
        spot = self.position * len(refs)
        first = int(spot)
        waiting: dict[str, Group] = {}
        for n in range(len(refs)):
            if self._stopping():
                return self.report
            view = self._load(refs[(first + n) % len(refs)], total_groups)
            # Only the first segment is entered part-way, at this worker's spot.
            cut = int((spot - first) * len(view.groups)) if n == 0 else 0
            ahead = deque(view.groups[cut:] + view.groups[:cut])
            while ahead:
                group = ahead.popleft()
                if group.hash in view.finished:
                    continue
                if self._stopping():
                    return self.report
                outcome = self._work_on(group, checked_failed=view.listed)
                if isinstance(outcome, Held):
                    waiting[group.hash] = group
                elif outcome == "already_finished" and view.listed:
                    # Our listing is out of date: peers have been finishing
                    # groups here. One LIST now saves a lock round trip for
                    # each of them.
                    self._list_finished(view)
                if outcome == "already_finished" or isinstance(outcome, Held):
                    # We ran into a peer. Walking on would trail right behind
                    # it, colliding at every step; jump somewhere random.
                    ahead.rotate(-self.rng.randrange(len(ahead) or 1))
        self._drain_waiting(waiting)
        if self.stop is not None and self.stop.requested:
            self.report.stopped_reason = "interrupted"
        return self.report

    def _load(self, ref: SegmentRef, total_groups: int) -> _SegmentView:
        groups = self.index.load(ref.key)
        # List a prefix's flags only when that costs at most one request per
        # _LISTING_GROUPS_PER_PAGE groups; a small segment of a big workspace
        # (a short prefix) is checked group by group instead.
        listed = ref.groups is None or (total_groups / 16 ** len(ref.prefix)) / _LIST_PAGE <= max(1.0, ref.groups / _LISTING_GROUPS_PER_PAGE)
        view = _SegmentView(ref, groups, listed)
        if listed:
            self._list_finished(view)
        return view

    def _list_finished(self, view: _SegmentView) -> None:
        self.report.listings += 1
        view.finished = self._listed_hashes(layout.DONE_PREFIX, view.ref.prefix, layout.DONE_SUFFIX)
        view.finished |= self._listed_hashes(layout.FAILED_PREFIX, view.ref.prefix, layout.FAILED_SUFFIX)

    def _listed_hashes(self, prefix: str, hash_prefix: str, suffix: str) -> set[str]:
        found = set()
        for key in self.backend.list_keys(prefix + hash_prefix):
            hash_ = layout.hash_from_key(key, prefix, suffix)
            if hash_ is not None:
                found.add(hash_)
        return found

    def _drain_waiting(self, waiting: dict[str, Group]) -> None:
        """Come back to groups others held: they may finish, release or go stale.

        Sleep until the soonest lock goes stale by the store's clock (or a
        backoff poll, to notice holders that finish), never in a busy loop.
        Stop early when every remaining lock will still be live at our
        deadline: waiting for it would only burn the invocation's time, and
        the next Map round picks up whatever its holder leaves behind.
        """
        pause = 0.2
        while waiting:
            soonest = min(self._stale_at.get(h, 0.0) for h in waiting) - clock.now()
            if self._budget() - max(0.0, soonest) < max(self.longest_group_seconds, MIN_RUN_SECONDS):
                self.report.stopped_reason = "locked_by_others"
                return
            self._sleep(max(0.0, min(pause, soonest)))
            pause = min(pause * 2, 5.0)
            for hash_, group in list(waiting.items()):
                if self._stopping():
                    return
                # A HEAD is cheaper than a lock round trip, and most held
                # groups are simply finished by their holder.
                if self.protocol.is_done(hash_):
                    del waiting[hash_]
                    continue
                if not isinstance(self._work_on(group, checked_failed=False), Held):
                    del waiting[hash_]
        self.report.stopped_reason = "queue_empty"

    def _work_on(self, group: Group, *, checked_failed: bool) -> str | Held:
        # The processor host is ready before the claim: starting it (loading
        # a model, say) must not come out of the group's lease.
        if not self.runner.prepare():
            return "interrupted"
        claimed = self.protocol.claim(group.hash, budget=self._budget(), full_budget=self.full_budget)
        if isinstance(claimed, Finished):
            self.report.already_finished += 1
            return "already_finished"
        if isinstance(claimed, Held):
            self.report.conflicts += 1
            self._stale_at[group.hash] = clock.now() + claimed.stale_in
            self.observer.conflict(group.hash)
            return claimed
        if isinstance(claimed, NotEnoughTime):
            # This worker's time only shrinks, so it will never have enough
            # for this group: leave it to a worker that has (not a drop of a
            # claimable group -- nobody can take it from here).
            self.report.not_enough_time += 1
            return "not_enough_time"
        if claimed.reclaimed:
            self.report.reclaimed += 1
        # A failed group keeps a lock marked failed, so a free lock means "not
        # failed" unless that lock was removed (expired, or an operator's
        # cleanup); only then does the failed flag need its own check.
        if self.protocol.is_done(group.hash) or (not checked_failed and self.protocol.is_failed(group.hash)):
            self.report.already_finished += 1
            self._release(claimed)
            return "already_finished"
        return self._attempt(group, claimed)

    def _release(self, claim: Claim) -> None:
        if not self.protocol.release(claim):
            self.report.lost_locks += 1
            log.warning("lock on %s was taken over before release", claim.hash)

    def _hand_back(self, claim: Claim, outcome: str, *, counted: bool, error: str | None = None, needs_seconds: float | None = None) -> None:
        if not self.protocol.hand_back(claim, outcome, counted=counted, error=error, needs_seconds=needs_seconds):
            self.report.lost_locks += 1

    def _fail(self, group: Group, claim: Claim, error: str, started: float, *, outcome: str = ERROR, attempts: int | None = None) -> str:
        if not self.protocol.finalize_failed(claim, group, error, outcome=outcome, attempts=attempts):
            self.report.lost_locks += 1
        self.report.failed += 1
        self.observer.group_finished(group, claim, "failed", clock.now() - started)
        return "failed"

    def _attempt(self, group: Group, claim: Claim) -> str:
        started = clock.now()
        while True:
            if claim.attempt > self.settings.max_attempts:
                # Taken over from a holder that vanished on the last allowed attempt.
                error = "worker lost (killed, or its lease ran out) on every attempt"
                return self._fail(group, claim, error, started, outcome=LOST, attempts=claim.attempt - 1)
            if self._budget() < MIN_RUN_SECONDS:
                # Claiming took what time we had (a foreign takeover pauses): give it back unrun.
                self._hand_back(claim, TIMEOUT, counted=False, error="claimed with no time left to run it")
                return "released"
            self.observer.group_started(group, claim)
            # Durations in awake time (time.monotonic stops while the machine
            # sleeps): a laptop that slept through a run did not need longer.
            run_started = time.monotonic()
            stop_at = clock.now() + self._budget()
            keeper = LeaseKeeper(self.protocol, claim, stop_at=stop_at)
            if not keeper.state.held():
                # Claimed too long ago (a pause since): a taker may be starting.
                return self._stopped(group, claim, Stopped(EXPIRED), 0.0, started)
            try:
                end = self.runner.run(group, keeper, deadline_epoch=clock.epoch_at(stop_at))
            except BaseException:
                # KeyboardInterrupt or SystemExit in an embedding program: the
                # processor has stopped (the runner saw to it); give the group back.
                keeper.settle()
                self._hand_back(keeper.claim, INTERRUPTED, counted=False, error="interrupted")
                raise
            keeper.settle()
            claim = keeper.claim
            self.report.renewals += keeper.renewals
            ran = time.monotonic() - run_started
            if not keeper.state.held() and not (isinstance(end, Stopped) and end.reason in (LOST, EXPIRED)):
                # The lock was taken (a renewal in flight said so), or the run
                # ended just as the lease did: a taker may be starting, and a
                # flag written now could land after its writes.
                end = Stopped(LOST if keeper.state.lost else EXPIRED)
            if isinstance(end, Returned):
                self.longest_group_seconds = max(self.longest_group_seconds, ran)
                if self.protocol.mark_done(claim):
                    self.report.processed += 1
                else:
                    self.report.already_finished += 1
                self._release(claim)
                self.observer.group_finished(group, claim, "done", clock.now() - started)
                return "done"
            if isinstance(end, Stopped):
                return self._stopped(group, claim, end, ran, started)
            assert isinstance(end, Raised)
            self.longest_group_seconds = max(self.longest_group_seconds, ran)
            log.warning("group %s attempt %d failed: %s", group.hash, claim.attempt, end.error)
            if claim.attempt >= self.settings.max_attempts:
                return self._fail(group, claim, end.error, started)
            self.report.retried += 1
            if not self.has_time():
                # Out of time: hand the group back with its count so that
                # another worker can retry it without waiting for staleness.
                self._hand_back(claim, ERROR, counted=True, error=end.error)
                self.observer.group_finished(group, claim, "released", clock.now() - started)
                return "released"
            next_claim = self.protocol.next_attempt(claim, end.error, budget=self._budget())
            if next_claim is None:
                self.report.lost_locks += 1
                return "released"
            claim = next_claim

    def _stopped(self, group: Group, claim: Claim, end: Stopped, ran: float, started: float) -> str:
        if end.reason == INTERRUPTED:
            self.report.interrupted += 1
            self._hand_back(claim, INTERRUPTED, counted=False, error="stopped by a signal")
            self.observer.group_finished(group, claim, "interrupted", clock.now() - started)
            return "interrupted"
        if end.reason == TIMEOUT:
            self.report.timed_out += 1
            counted = timeout_counts(claim.body.budget_seconds, self.full_budget)
            needs = max(ran, claim.body.needs_seconds or 0.0, MIN_RUN_SECONDS)
            error = f"ran out of time: stopped after {ran:.1f} s (this worker could give it {self.full_budget:.1f} s at most)"
            log.warning("group %s: %s", group.hash, error)
            if counted and claim.attempt >= self.settings.max_attempts:
                return self._fail(group, claim, error, started, outcome=TIMEOUT)
            self._hand_back(claim, TIMEOUT, counted=counted, error=error, needs_seconds=needs)
            self.observer.group_finished(group, claim, "timed_out", clock.now() - started)
            return "timed_out"
        # The lock was taken from us, or the store could not be reached for a
        # whole lease: the processor is stopped, and whatever we wrote now
        # could land after a new holder's writes. Only an expired lease that
        # nobody took yet is worth giving back.
        self.report.lost_locks += 1
        log.warning("group %s: lease %s; processor stopped", group.hash, end.reason)
        if end.reason == EXPIRED:
            # A store still out of reach raises StorageError here, and the
            # worker stops; its lock then goes stale by itself.
            self.protocol.hand_back(claim, INTERRUPTED, counted=False, error="the lease could not be renewed")
        self.observer.group_finished(group, claim, "lost", clock.now() - started)
        return "lost"
