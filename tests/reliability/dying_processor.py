"""Processors whose runner dies (``reliability.dying_processor:<name>``): for how the worker names the death."""

from __future__ import annotations

import os
import signal

_CHUNK_BYTES = 32 * 1024 * 1024


def eats_memory(group, ctx) -> None:
    """Takes memory until the kernel's OOM killer ends it (a bytearray is zeroed, so every page is touched)."""
    held = []
    while True:
        held.append(bytearray(_CHUNK_BYTES))


def kills_itself(group, ctx) -> None:
    """SIGKILLs its own process: a kill another process could as well have sent, not the OOM killer's."""
    os.kill(os.getpid(), signal.SIGKILL)
