"""The queue's nouns and vocabularies, shared by every layer: a group, and the words s3wq writes and reports.

Each vocabulary is a ``str`` enum: its members compare equal to, serialise as
and are read back from the very strings s3wq has always written (olmocr's
workspaces and our own lock bodies), so typing them changes no byte in a
bucket. Some words appear in more than one vocabulary, because the stored
strings are the same, yet they mean different things: ``Outcome.LOST`` is a
holder that vanished (a taker found its lock stale), ``RunStop.LOST`` is a
holder that learned its lock was taken or deleted while it ran. Code names
the member it means, never a bare string, and a stop becomes an outcome only
through ``RunStop.recorded_as``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class Group:
    """One unit of work: the SHA-1 of its paths (olmocr's hash) and the paths, in index order."""

    hash: str
    paths: tuple[str, ...]


class LockState(StrEnum):
    """The ``state`` of an s3wq lock body. No lock object at all means nobody holds the group."""

    HELD = "held"  # a worker holds the group under its lease
    RELEASED = "released"  # given back; the outcome says why, and the group may be claimed again
    FAILED = "failed"  # out of attempts: no worker claims it until requeue-failed


class Outcome(StrEnum):
    """Why a run ended without completing its group: the ``outcome`` of a released or failed lock body."""

    ERROR = "error"  # the processor raised, or its host process died
    TIMEOUT = "timeout"  # stopped at the worker's deadline
    LOST = "lost"  # the holder vanished: its lock went stale and a taker found it
    INTERRUPTED = "interrupted"  # SIGINT or SIGTERM: the operator stopped the worker
    LEFTOVER = "leftover"  # the run left threads or processes running, killed or waited for: the run is not done
    UNAVAILABLE = "unavailable"  # the processor raised ServiceUnavailable: handed back unrun, no attempt used
    OPERATOR = "operator"  # released by `s3wq release-locks` for a worker known to be dead
    REQUEUED = "requeued"  # put back by `s3wq requeue-failed`
    # Released instead of deleted, on a store that cannot delete on a condition:
    # the group is done (its done flag says so). A claim given back unrun is handed back as interrupted.
    FINISHED = "finished"


class RunStop(StrEnum):
    """Why the worker stopped a run before the processor ended it (a lease's verdict, or the operator)."""

    TIMEOUT = "timeout"  # the worker's time limit is up
    LOST = "lost"  # the lock was taken from us or deleted
    EXPIRED = "expired"  # renewals failed until the lease ran out
    INTERRUPTED = "interrupted"  # SIGINT/SIGTERM/SIGHUP asked the worker to stop
    # A process of the run would not die (uninterruptible sleep, another user's), or its host could not show it did:
    # like a lost lock, nothing is written and the lock is left to go stale -- the lease a taker honours covers it.
    UNKILLABLE = "unkillable"

    @property
    def recorded_as(self) -> Outcome | None:
        """The outcome the group's lock records after this stop; None: nothing is written for it."""
        return _RECORDED_AS.get(self)


# The one place a stop becomes an outcome. A run stopped at its time is handed back (or failed) as timed out; one
# stopped by a signal, or whose lease ran out before anyone took it, is handed back as interrupted, no attempt used.
# A lost lock is its taker's, and an unkillable run's lock is left to its lease: writing either could land after a
# new holder's writes.
_RECORDED_AS = {RunStop.TIMEOUT: Outcome.TIMEOUT, RunStop.INTERRUPTED: Outcome.INTERRUPTED, RunStop.EXPIRED: Outcome.INTERRUPTED}


class StopReason(StrEnum):
    """Why a worker stopped claiming: the ``stopped_reason`` of its report ("" while it runs)."""

    RUNNING = ""
    QUEUE_EMPTY = "queue_empty"  # every group is done or failed
    NOT_ENOUGH_TIME = "not_enough_time"  # what is left needs more time than the worker has
    TIME_LIMIT = "time_limit"  # the worker's time limit is up
    LOCKED_BY_OTHERS = "locked_by_others"  # what is left is held by other workers until after the time limit
    INTERRUPTED = "interrupted"  # the operator stopped the worker
    PROCESSOR_FAILING = "processor_failing"  # the breaker: every group it ran failed with one error
    SERVICE_UNAVAILABLE = "service_unavailable"  # the processor said a service it needs is down (ServiceUnavailable)


class GroupOutcome(StrEnum):
    """How one group ended for the worker that claimed or ran it: what its walk makes of it, and what its observer hears."""

    DONE = "done"  # the processor returned; this worker wrote the done flag
    ALREADY_FINISHED = "already_finished"  # done or failed by someone else before this worker could finish it
    FAILED = "failed"  # out of attempts: failed for good
    RELEASED = "released"  # handed back unfinished: a retry's pause, a tripped breaker, or no time left to run it
    NOT_ENOUGH_TIME = "not_enough_time"  # needs more time than this worker has left
    TIMED_OUT = "timed_out"  # stopped at the worker's deadline or the group timeout, handed back
    INTERRUPTED = "interrupted"  # stopped by SIGINT or SIGTERM, handed back
    LOST = "lost"  # the lock was taken, or the lease could not be renewed
    UNAVAILABLE = "unavailable"  # the processor said a service it needs is down: handed back unrun, and the worker stops
