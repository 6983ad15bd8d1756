"""Graceful stop on SIGINT, SIGTERM and SIGHUP, for a worker run from the command line.

The first signal asks the worker to stop: a processor that is running is
stopped, its group handed back at once (lock released, no attempt used), and
the worker ends with exit code 128 + the signal (130, 143; 129 when its
terminal closed). The handler only
records the signal and writes a byte to a pipe: the worker waits on that pipe
beside its processor and its sleeps, so it reacts at once without a signal
ever interrupting it halfway through a request to the store. A second signal
exits immediately, after killing the processor host.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any, Self

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class GracefulStop:
    def __init__(self) -> None:
        self.signum: int | None = None
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._on_second: list[Callable[[], None]] = []
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def fds(self) -> list[int]:
        """Readable once a stop was requested: wait on these beside anything that may take long."""
        return [self._read_fd]

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)

    def on_second_signal(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` (it must be quick and must not block) before exiting on a second signal."""
        self._on_second.append(callback)

    def request(self, signum: int) -> None:
        if self.signum is not None:
            for callback in self._on_second:
                callback()
            os._exit(128 + signum)
        self.signum = signum
        try:
            os.write(self._write_fd, b"!")
        except BlockingIOError:
            pass

    def _handle(self, signum: int, frame: Any) -> None:
        self.request(signum)

    def __enter__(self) -> Self:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        os.close(self._read_fd)
        os.close(self._write_fd)
