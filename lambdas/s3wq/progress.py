"""Progress of a run, for ``status --watch``, ``start --wait`` and the local demo.

On a terminal: a rich progress bar with done / failed / locked / pending, the
rate and an ETA. Elsewhere (a pipe, CI, a log file): one plain line every few
seconds, so the output stays readable when captured.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

PLAIN_INTERVAL_SECONDS = 2.0


def rate_and_eta(status: dict, elapsed: float, finished_at_start: int = 0) -> tuple[float, float | None]:
    """Groups finished per second since watching began, and the seconds left at that rate."""
    finished = status["done"] + status["failed"] - finished_at_start
    rate = finished / elapsed if elapsed > 0 else 0.0
    if status["remaining"] == 0:
        return rate, 0.0
    eta = status["remaining"] / rate if rate > 0 else None
    return rate, eta


class RunProgress:
    def __init__(self, *, stream: IO[str] | None = None, live: bool | None = None, console: Any = None):
        self.stream = stream or sys.stdout
        self.live = (self.stream.isatty() if live is None else live) or console is not None
        self.started = time.monotonic()
        self.finished_at_start: int | None = None
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

    def update(self, status: dict) -> None:
        if self.finished_at_start is None:
            self.finished_at_start = status["done"] + status["failed"]
        elapsed = time.monotonic() - self.started
        rate, eta = rate_and_eta(status, elapsed, self.finished_at_start)
        eta_text = "?" if eta is None else f"{eta:.0f}s"
        detail = f"failed {status['failed']}  locked {status['locked']}  pending {status['pending']}  {rate:.1f} groups/s  ETA {eta_text}"
        if self._progress is not None:
            self._progress.update(self._task, total=status["groups"] or None, completed=status["done"] + status["failed"], detail=detail)
        else:
            line = f"{elapsed:7.1f}s  done {status['done']}/{status['groups']}  {detail}"
            if time.monotonic() - self._last_plain >= PLAIN_INTERVAL_SECONDS:
                self._last_plain = time.monotonic()
                print(line, file=self.stream, flush=True)
                self._unprinted = None
            else:
                self._unprinted = line

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        elif self._unprinted:
            # The last state is the one a reader wants to see.
            print(self._unprinted, file=self.stream, flush=True)
            self._unprinted = None

    def __enter__(self) -> "RunProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
