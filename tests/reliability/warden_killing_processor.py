"""Processors whose runs kill or stop their own warden, having started a helper (``reliability.warden_killing_processor:<name>``).

The runner's parent is its warden, so ``os.getppid()`` names it. Helpers
and marks are :mod:`escaping_processor`'s: each helper beats for
``HELPER_SECONDS`` at most and writes its pid, and only a group's first
call misbehaves; later calls beat briefly and return.
"""

from __future__ import annotations

import os
import signal
import subprocess

from .escaping_processor import HELPER_SECONDS, _first_call, _helper_command, _Run, _setsid_daemon


def _start_helper(group, ctx, *, detached: bool) -> _Run | None:
    """The first call's run, once its helper beats: a setsid'd daemon, or a plain child in the host's process group."""
    if not _first_call(group, ctx):
        return None
    run = _Run(group, ctx)
    base = run.helper_base()
    if detached:
        _setsid_daemon(_helper_command(base))
    else:
        subprocess.Popen(_helper_command(base))
    run.started(base)
    run.beat(0)  # its end: what follows ends its host
    return run


def setsid_daemon_then_kill_warden(group, ctx) -> None:
    if _start_helper(group, ctx, detached=True):
        os.kill(os.getppid(), signal.SIGKILL)


def child_then_kill_warden(group, ctx) -> None:
    if _start_helper(group, ctx, detached=False):
        os.kill(os.getppid(), signal.SIGKILL)


def setsid_daemon_then_kill_own_group(group, ctx) -> None:
    """``os.killpg(0, SIGKILL)``, a common way to end "everything I started": the warden is in the group."""
    if _start_helper(group, ctx, detached=True):
        os.killpg(0, signal.SIGKILL)


def setsid_daemon_then_stop_warden(group, ctx) -> None:
    """SIGSTOPs the warden, then keeps running until its host is ended (at the group timeout)."""
    if run := _start_helper(group, ctx, detached=True):
        os.kill(os.getppid(), signal.SIGSTOP)
        run.beat(HELPER_SECONDS)
