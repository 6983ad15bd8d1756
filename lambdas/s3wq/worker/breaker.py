"""How a run failed its group, and the breaker that stops a worker whose processor fails every group the same way.

A failure is the group's own (a bad input) unless every group a worker runs
fails with one error from the start: that is the processor (a wrong
signature, a missing model file, an expired credential), and running it on
would fail the whole queue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from s3wq.host.run_ends import Raised, Returned
from s3wq.model import Outcome
from s3wq.protocol.bodies import MAX_ERROR_CHARS
from s3wq.protocol.tracebacks import ErrorFrame


class Breaker:
    """Trips when the first ``groups`` groups a worker runs all raise the same error.

    Bad inputs fail each their own way (the error names the input); one
    error for every group is the processor itself. Any run that returns, or
    an error that differs, turns the breaker off for the rest of the
    worker's life: from then on a failure is the group's. ``groups`` 0 never
    arms it.
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
        """Record that group ``hash_`` failed with ``error``; whether that trips the breaker (a group counts once)."""
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
class Failure:
    """A run that returned or raised without finishing its group: the processor raised, or it left work running."""

    kind: Outcome  # ERROR, LEFTOVER, or UNAVAILABLE (the processor raised ServiceUnavailable)
    error: str
    # What the breaker compares: the same text for the same bug.
    bug: str
    traceback: str = ""
    frame: ErrorFrame | None = None


def failure_of(end: Returned | Raised) -> Failure | None:
    """How a run that returned or raised failed its group; None if it finished it.

    A run that left threads or processes running behind it is never done,
    whether it returned or raised: they were killed (the processor host) or
    waited for (the in-process runner) before the worker heard of the end,
    and the run did not finish what it gave them.
    The error names what was left, and what the run raised, if it did.

    A run that raised ServiceUnavailable is no failure of its group's, even
    if it left work running: that was ended all the same, and the error says
    so, but the group goes back unrun, no attempt used (its worker stops at
    once, so no group loops on it).
    """
    raised = end if isinstance(end, Raised) else None
    if raised is not None and raised.unavailable:
        said = raised.error
        if end.leftovers:
            said = f"{said} (the run left {end.leftovers} running behind it, ended since)"[:MAX_ERROR_CHARS]
        return Failure(Outcome.UNAVAILABLE, said, raised.error, raised.traceback, raised.frame)
    if not end.leftovers:
        return None if raised is None else Failure(Outcome.ERROR, raised.error, raised.error, raised.traceback, raised.frame)

    def error(left: str) -> str:
        text = f"the run left {left} running behind it"
        if raised is not None:
            text = f"{text}, and {raised.error}" if raised.host_died else f"{text}. It raised {raised.error}"
        return text[:MAX_ERROR_CHARS]

    # What was left may carry numbers that differ from run to run of one bug
    # (a thread's "Thread-7", a process id): the breaker compares the rest.
    bug = error(re.sub(r"\d+", "#", end.leftovers))
    if raised is None:
        return Failure(Outcome.LEFTOVER, error(end.leftovers), bug)
    return Failure(Outcome.LEFTOVER, error(end.leftovers), bug, raised.traceback, raised.frame)
