"""The heartbeat processor, with the first run of a host held open until a file exists (``reliability.gated_processor:process``).

The first run in a processor host lasts until the file named by
``S3WQ_TEST_GATE_FILE`` exists, so that a test ties the end of that run to
events (a neighbour has had its look at the locks); later runs last
``S3WQ_TEST_GROUP_SECONDS``, as in :mod:`heartbeat_processor`, whose marks
every run writes.
"""

from __future__ import annotations

import os

from . import heartbeat_processor
from .heartbeat_processor import RUN_UNTIL_ENV, SECONDS_ENV

GATE_FILE_ENV = "S3WQ_TEST_GATE_FILE"
_LATER_SECONDS = os.environ.get(SECONDS_ENV, "0")
_runs = 0


def process(group, ctx) -> None:
    global _runs
    _runs += 1
    # heartbeat_processor reads its settings from the environment at each call: set them for this one.
    if _runs == 1:
        os.environ[SECONDS_ENV] = "hang"
        os.environ[RUN_UNTIL_ENV] = os.environ[GATE_FILE_ENV]
    else:
        os.environ[SECONDS_ENV] = _LATER_SECONDS
        os.environ.pop(RUN_UNTIL_ENV, None)
    heartbeat_processor.process(group, ctx)
