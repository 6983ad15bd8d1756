"""The clock a lease holder measures its lease on.

A holder must assume its lease is gone once ``lease`` seconds have passed
since it *sent* its last successful lock write, measured on its own clock.
That clock has to keep counting while the machine is suspended: a laptop
that sleeps with a group in hand wakes up long after its lease ran out, and
a clock that stood still (Linux CLOCK_MONOTONIC, Python's ``time.monotonic``
on macOS) would tell it the lease is still good. Linux's CLOCK_BOOTTIME and
macOS's CLOCK_MONOTONIC count suspended time. Both are system-wide, so a
worker and its processor host agree on every reading.
"""

from __future__ import annotations

import sys
import time

if hasattr(time, "CLOCK_BOOTTIME"):
    _CLOCK_ID: int | None = time.CLOCK_BOOTTIME
elif sys.platform == "darwin":
    _CLOCK_ID = time.CLOCK_MONOTONIC
else:
    _CLOCK_ID = None


def now() -> float:
    """Seconds on a clock that never goes back and keeps counting through suspend."""
    if _CLOCK_ID is None:
        return time.monotonic()
    return time.clock_gettime(_CLOCK_ID)


def epoch_at(reading: float) -> float:
    """The wall-clock time (epoch seconds) of a reading of :func:`now`, for processors that want a date."""
    return time.time() + (reading - now())
