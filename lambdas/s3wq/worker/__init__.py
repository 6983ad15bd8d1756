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
* it is stopped at the worker's deadline, or at its group timeout: handed
  back with how long it ran, so that only a worker with enough time takes it
  next; the run counts as an attempt only if it had (nearly) the worker's
  full run budget -- its time at its first claim, cut to the group timeout
  (see ``claims.enough_time``); a worker's first claim always has it;
* it is stopped by SIGINT or SIGTERM: handed back, no attempt used;
* the lock was lost or the lease could not be renewed: stopped, nothing
  written but the hand-back of a lease that lapsed unclaimed.

Whatever the reason, a group handed back unfinished is not dropped: the
worker comes back to it after its walk, under the same rules as any claim
(enough time, attempts, the retry's pause), and it reports ``queue_empty``
only when nothing is pending that it could take.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import random
import re
import select
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import asdict, dataclass, field

from s3wq.config import MIN_RUN_SECONDS, WorkerSettings
from s3wq.errors import NoIndex
from s3wq.host.runners import UNKILLABLE, InProcessRunner, RunEnd, Runner, Stopped
from s3wq.host.sandbox import Raised, Returned
from s3wq.host.stopping import GracefulStop
from s3wq.index import SegmentRef, WorkIndex
from s3wq.model import Group
from s3wq.processors import Processor
from s3wq.protocol import clock
from s3wq.protocol.bodies import ERROR, INTERRUPTED, LEFTOVER, LOST, MAX_ERROR_CHARS, TIMEOUT
from s3wq.protocol.claims import Claim, ClaimProtocol, Finished, Held, NotEnoughTime, enough_time, probe_store, timeout_counts
from s3wq.protocol.lease import EXPIRED, LeaseKeeper, LeaseState
from s3wq.protocol.tracebacks import ErrorFrame
from s3wq.store import Backend, layout

log = logging.getLogger("s3wq")

# A segment's done flags are listed (instead of checked one by one) when the
# listing is expected to cost at most one request per this many groups.
LISTING_GROUPS_PER_PAGE = 50
# How a run that ends with the group settled for good ends.
_FINISHED = ("done", "failed")
# How a claim or a run ends that leaves nothing for this worker to come back to.
# Any other end (handed back at a timeout, a lost lease, out of time for a
# retry's pause) leaves the group pending: the worker revisits it before it stops.
_SETTLED = (*_FINISHED, "already_finished", "not_enough_time")
_LIST_PAGE = 1000
# Claims ahead are timed from this many recent runs and claims, with this much to spare.
_RECENT = 5
_CLAIM_LEAD_SPARE_SECONDS = 0.05
# A run that returned with nothing to report (Returned is frozen, so one instance serves every call).
_RETURNED_CLEAN = Returned()


@dataclass
class WorkerReport:
    worker_id: str
    processed: int = 0
    # Inputs of the processed groups the processor reported it could not use.
    input_errors: int = 0
    failed: int = 0
    conflicts: int = 0
    reclaimed: int = 0
    already_finished: int = 0
    retried: int = 0
    timed_out: int = 0
    interrupted: int = 0
    # Runs that left threads or processes running behind them, killed since: each a failed attempt (kind leftover).
    leftovers: int = 0
    not_enough_time: int = 0
    lost_locks: int = 0
    renewals: int = 0
    listings: int = 0
    # Seconds of waiting on the store (finishing a group, claiming the next)
    # done while a processor ran, hidden behind it.
    overlapped_seconds: float = 0.0
    stopped_reason: str = ""
    # With stopped_reason "processor_failing": the error every group it ran failed with.
    breaker_error: str | None = None

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


class _Breaker:
    """Trips when the first ``groups`` groups a worker runs all raise the same error.

    Bad inputs fail each their own way (the error names the input); one
    error for every group is the processor itself: a wrong signature, a
    missing model file, an expired credential. Any run that returns, or an
    error that differs, turns the breaker off for the rest of the worker's
    life: from then on a failure is the group's.
    """

    def __init__(self, groups: int):
        self.groups = groups
        self.armed = groups > 0
        self.tripped = False
        self._error: str | None = None
        self._failed: set[str] = set()

    def disarm(self) -> None:
        self.armed = False

    def tripped_by(self, hash_: str, error: str) -> bool:
        if not self.armed:
            return False
        if self._error is None:
            self._error = error
        elif error != self._error:
            self.armed = False
            return False
        self._failed.add(hash_)
        self.tripped = len(self._failed) >= self.groups
        return self.tripped


@dataclass(frozen=True)
class _Failure:
    """A run that returned or raised without finishing its group: the processor raised, or it left work running."""

    kind: str  # ERROR or LEFTOVER
    error: str
    # What the breaker compares: the same text for the same bug.
    bug: str
    traceback: str = ""
    frame: ErrorFrame | None = None


def failure_of(end: Returned | Raised) -> _Failure | None:
    """How a run that returned or raised failed its group; None if it finished it.

    A run that left threads or processes running behind it is never done,
    whether it returned or raised: they were killed (the processor host) or
    waited for (the in-process runner) before the worker heard of the end,
    and the run did not finish what it gave them.
    The error names what was left, and what the run raised, if it did.
    """
    raised = end if isinstance(end, Raised) else None
    if not end.leftovers:
        return None if raised is None else _Failure(ERROR, raised.error, raised.error, raised.traceback, raised.frame)

    def error(left: str) -> str:
        text = f"the run left {left} running behind it"
        return (text if raised is None else f"{text}. It raised {raised.error}")[:MAX_ERROR_CHARS]

    # What was left may carry numbers that differ from run to run of one bug
    # (a thread's "Thread-7", a process id): the breaker compares the rest.
    bug = error(re.sub(r"\d+", "#", end.leftovers))
    if raised is None:
        return _Failure(LEFTOVER, error(end.leftovers), bug)
    return _Failure(LEFTOVER, error(end.leftovers), bug, raised.traceback, raised.frame)


@dataclass
class _SegmentView:
    """A loaded segment and what this worker knows of its finished groups."""

    ref: SegmentRef
    groups: list[Group]
    listed: bool
    finished: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)  # listed once, at load


