"""Progress of a run, for ``status --watch``, ``start --wait`` and the local demo.

On a terminal: a rich progress bar with done / failed / locked / pending, the
rate and an ETA, and given the pages done (:mod:`s3wq.ops.pages`), pages per
second and an ETA in pages. Elsewhere (a pipe, CI, a log file): one plain line every few
seconds, so the output stays readable when captured.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import IO, Any, Self

from s3wq.ops.pages import PagesDone
from s3wq.ops.status import QueueStatus

PLAIN_INTERVAL_SECONDS = 2.0
# "Nothing has finished lately": no group finished for STALL_FACTOR times the
# average time between finishes since watching began, and for at least
# MIN_STALL_SECONDS (a few polls: groups finish in bursts). The ETA is then
# blank: a rate from the past says nothing about a run that has stopped moving.
STALL_FACTOR = 3.0
MIN_STALL_SECONDS = 10.0


def stalled(elapsed: float, finished: int, quiet_seconds: float) -> bool:
    """Whether nothing finished lately: ``finished`` groups in ``elapsed`` s of watching, the last ``quiet_seconds`` ago."""
    if finished <= 0:
        return False  # no rate, so no ETA to blank
    return quiet_seconds >= max(MIN_STALL_SECONDS, STALL_FACTOR * elapsed / finished)


def rate_and_eta(status: QueueStatus | Mapping[str, int], elapsed: float, finished_at_start: int = 0) -> tuple[float, float | None]:
    """Groups finished per second since watching began, and the seconds left at that rate."""
    status = QueueStatus.read(status)
    rate = (status.done + status.failed - finished_at_start) / elapsed if elapsed > 0 else 0.0
    if status.remaining == 0:
        return rate, 0.0
    eta = status.remaining / rate if rate > 0 else None
    return rate, eta


class RunProgress:
    def __init__(self, *, stream: IO[str] | None = None, live: bool | None = None, console: Any = None):
        self.stream = stream or sys.stdout
        self.live = (self.stream.isatty() if live is None else live) or console is not None
        self.started = time.monotonic()
        self.finished_at_start: int | None = None
        self.pages_at_start: int | None = None
        # When the count of finished groups last went up (on the module's clock).
        self._last_finish = self.started
        self._finished_seen: int | None = None
        self._last_plain = 0.0
        self._unprinted: str | None = None
        self._progress = None
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]groups"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=console or Console(file=self.stream),
            )
            self._task = self._progress.add_task("groups", total=None, detail="")
            self._progress.start()

    def update(self, status: QueueStatus | Mapping[str, int], pages: PagesDone | None = None) -> None:
        status = QueueStatus.read(status)
        finished = status.done + status.failed
        if self.finished_at_start is None:
            self.finished_at_start = finished
        now = time.monotonic()
        elapsed = now - self.started
        if self._finished_seen is not None and finished > self._finished_seen:
            self._last_finish = now
        self._finished_seen = finished
        rate, eta = rate_and_eta(status, elapsed, self.finished_at_start)
        if eta and stalled(elapsed, finished - self.finished_at_start, now - self._last_finish):
            eta = None
        # No estimate (no rate yet, or nothing finished lately) is no ETA at all: a "?" or a guess reads as progress.
        eta_text = "" if eta is None else f"  ETA {eta:.0f}s"
        ahead = f" ({status.claimed_ahead} claimed ahead)" if status.claimed_ahead else ""
        detail = f"failed {status.failed}  locked {status.locked}{ahead}  pending {status.pending}  {rate:.1f} groups/s{eta_text}"
        if pages is not None and self.pages_at_start is None:
            self.pages_at_start = pages.pages
        if pages is not None and pages.groups:
            detail += self._pages_detail(pages, status.remaining, elapsed, stalled_now=eta is None and status.remaining > 0)
        if self._progress is not None:
            self._progress.update(self._task, total=status.groups or None, completed=finished, detail=detail)
        else:
            line = f"{elapsed:7.1f}s  done {status.done}/{status.groups}  {detail}"
            if time.monotonic() - self._last_plain >= PLAIN_INTERVAL_SECONDS:
                self._last_plain = time.monotonic()
                print(line, file=self.stream, flush=True)
                self._unprinted = None
            else:
                self._unprinted = line

    def _pages_detail(self, pages: PagesDone, remaining: int, elapsed: float, *, stalled_now: bool) -> str:
        """Pages done, their rate since watching began, and the ETA in pages: groups remaining x pages per group so far."""
        rate = (pages.pages - (self.pages_at_start or 0)) / elapsed if elapsed > 0 else 0.0
        text = f"  pages {pages.pages}  {rate:.1f} pages/s"
        left = pages.remaining(remaining)
        if left and rate > 0 and not stalled_now:
            text += f"  ETA {left / rate:.0f}s by pages (~{left} to go: groups left x pages/group)"
        return text

    def note(self, text: str) -> None:
        """Print ``text`` at once, above the bar (or between the plain lines): news a reader must not miss."""
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        elif self._unprinted:
            # The last state is the one a reader wants to see.
            print(self._unprinted, file=self.stream, flush=True)
            self._unprinted = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
