"""What a worker tells: its report (counters and why it stopped), its observer's hooks, and how each group ended.

The worker counts from its own thread and from the helpers that finish and
claim ahead, so every counter moves under the report's lock: through
``count`` for the end of a group, keyed by its outcome, and through
``tally`` for the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields

from s3wq.model import Group, GroupOutcome, StopReason
from s3wq.protocol.claims import Claim


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
    stopped_reason: StopReason = StopReason.RUNNING
    # With stopped_reason PROCESSOR_FAILING: the error every group it ran failed with.
    breaker_error: str | None = None
    # Groups handed back unrun because the processor raised ServiceUnavailable (the worker stops at the first),
    # and with stopped_reason SERVICE_UNAVAILABLE, its message. (After the fields a report always had, in their order.)
    unavailable: int = 0
    service_error: str | None = None
    # Pages of the groups done here, as their processor reported them (ctx.pages_done); a processor that reports none adds none.
    pages: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()  # not a field: no part of the report's dict or of its equality

    # A report still pickles (to go to another process): without its lock, and with a new one once back.
    def __getstate__(self) -> dict:
        return {name: value for name, value in self.__dict__.items() if name != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @contextmanager
    def tally(self) -> Iterator[WorkerReport]:
        """The report, to add to its counters, while no other thread of the worker does."""
        with self._lock:
            yield self

    def count(self, outcome: GroupOutcome) -> None:
        """One more group that ended so (a hand-back for a retry, RELEASED, has no counter of its own: see ``retried``)."""
        with self._lock:
            match outcome:
                case GroupOutcome.DONE:
                    self.processed += 1
                case GroupOutcome.ALREADY_FINISHED:
                    self.already_finished += 1
                case GroupOutcome.FAILED:
                    self.failed += 1
                case GroupOutcome.NOT_ENOUGH_TIME:
                    self.not_enough_time += 1
                case GroupOutcome.TIMED_OUT:
                    self.timed_out += 1
                case GroupOutcome.INTERRUPTED:
                    self.interrupted += 1
                case GroupOutcome.LOST:
                    self.lost_locks += 1
                case GroupOutcome.UNAVAILABLE:
                    self.unavailable += 1
                case GroupOutcome.RELEASED:
                    pass


class WorkerObserver:
    """Hooks for logging and metrics (the Lambda handler plugs Powertools in); all no-ops here."""

    def group_started(self, group: Group, claim: Claim) -> None: ...

    def group_finished(self, group: Group, claim: Claim, outcome: GroupOutcome, seconds: float) -> None: ...

    def conflict(self, hash_: str) -> None: ...


@dataclass(frozen=True)
class GroupEnd:
    """How a claimed group ended here, recorded once, where its run ends (``Worker._run_group``).

    ``outcome`` is what the walk makes of it; ``heard`` what the observer is
    told (None when no run of it ended: it never started, or its lock was
    lost between attempts); ``counted`` the report's counter it adds to.
    They differ where one word says more than another: a group someone
    else finished first is heard as done but counted as already finished;
    one failed here whose failed flag lost the race to a taker is heard and
    counted as failed, and walked on from as lost.
    """

    outcome: GroupOutcome
    claim: Claim
    heard: GroupOutcome | None
    counted: GroupOutcome | None
    # A run that returned: the pages its processor reported done (None: none reported, or no run returned).
    pages: int | None = None

    @classmethod
    def of(
        cls,
        outcome: GroupOutcome,
        claim: Claim,
        *,
        heard: GroupOutcome | bool = True,
        counted: GroupOutcome | bool = True,
        pages: int | None = None,
    ) -> GroupEnd:
        """An end whose ``heard`` and ``counted`` are its outcome unless given (False: none)."""

        def word(given: GroupOutcome | bool) -> GroupOutcome | None:
            if isinstance(given, bool):
                return outcome if given else None
            return given

        return cls(outcome, claim, word(heard), word(counted), pages)
