"""A group's run time, shared out among its inputs, so that the result is written within the run however long the inputs are.

A run that goes past its time is stopped by the worker and counts as an
attempt that timed out; a group whose inputs cannot all be read in one run
would time out on every attempt and end failed, the good inputs in it with
no result. So each input gets a share: what is left of the run, less a
reserve for writing the result, split evenly among the inputs not read yet.
What one input leaves unused goes to those after it, and one huge input
cannot take the others' time. An input stops being read when its share
cannot hold another page (as long as the longest page of the group so far),
or when its share ends while the decoder works on a page; the input error
says how far it got.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

# Kept from the run for writing the result: one PUT of a few MB, or a file here. A short run keeps
# a tenth of its time instead, so that a run of a few seconds still reads something.
RESULT_RESERVE_SECONDS = 5.0
_RESERVE_SHARE = 0.1
SMALLER_GROUPS = "use smaller groups or a longer run"


@dataclass(frozen=True)
class Share:
    """One input's time: until when it may be read (on the monotonic clock), and how long that was when it began."""

    until: float
    seconds: float
    clock: Callable[[], float] = time.monotonic

    def left(self) -> float:
        return self.until - self.clock()

    def said(self) -> str:
        """``its share of the run's time (170 s)``, as an input error names it."""
        return f"its share of the run's time ({f'{self.seconds:.0f} s' if self.seconds >= 1 else 'under 1 s'})"


class TimeShares:
    """The run's time for ``inputs`` inputs, from ``remaining`` seconds (``ctx.remaining_seconds()``)."""

    def __init__(self, remaining: float, inputs: int, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.end = clock() + remaining - min(RESULT_RESERVE_SECONDS, _RESERVE_SHARE * remaining)
        self.unread = inputs
        self.longest_page = 0.0

    def next(self) -> Share:
        """The share of the next input: an even part of what is left."""
        now = self.clock()
        seconds = max(0.0, self.end - now) / max(1, self.unread)
        self.unread -= 1
        return Share(until=now + seconds, seconds=seconds, clock=self.clock)

    def page_took(self, seconds: float) -> None:
        self.longest_page = max(self.longest_page, seconds)

    def page_fits(self, share: Share) -> bool:
        """Whether a page as long as the longest so far fits in what is left of ``share``."""
        return share.left() > self.longest_page


def not_reached() -> str:
    """The input error of an input whose share was nothing: the run's time was gone before it."""
    return f"not read: the run's time ran out before this input was reached; {SMALLER_GROUPS}"


def not_opened(share: Share) -> str:
    """The input error of an input whose share ran out while the decoder opened it."""
    return f"not read: {share.said()} ran out while it was being opened; {SMALLER_GROUPS}"


def stopped(read: int, count: int, share: Share, decoding: int | None = None) -> str:
    """The input error of an input read up to page ``read`` of ``count`` when its share ran out (``decoding``: the page in the decoder)."""
    during = f" while page {decoding} was being decoded" if decoding else ""
    return f"stopped after {read} of {count} pages: {share.said()} ran out{during}; {SMALLER_GROUPS}"
