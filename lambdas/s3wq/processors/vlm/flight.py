"""A worker's pages in flight: at most N waiting on the model at once, each on a thread of the run's own pool.

The worker is I/O-bound while the model reads, so one small worker keeps many pages waiting. Memory is bounded by
taking a slot *before* a page is rendered: a page's PNG and request body (~0.1-0.8 MB at 1,288 pixels) exist only
while it holds a slot, so N slots bound them however long the group is. The pool is the run's: it is shut down, its
threads joined, before the processor returns (the host counts threads a run leaves behind as a run not done).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Self, TypeVar

from s3wq.errors import ServiceUnavailable

_T = TypeVar("_T")


class InFlight:
    """Up to ``slots`` calls running at once; ``take`` waits for a free slot, ``submit`` runs a call in it."""

    def __init__(self, slots: int):
        self._slots = threading.BoundedSemaphore(slots)
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="s3wq-vlm")
        self._unavailable: ServiceUnavailable | None = None
        self._lock = threading.Lock()
        self.peak = 0
        self._running = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def take(self) -> None:
        """Wait for a free slot (raising the endpoint's ServiceUnavailable as soon as a call has raised it)."""
        self.check()
        while not self._slots.acquire(timeout=0.5):
            self.check()
        with self._lock:
            self._running += 1
            self.peak = max(self.peak, self._running)

    def give_back(self) -> None:
        """The slot just taken, unused (the page was blank, or could not be rendered)."""
        with self._lock:
            self._running -= 1
        self._slots.release()

    def submit(self, call: Callable[[], _T]) -> Future[_T]:
        """Run ``call`` in the slot just taken; the slot is given back when it ends."""
        return self._pool.submit(self._run, call)

    def _run(self, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except ServiceUnavailable as exc:
            with self._lock:
                self._unavailable = self._unavailable or exc
            raise
        finally:
            self.give_back()

    def check(self) -> None:
        """Raise the ServiceUnavailable a call raised, if one has: the group goes back, nothing more is sent."""
        with self._lock:
            unavailable = self._unavailable
        if unavailable is not None:
            raise unavailable

    def close(self) -> None:
        """Cancel what has not started and join what has (each call is bounded by the run's time)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
