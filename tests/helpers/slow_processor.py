"""A processor that records each call (see recording_processor) and then takes one second."""

from __future__ import annotations

import time

from recording_processor import record

SECONDS_PER_GROUP = 1.0


def process(group, ctx) -> None:
    record(group, ctx)
    time.sleep(SECONDS_PER_GROUP)
