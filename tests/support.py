"""Helpers shared by test modules (conftest.py holds only fixtures: pytest may load several conftests under one name)."""

from __future__ import annotations

import os
import subprocess
import sys


def run_cli(*args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    """Run ``python -m s3wq`` as a user would, in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "s3wq", *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy(), **kwargs
    )
