"""Processors that hang on inputs whose contents start with HANG_MARK, and extract the text of the others.

A hung run sleeps in a loop until it is killed; ``hangs_ignoring_sigterm``
also ignores SIGTERM, as a processor that installs its own handler might.
Every call is recorded (see recording_processor), so a test counts the runs
of each group from the files alone.
"""

from __future__ import annotations

import signal
import time

from recording_processor import record

from s3wq.processors import text

HANG_MARK = b"HANG"


def _hang_or_extract(group, ctx) -> None:
    record(group, ctx)
    if any(ctx.read_input(path).startswith(HANG_MARK) for path in group.paths):
        while True:
            time.sleep(0.05)
    text(group, ctx)


def hangs(group, ctx) -> None:
    _hang_or_extract(group, ctx)


def hangs_ignoring_sigterm(group, ctx) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _hang_or_extract(group, ctx)
