"""The kernel's kill timer: a process stuck in native code holding the GIL still dies at its deadline, and a disarmed timer kills nothing."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from s3wq.killtimer import KillTimer

pytestmark = pytest.mark.skipif(not KillTimer().kernel_clock, reason="the kernel timer on the lease clock is Linux's")

# sum() over a huge range runs in C and never lets go of the GIL: no Python thread could act.
HOLDS_THE_GIL = "sum(range(10**12))"


def run(script: str, timeout: float = 30) -> tuple[int, float]:
    started = time.monotonic()
    process = subprocess.run([sys.executable, "-c", script], timeout=timeout, capture_output=True)
    return process.returncode, time.monotonic() - started


def test_an_armed_timer_kills_a_process_that_holds_the_gil_at_the_deadline():
    code, seconds = run(f"from s3wq import clock; from s3wq.killtimer import KillTimer; KillTimer().arm(clock.now() + 1.0); {HOLDS_THE_GIL}")

    assert code == -9
    assert 1.0 <= seconds < 5  # the interpreter's start, then the deadline


def test_a_deadline_already_past_kills_at_once():
    code, seconds = run(f"from s3wq import clock; from s3wq.killtimer import KillTimer; KillTimer().arm(clock.now() - 10); {HOLDS_THE_GIL}")

    assert code == -9 and seconds < 5


def test_a_disarmed_or_rearmed_timer_does_not_kill_early():
    script = (
        "import time; from s3wq import clock; from s3wq.killtimer import KillTimer\n"
        "t = KillTimer(); t.arm(clock.now() + 0.3); t.disarm(); time.sleep(0.6)\n"
        "t.arm(clock.now() + 0.3); t.arm(clock.now() + 5); time.sleep(0.6); t.disarm()\n"
        "print('alive')"
    )
    result = subprocess.run([sys.executable, "-c", script], timeout=30, capture_output=True, text=True)

    assert (result.returncode, result.stdout) == (0, "alive\n")
