"""Processors that leave a child process running behind their run (``reliability.leftover_processor:...``).

Each run records, in the directory named by ``S3WQ_TEST_MARK_DIR``, the
child it started: ``<hash>.<attempt>.<call>.child`` holds its process id, so
that a test can count the runs and check that every child is gone.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .heartbeat_processor import MARK_DIR_ENV

# What a run that raises says: the same for every group and attempt (one bug).
MESSAGE = "the helper was left to finish the group"
RAISED = f"ValueError: {MESSAGE}"


def _start_helper(group, ctx) -> None:
    # A helper meant to finish the group's work, and never waited for.
    helper = subprocess.Popen(["sleep", "30"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mark = Path(os.environ[MARK_DIR_ENV]) / f"{group.hash}.{ctx.attempt}.{os.urandom(6).hex()}.child"
    mark.write_text(str(helper.pid))


def returns(group, ctx) -> None:
    _start_helper(group, ctx)


def raises(group, ctx) -> None:
    _start_helper(group, ctx)
    raise ValueError(MESSAGE)
