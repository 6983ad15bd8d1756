"""The kernel's kill timer: a process stuck in native code holding the GIL still dies at its deadline, and a disarmed timer kills nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from s3wq.host.killtimer import KillTimer
from s3wq.protocol import clock

pytestmark = pytest.mark.skipif(not KillTimer().kernel_clock, reason="the kernel timer on the lease clock is Linux's")

# sum() over a huge range runs in C and never lets go of the GIL: no Python thread could act.
HOLDS_THE_GIL = "sum(range(10**12))"


def run_armed(offset: float, timeout: float = 30) -> tuple[int, float]:
    """A process that arms its timer ``offset`` seconds from now, then holds the GIL: its exit code, and how long after arming it ended.

    Timed from the arming (the lease clock is system-wide), not from the
    process's start: an interpreter that imports s3wq on a loaded machine
    can take seconds to get there.
    """
    script = (
        "from s3wq.protocol import clock; from s3wq.host.killtimer import KillTimer\n"
        f"armed = clock.now(); print(armed, flush=True); KillTimer().arm(armed + {offset}); {HOLDS_THE_GIL}"
    )
    process = subprocess.run([sys.executable, "-c", script], timeout=timeout, capture_output=True, text=True)
    return process.returncode, clock.now() - float(process.stdout)


def test_an_armed_timer_kills_a_process_that_holds_the_gil_at_the_deadline():
    code, seconds = run_armed(1.0)

    assert code == -9
    # Not before the deadline; the upper bound only tells a timer that fired from one that never did.
    assert 1.0 <= seconds < 5


def test_a_deadline_already_past_kills_at_once():
    code, seconds = run_armed(-10)

    assert code == -9 and seconds < 5


def test_a_disarmed_or_rearmed_timer_does_not_kill_early():
    script = (
        "import time; from s3wq.protocol import clock; from s3wq.host.killtimer import KillTimer\n"
        "t = KillTimer(); t.arm(clock.now() + 0.3); t.disarm(); time.sleep(0.6)\n"
        "t.arm(clock.now() + 0.3); t.arm(clock.now() + 5); time.sleep(0.6); t.disarm()\n"
        "print('alive')"
    )
    result = subprocess.run([sys.executable, "-c", script], timeout=30, capture_output=True, text=True)

    assert (result.returncode, result.stdout) == (0, "alive\n")
