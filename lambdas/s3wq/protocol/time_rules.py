"""The time rules: when a lock's lease has run out, which worker may start a group that ran out of time before, and when a timeout uses up an attempt.

A lock is stale by the store's clock alone (see lease_ran_out): every reader
asks :class:`s3wq.protocol.locks.LockReading`, which asks this module. A run stopped at its deadline has not shown that its group fails: it may
only have had too little time. These rules give such a group more time at
each pickup without letting one that fits no worker wait forever.
"""

from __future__ import annotations

# A run "had the worker's full time" when it was claimed with at least this
# share of the most the worker can give any run (its time at its first claim,
# so that its first claim always has it). Only such a run counts as an
# attempt when it is stopped at its deadline; see enough_time.
FULL_SHARE = 0.95


def lease_ran_out(age_seconds: float, lease_seconds: float) -> bool:
    """Whether a lock ``age_seconds`` old, by the store's own clock, has outlived the lease its holder wrote into it.

    Never the reader's clock, nor the reader's own lease setting: the holder
    renews by the store's clock, so only the store's can say it stopped.
    """
    return age_seconds > lease_seconds


def enough_time(needs_seconds: float | None, budget: float | None, full_budget: float | None) -> bool:
    """Whether a worker that can give a run ``budget`` seconds now (at most ``full_budget``) should start a group.

    A group that never ran out of time (no ``needs_seconds``) may go to anyone.
    One that did goes only to a worker that can give it twice what it had, or
    nearly its full time if that is less. Each uncounted timeout therefore at
    least doubles the time the next run gets, and a run given nearly a
    worker's full time counts as an attempt (see ``timeout_counts``): a group
    that fits in FULL_SHARE of a worker's time never fails by unlucky pickups,
    and one that fits no worker fails after its attempts rather than waiting
    forever for a worker that may never come. (Workers' full times differ by
    their start-up, so "the group had more than this worker could give" is
    not a safe reason to leave it.) The worker passes ``budget`` equal to
    ``full_budget`` on its first claim (``Worker.full_budget`` is set there),
    so a worker's first claim always passes, and a run of it stopped at its
    deadline always counts: however slow each start-up, a hung group fails
    after ``max_attempts`` first claims.
    """
    if needs_seconds is None or budget is None:
        return True
    if full_budget is None:
        return budget >= 2 * needs_seconds
    return budget >= min(2 * needs_seconds, FULL_SHARE * full_budget)


def timeout_counts(budget: float | None, full_budget: float | None) -> bool:
    """A run stopped at its deadline used up an attempt only if it had (nearly) the worker's full time."""
    return budget is None or full_budget is None or budget >= FULL_SHARE * full_budget
