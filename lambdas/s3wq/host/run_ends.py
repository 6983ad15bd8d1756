"""How a run in the processor host ended, as the worker hears it: returned, raised (or its host died), or not known to be over."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from s3wq.protocol.tracebacks import ErrorFrame

# Signals that mean a crash in native code, not a kill from outside.
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}


@dataclass(frozen=True)
class Returned:
    """The processor returned; ``input_errors``: how many inputs it reported it could not use, and the first of them."""

    input_errors: int = 0
    inputs: tuple = ()
    # What the run left running behind it, that had to be killed ("" if nothing): the run is then not done.
    leftovers: str = ""


@dataclass(frozen=True)
class Raised:
    """The processor raised (or its host died): one attempt used; ``frame``: the deepest line of the processor's own code."""

    error: str
    traceback: str = ""
    frame: ErrorFrame | None = None
    # What the run left running behind it, that had to be killed ("" if nothing).
    leftovers: str = ""
    # Whether the host died (``error`` says how) rather than the processor raising.
    host_died: bool = False


@dataclass(frozen=True)
class Unkillable:
    """A process of the host would not die, or the host could not show that it did: the run is not known to be over."""


def describe_exit(
    code: int | None, *, lease_over: bool = False, out_of_memory: bool | None = None, whose: str = "the processor host"
) -> str:
    """Why a process of the host ended, in one line; ``out_of_memory``: whether the kernel's OOM killer ran meanwhile (None: not known)."""
    if lease_over:
        return "the processor host stopped it: the lease it last heard of had run out"
    if code is None:
        return f"{whose} stopped answering"
    if code >= 0:
        return f"{whose} exited with code {code}"
    try:
        signum = signal.Signals(-code)
    except ValueError:
        return f"{whose} was killed by signal {-code}"
    if signum == signal.SIGKILL:
        if out_of_memory:
            return f"{whose} was killed by SIGKILL: the kernel's OOM killer ran during the run (out of memory)"
        if out_of_memory is False:
            # Another process sent it: the processor, or one it started (os.killpg on a group it shares, pkill).
            return f"{whose} was killed by SIGKILL, not by the kernel's OOM killer: a process sent it (the processor, or one it started?)"
        return f"{whose} was killed by SIGKILL (out of memory, or another process sent it)"
    if signum in _CRASH_SIGNALS:
        return f"{whose} was killed by {signum.name} (a crash in native code)"
    return f"{whose} was killed by {signum.name}"
