"""Processors for the "operating a run" tests (imported through PYTHONPATH, by worker processes and by the local cloud's Lambdas).

``fails_on_broken`` fails every group with an input whose contents start with
``BROKEN`` and extracts the text of the others, so a test can fix the input
and retry the group as an operator would; ``takes_a_moment`` keeps a run
going long enough for ``status --watch`` to see it move.
"""

from __future__ import annotations

import time

from s3wq.processors import text

BROKEN_MARK = b"BROKEN"
MOMENT_SECONDS = 0.05


class UnreadableInput(Exception):
    """The error an operator finds in ``s3wq failures``."""


def fails_on_broken(group, ctx) -> None:
    for path in group.paths:
        if ctx.read_input(path).startswith(BROKEN_MARK):
            raise UnreadableInput(f"cannot read {path}")
    text(group, ctx)


def takes_a_moment(group, ctx) -> None:
    time.sleep(MOMENT_SECONDS)
    text(group, ctx)
