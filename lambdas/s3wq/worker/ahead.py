"""Claiming ahead: what a worker does on helper threads while its processor runs, and when it makes the next claim.

While one group runs, the worker finishes the last one (releases its lock)
and claims the next, so that the store's round trips hide behind the run.
The claim is timed from the last few runs and claims to land just before
the run in front ends (``ClaimTiming``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait

from s3wq.model import Group
from s3wq.protocol.claims import Claim

# Claims ahead are timed from this many recent runs and claims, with this much to spare.
RECENT = 5
CLAIM_LEAD_SPARE_SECONDS = 0.05


class ClaimTiming:
    """The last few runs and claims of a worker, and from them how far into the next run to claim the group after it."""

    def __init__(self, recent: int = RECENT):
        self.run_seconds: deque[float] = deque(maxlen=recent)
        self.claim_seconds: deque[float] = deque(maxlen=recent)

    def due_after(self) -> float:
        """How far into the coming run to claim the next group: its expected length less the claim's, with room to spare.

        Expected lengths are the shortest of the last few runs and the
        longest of the last few claims, so that a run shorter than usual
        rarely waits on its next claim; nothing known yet, the claim goes at once.
        """
        if not self.run_seconds:
            return 0.0
        lead = 2 * max(self.claim_seconds, default=0.1) + CLAIM_LEAD_SPARE_SECONDS
        return max(0.0, min(self.run_seconds) - lead)


class ClaimAhead:
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
    ends (see Claimer.keep_ahead).
    """

    def __init__(
        self,
        pool: ThreadPoolExecutor,
        *,
        finish: Callable[[], object] | None,
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
        return None if isinstance(claimed, BaseException) else claimed
