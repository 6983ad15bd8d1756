"""Processors for ``bench/host_overhead.py`` (``bench_host_processors:<name>``), run in a processor host."""

from __future__ import annotations

import subprocess


def starts_a_child(group, ctx=None) -> None:
    """Starts a child process and waits for it: the run did start a process, and left none."""
    subprocess.run(["true"], check=True)
