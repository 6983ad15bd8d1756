"""The vlm client's breaker: a fleet of threads stops sending to an endpoint that is down, and one probe finds it back.

A circuit breaker as Nygard's *Release It!* describes it (closed, open, half-open), counted in tries rather than calls:
a call's retries each count, so one page's retries can open it as well as many pages' first tries.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from enum import StrEnum


class Admission(StrEnum):
    """What the breaker lets a try do."""

    REFUSED = "refused"  # open: send nothing
    ADMITTED = "admitted"  # closed: send
    PROBE = "probe"  # half-open: this try alone is sent, and its outcome decides


class EndpointBreaker:
    """Opens after ``failures`` failed tries in a row, from any thread; lets one probe through ``cool_seconds`` later.

    A try that got an answer other than 5xx (a 4xx, a 429, a good answer, even a bad one) shows the endpoint up and
    closes the breaker; a connection error or a 5xx counts against it. A probe that fails opens it for another
    ``cool_seconds``; one that ended without a verdict (its caller ran out of time) lets the next try probe.
    """

    def __init__(self, failures: int = 5, cool_seconds: float = 30.0, clock: Callable[[], float] = time.monotonic):
        if failures < 1 or cool_seconds < 0:
            raise ValueError(f"a breaker needs failures >= 1 and cool_seconds >= 0, not {failures}, {cool_seconds}")
        self.failures = failures
        self.cool_seconds = cool_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._in_a_row = 0
        self._opened_at: float | None = None
        self._probing = False

    def __repr__(self) -> str:
        return f"EndpointBreaker(failures={self.failures}, cool_seconds={self.cool_seconds}, open={self.is_open})"

    @property
    def is_open(self) -> bool:
        """Open or half-open: not every try is let through."""
        return self._opened_at is not None

    def admit(self) -> Admission:
        with self._lock:
            if self._opened_at is None:
                return Admission.ADMITTED
            if self._probing or self._clock() - self._opened_at < self.cool_seconds:
                return Admission.REFUSED
            self._probing = True
            return Admission.PROBE

    def succeeded(self) -> None:
        with self._lock:
            self._in_a_row, self._opened_at, self._probing = 0, None, False

    def failed(self, admission: Admission) -> bool:
        """Count a failed try; whether that opened the breaker (a failure while it is open changes nothing)."""
        with self._lock:
            if admission is Admission.PROBE:
                self._opened_at, self._probing = self._clock(), False
                return True
            if self._opened_at is not None:
                return False
            self._in_a_row += 1
            if self._in_a_row >= self.failures:
                self._opened_at = self._clock()
                return True
            return False

    def abandoned(self, admission: Admission) -> None:
        """A try ended without a verdict on the endpoint: a probe's turn passes to the next try."""
        if admission is Admission.PROBE:
            with self._lock:
                self._probing = False