@dataclass
class _Walk:
    """Where a worker is in its walk over the index."""

    refs: list[SegmentRef]
    total_groups: int
    spot: float  # where in [0, len(refs)) this worker entered
    next_segment: int = 0
    view: _SegmentView | None = None
    ahead: deque = field(default_factory=deque)
    # Groups to come back to after the walk: held by others, or handed back by this worker unfinished.
    waiting: dict[str, Group] = field(default_factory=dict)
    # Groups left because this worker had too little time for them (its time only shrinks).
    short: dict[str, Group] = field(default_factory=dict)

    @property
    def first(self) -> int:
        return int(self.spot)


class _Ahead:
    """What a worker does on helper threads while its processor runs: finish the last group, claim the next.

    The two go side by side, each a couple of round trips to the store, so
    that even a processor that takes no time waits for the longer of them,
    not for both. The threads are the worker's own pool, kept from group to
    group.

    The next claim is made just in time rather than at once: ``claim_after``
    seconds into the run (when the run is expected to be ``lead`` seconds
    from its end), or as soon as the run ends if that comes first. A group
    claimed at the start of a long run would sit locked and idle for all of
    it, while a peer that ran out of work waits for it at the end of the
    queue; claimed a moment before it is needed, it waits a moment.

    Once made, the claim is kept fresh by ``keep`` until the run in front
    ends (see Worker._keep_claim_ahead).
    """

    def __init__(
        self,
        pool: ThreadPoolExecutor,
        *,
        finish: Callable[[], None] | None,
        prefetch: Callable[[], tuple[Group, Claim] | None],
        claim_after: float = 0.0,
        keep: Callable[[tuple[Group, Claim], threading.Event], tuple[Group, Claim] | None] | None = None,
    ):
        self._pool = pool
        self._claim_after = claim_after
        self._keep = keep
        self._run_over = threading.Event()
        self._jobs: list[Callable[[], object]] = [self._when_due(prefetch)] + ([finish] if finish is not None else [])
        self._futures: list[Future] = []
        self._done = False
        self.seconds = 0.0  # the longest job, waiting excluded
        self.claim_seconds: float | None = None  # how long the claim itself took
        self.overlapped = False

    def _when_due(self, prefetch: Callable[[], tuple[Group, Claim] | None]) -> Callable[[], object]:
        def claim_when_due() -> object:
            if self._claim_after > 0:
                self._run_over.wait(self._claim_after)
            began = time.monotonic()
            try:
                claimed = prefetch()
            finally:
                self.claim_seconds = time.monotonic() - began
            return claimed if claimed is None or self._keep is None else self._keep(claimed, self._run_over)

        return claim_when_due

    def _timed(self, job: Callable[[], object]) -> object:
        began = time.monotonic()
        try:
            return job()
        finally:
            spent = time.monotonic() - began
            if job is self._jobs[0] and self.claim_seconds is not None:
                spent = self.claim_seconds
            self.seconds = max(self.seconds, spent)

    def start(self) -> None:
        if not self._futures and not self._done:
            self._futures = [self._pool.submit(self._timed, job) for job in self._jobs]

    def ran(self, seconds: float) -> None:
        """The processor ran this long: the helpers' work was hidden behind it, and the claim is due now."""
        self._run_over.set()
        self.overlapped = bool(self._futures)

    def wait(self) -> None:
        self._run_over.set()
        futures_wait(self._futures)
        self._done = True

    def result(self, *, quiet: bool = False) -> tuple[Group, Claim] | None:
        """The claim made ahead (the work done now, here, if no run ever started it)."""
        self._run_over.set()
        if not self._futures and not self._done:
            outcomes: list = []
            for job in self._jobs:
                try:
                    outcomes.append(self._timed(job))
                except BaseException as exc:  # noqa: BLE001 -- raised below, after the other job ran
                    outcomes.append(exc)
            self._done = True
        else:
            self.wait()
            outcomes = [f.exception() or f.result() for f in self._futures]
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors and not quiet:
            raise errors[0]
        claimed = outcomes[0]
        return None if isinstance(claimed, BaseException) else claimed  # type: ignore[return-value]


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
        # A worker someone started by hand on a workspace with no index has a
        # mistyped URI, not an empty queue; a Lambda worker is started by a
        # populate and finds an empty queue normal.
        self.require_index = require_index
        self.protocol = ClaimProtocol(
            backend, worker_id=self.worker_id, lease_seconds=settings.effective_lease, foreign_lock_timeout=settings.foreign_lock_timeout
        )
        self.index = WorkIndex(backend)
        self.report = WorkerReport(worker_id=self.worker_id)
        self._report_lock = threading.Lock()
        self.longest_group_seconds = 0.0
        # The last few runs and claims, to time each claim made ahead.
        self._recent_run_seconds: deque[float] = deque(maxlen=_RECENT)
        self._recent_claim_seconds: deque[float] = deque(maxlen=_RECENT)
        # A group that returned, whose done flag and release wait for the next run to overlap.
        self._deferred: Callable[[], None] | None = None
        self._ahead_pool: ThreadPoolExecutor | None = None
        # The most this worker can give one run: what it has left at its first
        # claim (set in _claim_group). Its start-up -- the processor host, the
        # probe, the index, however slow a loaded machine makes them -- is not
        # time a group could have had; None until then.
        self.full_budget: float | None = None
        # The run budget each claim of the main walk or the drain was made with, by owner token (see _run_group).
        self._claimed_with: dict[str, float] = {}
        # When the locks of groups found held go stale, by group; only for groups last found held by others.
        self._stale_at: dict[str, float] = {}
        # When a group handed back for a retry's pause may be tried again.
        self._retry_at: dict[str, float] = {}
        self._breaker = _Breaker(settings.breaker_groups)

    # --- time ---------------------------------------------------------------------------------------------

    def _budget(self) -> float:
        """How long a run started now may take: up to the deadline less the safety margin."""
        return self.remaining_time() - self.settings.effective_safety_margin

    def _run_budget(self, reserve: float = 0.0) -> float:
        """How long the run of a group started now may take: the budget, cut to the group timeout."""
        return self.settings.run_budget(self._budget() - reserve)

    @property
    def full_run_budget(self) -> float:
        """The most this worker can give any one run: its full budget, cut to the group timeout.

        A group's claims and its timeouts are judged against this (``enough_time``, ``timeout_counts``):
        a run stopped at its group timeout had all a run of this worker can have, so it counts. Before
        the first claim, whatever the worker has now is the most it will ever have.
        """
        return self.settings.run_budget(self._budget() if self.full_budget is None else self.full_budget)

    def has_time(self, reserve: float = 0.0) -> bool:
        return self._budget() - reserve >= max(self.longest_group_seconds, MIN_RUN_SECONDS)

    def _stopping(self, reserve: float = 0.0, *, record: bool = True) -> bool:
        """Whether to claim nothing more; ``record``, the reason goes in the report (not for a claim ahead, which only defers)."""
        if self._breaker.tripped:
            return True
        if self.stop is not None and self.stop.requested:
            if record:
                self.report.stopped_reason = "interrupted"
            return True
        if not self.has_time(reserve):
            if record:
                self.report.stopped_reason = "time_limit"
            return True
        return False

    def _count(self, name: str, n: float = 1) -> None:
        # A worker counts from its own thread and from the helpers that finish and claim ahead.
        with self._report_lock:
            setattr(self.report, name, round(getattr(self.report, name) + n, 3))

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
        # Before the first claim: a store whose conditions do not hold refuses here.
        self.protocol.conditional_delete = probe_store(self.backend)
        refs = self.index.segment_refs()
        if not refs and self.require_index:
            raise NoIndex(self.backend.uri)
        walk = _Walk(refs, total_groups=sum(r.groups or 0 for r in refs), spot=self.position * len(refs))
        claimed = self._next_claim(walk)
        while claimed is not None:
            group, claim = claimed
            outcome, ahead = self._attempt(group, claim, walk=walk)
            if outcome == "not_enough_time":
                walk.short[group.hash] = group
            elif outcome not in _SETTLED:
                # Handed back unfinished (a timeout, a lost lease, no time for
                # a retry's pause) or taken from us: this worker comes back to
                # it once its walk is over, if nobody has finished it by then
                # and it still has the time (see _drain_waiting).
                walk.waiting[group.hash] = group
            if ahead is not None and (outcome not in _FINISHED or self._breaker.tripped):
                # The group in front did not finish (handed back, lost, stopped), or the breaker tripped:
                # the claim made behind it is given back, and walked to again.
                self._give_back_ahead(ahead)
                walk.ahead.appendleft(ahead[0])
                ahead = None
            claimed = ahead if ahead is not None else self._next_claim(walk)
        self._finish_deferred()
        if self._ahead_pool is not None:
            self._ahead_pool.shutdown()
            self._ahead_pool = None
        if not (self.stop is not None and self.stop.requested) and self.report.stopped_reason != "time_limit" and not self._breaker.tripped:
            self._drain_waiting(walk)
        if self.stop is not None and self.stop.requested:
            self.report.stopped_reason = "interrupted"
        elif self._breaker.tripped:
            # Whatever ended the walk after it (the last group of the drain phase, say).
            self.report.stopped_reason = "processor_failing"
        return self.report

    def _claim_ahead(self, walk: _Walk, running: Claim) -> tuple[Group, Claim] | None:
        """The next claim, made while ``running`` runs: only if there is time for both, and marked as made behind it."""
        return self._next_claim(walk, reserve=self.longest_group_seconds, behind=running)

    def _next_claim(self, walk: _Walk, reserve: float | None = None, behind: Claim | None = None) -> tuple[Group, Claim] | None:
        """Walk on to the next group this worker can claim, and claim it; None once the walk is over.

        ``reserve``, for a claim made ahead while a group runs, is the time
        this worker still owes that group: a claim is made only if there is
        time for both.
        """
        ahead_of_a_run = reserve is not None
        reserve = reserve or 0.0
        while True:
            if walk.view is None or not walk.ahead:
                if walk.next_segment >= len(walk.refs):
                    return None
                if self._stopping(reserve, record=not ahead_of_a_run):
                    return None
                n = walk.next_segment
                walk.next_segment += 1
                walk.view = self._load(walk.refs[(walk.first + n) % len(walk.refs)], walk.total_groups, previous=walk.view)
                # Only the first segment is entered part-way, at this worker's spot.
                cut = int((walk.spot - walk.first) * len(walk.view.groups)) if n == 0 else 0
                walk.ahead = deque(walk.view.groups[cut:] + walk.view.groups[:cut])
                continue
            view, ahead = walk.view, walk.ahead
            if ahead[0].hash in view.finished:
                ahead.popleft()
                continue
            # Checked before the group leaves the walk: a claim ahead that
            # stops here leaves it for the main walk.
            if self._stopping(reserve, record=not ahead_of_a_run):
                return None
            group = ahead.popleft()
            outcome = self._claim_group(group, checked_failed=view.listed, reserve=reserve, host_in_use=ahead_of_a_run, behind=behind)
            if isinstance(outcome, Claim):
                return group, outcome
            if ahead_of_a_run and outcome == "not_enough_time":
                # Too little time with the run in front subtracted, not with
                # this worker's whole time: the main walk tries it again.
                ahead.appendleft(group)
                return None
            if isinstance(outcome, Held):
                walk.waiting[group.hash] = group
            elif outcome == "not_enough_time":
                walk.short[group.hash] = group
            elif outcome == "already_finished" and view.listed:
                # Our listing is out of date: peers have been finishing
                # groups here. One LIST now saves a lock round trip for
                # each of them.
                self._list_finished(view)
            if outcome == "already_finished" or isinstance(outcome, Held):
                # We ran into a peer. Walking on would trail right behind
                # it, colliding at every step: jump into the largest
                # stretch left that nobody has finished, near its middle.
                self._jump_into_largest_gap(ahead, view.finished)

    def _jump_into_largest_gap(self, ahead: deque, finished: set[str]) -> None:
        """Rotate ``ahead`` to a point near the middle of its longest run of unfinished groups.

        Peers that collide split what is left between them, as work stealing
        halves the largest interval: collisions grow with the log of the
        groups, not with the groups. The point is drawn from the middle third
        so that two workers colliding at once do not land on the same group.
        """
        best_start, best_length, start, length = 0, 0, 0, 0
        for i, group in enumerate(ahead):
            if group.hash in finished:
                length = 0
                continue
            if length == 0:
                start = i
            length += 1
            if length > best_length:
                best_start, best_length = start, length
        if best_length:
            ahead.rotate(-(best_start + int(best_length * self.rng.uniform(1 / 3, 2 / 3))))

    def _load(self, ref: SegmentRef, total_groups: int, previous: _SegmentView | None = None) -> _SegmentView:
        groups = self.index.load_ref(ref)
        # List a prefix's flags only when that costs at most one request per
        # LISTING_GROUPS_PER_PAGE groups; a small segment of a big workspace
        # (a short prefix) is checked group by group instead.
        flags_under_prefix = total_groups / 16 ** len(ref.prefix)
        listed = ref.groups is None or flags_under_prefix / _LIST_PAGE <= max(1.0, ref.groups / LISTING_GROUPS_PER_PAGE)
        view = _SegmentView(ref, groups, listed)
        if listed and previous is not None and previous.listed and previous.ref.prefix == ref.prefix:
            # The same LIST again: the parts of olmocr's index all have the
            # empty prefix, and listing the whole workspace once per part
            # would cost a LIST of every flag per part. The listing carried
            # over is refreshed as any is, when a claim finds it out of date.
            view.failed, view.finished = previous.failed, previous.finished
        elif listed:
            view.failed = self._listed_hashes(layout.FAILED_PREFIX, view.ref.prefix, layout.FAILED_SUFFIX)
            self._list_finished(view)
        return view

    def _list_finished(self, view: _SegmentView) -> None:
        """Re-read which groups of the segment are done (one LIST).

        Failed flags are listed once, when the segment is loaded: a group that
        fails later keeps its lock marked failed, which turns a claim away for
        the price of the claim, while a second LIST on every re-listing would
        cost every worker a request for groups that are rarely there.
        """
        self._count("listings", 1)
        finished = self._listed_hashes(layout.DONE_PREFIX, view.ref.prefix, layout.DONE_SUFFIX)
        finished |= view.failed  # in place: a listing of the whole workspace can be large
        view.finished = finished

    def _listed_hashes(self, prefix: str, hash_prefix: str, suffix: str) -> set[str]:
        found = set()
        for key in self.backend.list_keys(prefix + hash_prefix):
            hash_ = layout.hash_from_key(key, prefix, suffix)
            if hash_ is not None:
                found.add(hash_)
        return found

    def _drain_waiting(self, walk: _Walk) -> None:
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
            if self._budget() - max(0.0, soonest) < max(self.longest_group_seconds, MIN_RUN_SECONDS):
                # Some of what is left is held by live workers, or all of it is ours to retry and there is no time.
                self.report.stopped_reason = "locked_by_others" if any(h in self._stale_at for h in waiting) else "time_limit"
                return
            self._sleep(max(0.0, min(pause, soonest)))
            # Back off, but not past a group's length: the held groups are
            # most often simply finished by their holders, and the last of
            # them decides when this round of the fleet ends.
            # (A worker that has run nothing yet knows no length: up to 5 s.)
            pause = min(pause * 2, max(0.2, min(5.0, self.longest_group_seconds or 5.0)))
            for hash_, group in list(waiting.items()):
                if self._stopping():
                    return
                if self._retry_at.get(hash_, 0.0) > clock.now():
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
                if outcome == "not_enough_time":
                    walk.short[hash_] = group
                if outcome in _SETTLED:  # (a Held is none of them)
                    del waiting[hash_]
        self.report.stopped_reason = "not_enough_time" if self._still_pending(walk.short) else "queue_empty"

    def _revisit_at(self, hash_: str) -> float:
        """The soonest moment a claim of a waiting group can succeed: its lock stale, its retry's pause over."""
        return max(self._stale_at.get(hash_, 0.0), self._retry_at.get(hash_, 0.0))

    def _still_pending(self, groups: dict[str, Group]) -> bool:
        """Whether any of ``groups`` (left for want of time) is still neither done nor failed."""
        return any(not self.protocol.is_done(h) and not self.protocol.is_failed(h) for h in groups)

    def _work_on(self, group: Group, *, checked_failed: bool) -> str | Held:
        """Claim one group and run it, then and there (the drain phase: no claim ahead)."""
        claimed = self._claim_group(group, checked_failed=checked_failed)
        if isinstance(claimed, Claim):
            return self._attempt(group, claimed)[0]
        return claimed

    def _claim_group(
        self, group: Group, *, checked_failed: bool, reserve: float = 0.0, host_in_use: bool = False, behind: Claim | None = None
    ) -> Claim | str | Held:
        """Take the group's lock and check it is not done; a Claim, or why not."""
        # The processor host is ready before the claim: starting it (loading
        # a model, say) must not come out of the group's lease. (A claim made
        # ahead is made while the host runs a group: it is up.)
        if not host_in_use and not self.runner.prepare():
            return "interrupted"
        available = self._budget() - reserve
        if self.full_budget is None:
            # The first claim: what this worker has now is the most it will
            # ever give a run (time only shrinks), so this claim is "full",
            # however long the start-up before it took.
            self.full_budget = available
        budget = self.settings.run_budget(available)
        claimed = self.protocol.claim(group.hash, budget=budget, full_budget=self.full_run_budget, behind=behind)
        if not isinstance(claimed, Held):
            self._stale_at.pop(group.hash, None)
        if isinstance(claimed, Finished):
            self._count("already_finished", 1)
            return "already_finished"
        if isinstance(claimed, Held):
            self._count("conflicts", 1)
            self._stale_at[group.hash] = clock.now() + claimed.stale_in
            self.observer.conflict(group.hash)
            return claimed
        if isinstance(claimed, NotEnoughTime):
            # This worker's time only shrinks, so it will never have enough
            # for this group: leave it to a worker that has (not a drop of a
            # claimable group -- nobody can take it from here).
            self._count("not_enough_time", 1)
            return "not_enough_time"
        if claimed.reclaimed:
            self._count("reclaimed", 1)
        # A failed group keeps a lock marked failed, so a free lock means "not
        # failed" unless that lock was removed (expired, or an operator's
        # cleanup); only then does the failed flag need its own check.
        if self.protocol.is_done(group.hash) or (not checked_failed and self.protocol.is_failed(group.hash)):
            self._count("already_finished", 1)
            self._release(claimed)
            return "already_finished"
        if behind is None:
            # What the run is judged by, once it starts (see _run_group).
            self._claimed_with[claimed.owner] = budget
        return claimed

    def _release(self, claim: Claim) -> None:
        if not self.protocol.release(claim):
            self._count("lost_locks", 1)
            log.warning("lock on %s was taken over before release", claim.hash)

    def _hand_back(
        self, claim: Claim, outcome: str, *, counted: bool, error: str | None = None, needs_seconds: float | None = None
    ) -> None:
        if not self.protocol.hand_back(claim, outcome, counted=counted, error=error, needs_seconds=needs_seconds):
            self._count("lost_locks", 1)

    def _fail(
        self,
        group: Group,
        claim: Claim,
        error: str,
        started: float,
        *,
        outcome: str = ERROR,
        attempts: int | None = None,
        traceback: str = "",
        error_frame: ErrorFrame | None = None,
    ) -> str:
        ours = self.protocol.finalize_failed(
            claim, group, error, outcome=outcome, attempts=attempts, traceback=traceback, error_frame=error_frame
        )
        if not ours:
            self._count("lost_locks", 1)
        self._count("failed", 1)
        self.observer.group_finished(group, claim, "failed", clock.now() - started)
        return "failed" if ours else "lost"

    def _attempt(self, group: Group, claim: Claim, *, walk: _Walk | None = None) -> tuple[str, tuple[Group, Claim] | None]:
        """Run one group to its end, retrying it here while attempts and time allow; how it ended.

        On the main ``walk`` the worker pipelines: while the processor runs,
        helper threads release the previous group's lock -- its done flag was
        written before this run began -- and claim the next group ahead of
        time, which is returned beside the outcome. Every step is the one the
        sequential worker takes, in the same order for each group; only the
        waiting on the store overlaps the processing. At most one claim is
        made ahead, and it is renewed while it waits. It names the group it
        was made behind, so that if this worker dies before that group
        finished, the claim made ahead -- which never ran -- costs its group
        no attempt; and it runs only once the group in front is done or failed.
        """
        if walk is None:
            return self._run_group(group, claim, None), None
        if self._ahead_pool is None:
            self._ahead_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="s3wq-ahead")
        ahead = _Ahead(
            self._ahead_pool,
            finish=self._take_deferred(),
            prefetch=functools.partial(self._claim_ahead, walk, claim),
            claim_after=self._claim_due_after(),
            keep=functools.partial(self._keep_claim_ahead, walk),
        )
        try:
            outcome = self._run_group(group, claim, ahead)
        except BaseException:
            self._give_back_ahead(ahead.result(quiet=True))
            raise
        try:
            claimed = ahead.result()
        except BaseException:
            # The release of the last group failed (a storage error) or the
            # wait was interrupted: the claim made ahead goes back unrun.
            self._give_back_ahead(ahead.result(quiet=True))
            raise
        if ahead.claim_seconds is not None:
            self._recent_claim_seconds.append(ahead.claim_seconds)
        if ahead.overlapped:
            self._count("overlapped_seconds", round(ahead.seconds, 3))
        if claimed is not None and self.stop is not None and self.stop.requested:
            self._give_back_ahead(claimed)
            claimed = None
        return outcome, claimed

    def _claim_due_after(self) -> float:
        """How far into the coming run to claim the next group: its expected length less the claim's, with room to spare.

        Expected lengths are the shortest of the last few runs and the
        longest of the last few claims, so that a run shorter than usual
        rarely waits on its next claim; nothing known yet, the claim goes at once.
        """
        if not self._recent_run_seconds:
            return 0.0
        lead = 2 * max(self._recent_claim_seconds, default=0.1) + _CLAIM_LEAD_SPARE_SECONDS
        return max(0.0, min(self._recent_run_seconds) - lead)

    def _keep_claim_ahead(self, walk: _Walk, claimed: tuple[Group, Claim], run_over: threading.Event) -> tuple[Group, Claim] | None:
        """Keep the lease of a claim made ahead until the run in front is over, as a run's keeper does; None if it was taken.

        A claim ahead may wait a whole run (the first is made at once).
        Unwritten, its lock would look stale to an olmocr worker after the
        foreign timeout, however long our lease; and olmocr checks a lock's
        age, then PUTs without a condition: a check made before the renewal
        that precedes our run and a PUT landing after it would let both run.
        Renewed as a running claim is, while the worker's time may outlast
        what its last write covers, it never looks stale to anyone. A renewal
        that fails for good is left to the check before the run (_keeper_for_run).
        """
        group, claim = claimed
        # No run of this worker goes past its budget: a lease covering that is never renewed (a Lambda worker's).
        keeper = LeaseKeeper(self.protocol, claim, stop_at=clock.now() + self._budget())
        verdict = None
        while verdict is None and not run_over.wait(max(0.0, min(keeper.next_wakeup() - clock.now(), keeper.wait_slice))):
            verdict = keeper.tick()
        keeper.settle()
        self._count("renewals", keeper.renewals)
        if keeper.state.lost and verdict != EXPIRED:
            # A renewal found the lock changed (an expired lease is not that:
            # the check before the run tries once more). Taken, by an olmocr
            # worker say: no attempt of ours ran, and the group is its
            # taker's. Come back to it after the walk, as to any group found held.
            self._count("lost_locks", 1)
            walk.waiting[group.hash] = group
            return None
        return group, keeper.claim

    def _give_back_ahead(self, claimed: tuple[Group, Claim] | None) -> None:
        if claimed is not None:
            self._give_back_unrun(claimed[1], "claimed ahead, never run")

    def _give_back_unrun(self, claim: Claim, why: str) -> None:
        """Give up a claim whose group never ran here (ClaimProtocol.give_back_unrun: never written as finished)."""
        if not self.protocol.give_back_unrun(claim, why):
            self._count("lost_locks", 1)

    def _take_deferred(self) -> Callable[[], None] | None:
        deferred, self._deferred = self._deferred, None
        return deferred

    def _finish_deferred(self) -> None:
        deferred = self._take_deferred()
        if deferred is not None:
            deferred()

    def _complete(
        self, group: Group, claim: Claim, lease: LeaseState, started: float, *, defer_release: bool, end: Returned = _RETURNED_CLEAN
    ) -> str:
        """Record a run that returned -- done flag, then lock released -- while the lease still holds.

        The done flag is always written before the next run starts: a worker
        that dies in that run must not take with it the record of this one.
        Only the release (which a taker could do as well) may wait for the
        next run to hide it.
        """
        if not lease.held():
            return self._stopped(group, claim, Stopped(EXPIRED), 0.0, started)
        self.protocol.record_input_errors(claim, end.input_errors, end.inputs)
        ours = self.protocol.mark_done(claim, input_errors=end.input_errors)
        self._count("processed" if ours else "already_finished", 1)
        if ours and end.input_errors:
            self._count("input_errors", end.input_errors)
        if defer_release:
            self._deferred = functools.partial(self._release, claim)
        else:
            self._release(claim)
        self.observer.group_finished(group, claim, "done", clock.now() - started)
        # A claim made behind this one runs only if the flag names this claim:
        # a taker tells whether it ran by that (see ClaimProtocol.claim).
        return "done" if ours else "already_finished"

    def _run_group(self, group: Group, claim: Claim, ahead: _Ahead | None) -> str:
        """Run the group until it is done, failed or given up here; which of them (see _FINISHED, _SETTLED)."""
        started = clock.now()
        # A claim of the main walk or the drain is judged (enough_time,
        # timeout_counts) by the budget it was made with: its own round trips,
        # and the is-done check after it, are not time another group had, and
        # on a loaded machine they can take more than FULL_SHARE leaves -- a
        # worker's first claim would not be "full". A claim made ahead waits
        # for the run in front, which is time another group had: it is judged
        # by what is left when its own run starts.
        claimed_with = self._claimed_with.pop(claim.owner, None)
        while True:
            if claim.attempt > self.settings.max_attempts:
                # Taken over from a holder that vanished on the last allowed attempt.
                error = "worker lost (killed, or its lease ran out) on every attempt"
                return self._fail(group, claim, error, started, outcome=LOST, attempts=claim.attempt - 1)
            if not self.has_time():
                # The claim took what time we had (a foreign takeover pauses),
                # or it was made ahead and the run before took it: give it back unrun.
                self._give_back_unrun(claim, "claimed with no time left to run it")
                return "released"
            available = self._budget()
            budget = self.settings.run_budget(available)
            # Whether the group timeout, not the worker's deadline, ends this run if it goes on.
            group_limited = budget < available
            judged = budget if claimed_with is None else max(budget, claimed_with)
            if not enough_time(claim.body.needs_seconds, judged, self.full_run_budget):
                # Claimed ahead, and the run before took what this group needs.
                self._count("not_enough_time", 1)
                self._hand_back(claim, TIMEOUT, counted=False, error=claim.body.error)
                return "not_enough_time"
            self.observer.group_started(group, claim)
            keeper = self._keeper_for_run(group, claim, stop_at=clock.now() + budget, started=started)
            if isinstance(keeper, str):
                return keeper
            end, ran = self._run_once(group, keeper, ahead)
            claim = keeper.claim
            if isinstance(end, Stopped):
                return self._stopped(group, claim, end, ran, started, budget=judged, group_limited=group_limited)
            self.longest_group_seconds = max(self.longest_group_seconds, ran)
            failure = failure_of(end)
            if failure is None:
                self._breaker.disarm()
                self._recent_run_seconds.append(ran)
                return self._complete(group, claim, keeper.state, started, defer_release=ahead is not None, end=end)
            retry = self._after_failure(group, claim, failure, started)
            if isinstance(retry, str):
                return retry
            claim, claimed_with = retry

    def _keeper_for_run(self, group: Group, claim: Claim, *, stop_at: float, started: float) -> LeaseKeeper | str:
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
                self._count("lost_locks", 1)
                return "lost"  # taken over: the group is its taker's now
            self._count("renewals", 1)
            keeper = LeaseKeeper(self.protocol, renewed, stop_at=stop_at)
        if not keeper.state.held():
            # The renewal took what it covers (a store that barely answers): a taker may be starting.
            return self._stopped(group, keeper.claim, Stopped(EXPIRED), 0.0, started)
        return keeper

    def _run_once(self, group: Group, keeper: LeaseKeeper, ahead: _Ahead | None) -> tuple[RunEnd, float]:
        """Run the processor once under ``keeper``: how the run ended, as its lease judges it, and how long it took."""
        if ahead is not None:
            ahead.start()
        # Awake time (time.monotonic stops while the machine sleeps): a laptop that slept through a run did not need longer.
        run_started = time.monotonic()
        try:
            end = self.runner.run(group, keeper, deadline_epoch=clock.epoch_at(keeper.stop_at))
        except BaseException:
            # KeyboardInterrupt or SystemExit in an embedding program: the
            # processor has stopped (the runner saw to it); give the group back --
            # unless a process of the run would not die: its lock is then left to its lease.
            keeper.settle()
            if self.runner.run_contained:
                self._hand_back(keeper.claim, INTERRUPTED, counted=False, error="interrupted")
            raise
        keeper.settle()
        ran = time.monotonic() - run_started
        if ahead is not None:
            # The claim made ahead may still be on its way: the done flag
            # goes out beside it rather than after it (the caller waits
            # for both before the next run).
            ahead.ran(ran)
        self._count("renewals", keeper.renewals)
        if not keeper.state.held() and not (isinstance(end, Stopped) and end.reason in (LOST, EXPIRED)):
            # The lock was taken (a renewal in flight said so), or the run
            # ended just as the lease did: a taker may be starting, and a
            # flag written now could land after its writes.
            end = Stopped(LOST if keeper.state.lost else EXPIRED)
        return end, ran

    def _after_failure(self, group: Group, claim: Claim, failure: _Failure, started: float) -> tuple[Claim, float] | str:
        """After a run that raised or left work behind: the claim and budget of the next attempt here, or how the group ended."""
        at = f" (at {failure.frame})" if failure.frame else ""
        log.warning("group %s attempt %d failed: %s%s", group.hash, claim.attempt, failure.error, at)
        if failure.traceback:
            log.info("group %s attempt %d traceback:\n%s", group.hash, claim.attempt, failure.traceback.rstrip())
        if failure.kind == LEFTOVER:
            self._count("leftovers", 1)
        tripped = self._breaker.tripped_by(group.hash, failure.bug)
        if tripped:
            self.report.breaker_error = failure.error
        if claim.attempt >= self.settings.max_attempts:
            return self._fail(
                group, claim, failure.error, started, outcome=failure.kind, traceback=failure.traceback, error_frame=failure.frame
            )
        backoff = self.settings.backoff_before(claim.attempt + 1)
        if tripped or not self.has_time(backoff):
            # A broken processor (the breaker tripped): stop before it fails the
            # whole queue; or out of time for the pause. The group keeps this
            # attempt's count and is free at once for another worker (a fixed
            # processor), without waiting for staleness; this one comes back to
            # it only after the pause, if it has the time then.
            self._hand_back(claim, failure.kind, counted=True, error=failure.error)
            if not tripped:
                self._count("retried", 1)
                self._retry_at[group.hash] = clock.now() + backoff
            self.observer.group_finished(group, claim, "released", clock.now() - started)
            return "released"
        self._count("retried", 1)
        # The lock stays ours while we wait: its lease was renewed up to the
        # run's end and the backoff is at most a third of what a write covers.
        self._sleep(backoff)
        if self.stop is not None and self.stop.requested:
            self._count("interrupted", 1)
            self._hand_back(claim, failure.kind, counted=True, error=failure.error)
            self.observer.group_finished(group, claim, "interrupted", clock.now() - started)
            return "interrupted"
        budget = self._run_budget()
        next_claim = self.protocol.next_attempt(claim, failure.error, budget=budget)
        if next_claim is None:
            self._count("lost_locks", 1)
            return "lost"
        return next_claim, budget

    def _stopped(
        self,
        group: Group,
        claim: Claim,
        end: Stopped,
        ran: float,
        started: float,
        *,
        budget: float | None = None,
        group_limited: bool = False,
    ) -> str:
        if end.reason == INTERRUPTED:
            self._count("interrupted", 1)
            self._hand_back(claim, INTERRUPTED, counted=False, error="stopped by a signal")
            self.observer.group_finished(group, claim, "interrupted", clock.now() - started)
            return "interrupted"
        if end.reason == TIMEOUT:
            self._count("timed_out", 1)
            # What this run had, not what the claim expected: a claim made ahead waits for the run before it.
            counted = timeout_counts(budget, self.full_run_budget)
            needs = max(ran, claim.body.needs_seconds or 0.0, MIN_RUN_SECONDS)
            if group_limited:
                error = f"ran past the group timeout of {self.settings.group_timeout:g} s: stopped after {ran:.1f} s"
            else:
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
        self._count("lost_locks", 1)
        if end.reason == UNKILLABLE:
            # Kill means gone: a process of the run outlived its SIGKILL, so the lock is left to its lease, which a taker honours.
            log.warning("group %s: a process of the run would not die; its lock is left to run out its lease", group.hash)
        else:
            log.warning("group %s: lease %s; processor stopped", group.hash, end.reason)
        if end.reason == EXPIRED:
            # A store still out of reach raises StorageError here, and the
            # worker stops; its lock then goes stale by itself.
            self.protocol.hand_back(claim, INTERRUPTED, counted=False, error="the lease could not be renewed")
        self.observer.group_finished(group, claim, "lost", clock.now() - started)
        return "lost"
