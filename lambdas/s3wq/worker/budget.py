"""A worker's time: how long a run started now may take, and the most it can ever give one run.

The worker's time only shrinks, so what it has at its first claim is the
most any of its runs will have: claims and timeouts are judged against that
(``time_rules.enough_time``, ``time_rules.timeout_counts``).
"""

from __future__ import annotations

from collections.abc import Callable

from s3wq.config import MIN_RUN_SECONDS, WorkerSettings


class Budget:
    """The time a worker has left, less its safety margin, and what it learnt of its runs' lengths."""

    def __init__(self, settings: WorkerSettings, remaining_time: Callable[[], float]):
        self.settings = settings
        self.remaining_time = remaining_time
        self.longest_group_seconds = 0.0
        # The most this worker can give one run: what it has left at its first
        # claim (set by ``first_claim``). Its start-up -- the processor host, the
        # probe, the index, however slow a loaded machine makes them -- is not
        # time a group could have had; None until then.
        self.full: float | None = None

    def left(self) -> float:
        """How long a run started now may take: up to the deadline less the safety margin."""
        return self.remaining_time() - self.settings.effective_safety_margin

    def for_run(self, reserve: float = 0.0) -> float:
        """How long the run of a group started now may take: the budget, cut to the group timeout."""
        return self.settings.run_budget(self.left() - reserve)

    @property
    def full_run(self) -> float:
        """The most this worker can give any one run: its full budget, cut to the group timeout.

        A group's claims and its timeouts are judged against this (``enough_time``, ``timeout_counts``):
        a run stopped at its group timeout had all a run of this worker can have, so it counts. Before
        the first claim, whatever the worker has now is the most it will ever have.
        """
        return self.settings.run_budget(self.left() if self.full is None else self.full)

    def first_claim(self, available: float) -> None:
        """At the first claim, what the worker has is the most it will ever give a run (time only shrinks)."""
        if self.full is None:
            self.full = available

    def ran(self, seconds: float) -> None:
        self.longest_group_seconds = max(self.longest_group_seconds, seconds)

    def has_time(self, reserve: float = 0.0) -> bool:
        """Whether a run as long as the longest so far (at least MIN_RUN_SECONDS) fits, ``reserve`` aside."""
        return self.left() - reserve >= max(self.longest_group_seconds, MIN_RUN_SECONDS)
