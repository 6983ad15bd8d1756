"""A kernel timer that kills this process at a moment on the lease clock.

A thread that watches a deadline needs the GIL and wakes late from a
suspend; the kernel does neither. On Linux a POSIX timer on CLOCK_BOOTTIME
(the clock of :mod:`s3wq.protocol.clock`) delivers SIGKILL at an absolute time: while
a processor hangs in native code, and -- after a laptop slept through the
deadline -- before any of the process's code runs again. Elsewhere an
interval timer raising SIGALRM (whose default action ends the process) is
the fallback; it does not count suspended time, which the watching threads
then cover within their slice.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import time

from s3wq.protocol import clock

_TIMER_ABSTIME = 1
_SIGEV_SIGNAL = 0


class _SigEvent(ctypes.Structure):
    # struct sigevent on Linux (64 bytes): value, signo, notify, then a union we do not use.
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("pad", ctypes.c_int * 12)]


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("interval", _Timespec), ("value", _Timespec)]


def _libc():
    for name in (None, ctypes.util.find_library("rt")):  # glibc 2.34+ has timer_create in libc itself
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            lib.timer_create  # noqa: B018 -- raises AttributeError if absent
            return lib
        except (OSError, AttributeError):
            continue
    return None


class KillTimer:
    """``arm(at)`` sends ``signum`` to this process at ``at`` (a :func:`clock.now` reading) unless ``disarm`` comes first.

    SIGKILL (the default) ends the process there and then; a process that
    must act first (end its process group) asks for a signal it handles.
    """

    def __init__(self, signum: int = signal.SIGKILL) -> None:
        self._libc = _libc() if sys.platform.startswith("linux") and hasattr(time, "CLOCK_BOOTTIME") else None
        self._timer = ctypes.c_void_p()
        if self._libc is not None:
            event = _SigEvent(None, signum, _SIGEV_SIGNAL)
            if self._libc.timer_create(time.CLOCK_BOOTTIME, ctypes.byref(event), ctypes.byref(self._timer)) != 0:
                self._libc = None

    @property
    def kernel_clock(self) -> bool:
        """Whether the deadline is kept by a kernel timer on the suspend-aware clock (Linux)."""
        return self._libc is not None

    def arm(self, at: float, *, repeat: float = 0.0) -> None:
        """Fire at ``at``, and with ``repeat`` every ``repeat`` seconds after that until disarmed."""
        if self._libc is None:
            # SIGALRM's default action ends the process (the host leaves it in place), unless a processor handles it.
            signal.setitimer(signal.ITIMER_REAL, max(at - clock.now(), 0.001), repeat)
            return
        whole, every = int(at), int(repeat)
        spec = _ITimerSpec(_Timespec(every, int((repeat - every) * 1e9)), _Timespec(whole, int((at - whole) * 1e9)))
        if self._libc.timer_settime(self._timer, _TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timer_settime failed")

    def close(self) -> None:
        if self._libc is not None:
            self._libc.timer_delete(self._timer)
            self._libc = None

    def disarm(self) -> None:
        if self._libc is None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        self._libc.timer_settime(self._timer, 0, ctypes.byref(_ITimerSpec()), None)


_process_timer: tuple[int, KillTimer] | None = None


def process_kill_timer() -> KillTimer:
    """This process's own SIGKILL timer, made once per process (a forked child gets its own)."""
    global _process_timer
    if _process_timer is None or _process_timer[0] != os.getpid():
        _process_timer = (os.getpid(), KillTimer())
    return _process_timer[1]
