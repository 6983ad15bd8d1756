"""Processors whose runs attack the warden's boundary itself (``reliability.hostile_processor:<name>``).

Each builds on :mod:`escaping_processor`: a group's first call misbehaves,
and every process it starts beats under ``<run>-h<n>`` and holds a locked
pid file while it lives, so that the tests measure overlap as
``test_containment`` does. The attacks: a fork chain (each generation forks
one child and exits), a runner thread that keeps starting children, a
process started through a forkserver the module started at import, and a
warden made to fail (bytes that are no message on the runner's socket, its
file limit lowered to nothing).
"""

from __future__ import annotations

import _thread
import fcntl
import math
import multiprocessing
import os
import resource
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from .escaping_processor import ALIVE_PRELUDE, HELPER_SECONDS, PID_DIR_ENV, _first_call, _helper_command, _Run

# A fork chain in a bare interpreter: one pid file, locked through every generation (the lock goes with the open file).
_CHAIN = (
    r"""
import sys
base, seconds, pid_dir = sys.argv[1], float(sys.argv[2]), sys.argv[3]
"""
    + ALIVE_PRELUDE
    + r"""
write("start")
until, last = time.monotonic() + seconds, 0.0
while time.monotonic() < until:
    if time.monotonic() - last > 0.02:
        write("beat")
        last = time.monotonic()
    if os.fork() > 0:
        os._exit(0)
write("end")
"""
)
CHAIN_BINARY_ENV = "S3WQ_TEST_CHAIN_BINARY"  # fork_chain.c, built: the chain to run instead of the Python one
_CHAINS = 8  # a run's chains
# How often a runner's thread starts another child, and how long each child lives.
RESPAWN_SECONDS = 0.003
_CHILD_SECONDS = 0.5


def _write(base: Path, kind: str) -> None:
    temporary = base.with_name(f"{base.name}.{kind}.{os.getpid()}.tmp")
    temporary.write_text(str(time.time_ns()))
    os.replace(temporary, base.with_name(f"{base.name}.{kind}"))


def _beat_as_helper(base: str, seconds: float) -> None:
    """What a helper does (escaping_processor's), in this process: a locked pid file, then beats."""
    base = Path(base)
    pid_file = Path(os.environ[PID_DIR_ENV], str(os.getpid()))
    alive = os.open(f"{pid_file}.tmp", os.O_CREAT | os.O_WRONLY)
    fcntl.flock(alive, fcntl.LOCK_EX)
    os.write(alive, base.name.encode())
    os.replace(f"{pid_file}.tmp", pid_file)
    _write(base, "start")
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        _write(base, "beat")
        time.sleep(0.02)
    _write(base, "end")


def fork_chain_then_return(group, ctx) -> None:
    """Leaves fork chains running (each generation forks one child and exits) and returns."""
    if not _first_call(group, ctx):
        return
    run = _Run(group, ctx)
    bases = [run.helper_base() for _ in range(_CHAINS)]
    # A compiled chain forks far faster than an interpreter can: the test builds one where a compiler is at hand.
    chain = [os.environ[CHAIN_BINARY_ENV]] if os.environ.get(CHAIN_BINARY_ENV) else [sys.executable, "-S", "-c", _CHAIN]
    for base in bases:
        subprocess.Popen([*chain, str(base), str(HELPER_SECONDS), os.environ[PID_DIR_ENV]])
    for base in bases:
        run.started(base)
    run.beat(0.2)  # the chains fork on meanwhile


def _respawn(run: _Run) -> None:
    while True:
        base = run.helper_base()
        if os.fork() == 0:
            try:
                _beat_as_helper(str(base), _CHILD_SECONDS)
            finally:
                os._exit(0)
        time.sleep(RESPAWN_SECONDS)


def _respawning_thread(group, ctx, start) -> None:
    if not _first_call(group, ctx):
        return
    run = _Run(group, ctx)
    start(run)
    time.sleep(0.2)
    run.beat(0)


def thread_respawning_children(group, ctx) -> None:
    """Leaves a thread that starts a child every few milliseconds, and returns."""
    _respawning_thread(group, ctx, lambda run: threading.Thread(target=_respawn, args=(run,), daemon=True, name="respawner").start())


def raw_thread_respawning_children(group, ctx) -> None:
    """The same from a thread that ``threading`` does not list (``_thread``, as native code starts them)."""
    _respawning_thread(group, ctx, lambda run: _thread.start_new_thread(_respawn, (run,)))


# A forkserver the module starts at import, as frameworks that use one do; not in the processes it starts for runs.
_FORKSERVER = multiprocessing.get_context("forkserver")
_WARMED_ENV = "S3WQ_TEST_FORKSERVER_WARMED"  # the forkserver's children import this module too: they must not start one
if PID_DIR_ENV in os.environ and not os.environ.get(_WARMED_ENV):
    os.environ[_WARMED_ENV] = "1"
    _warm = _FORKSERVER.Process(target=time.sleep, args=(0,))
    _warm.start()
    _warm.join()


def through_forkserver_then_return(group, ctx) -> None:
    """Starts a process through the module's forkserver (a child of a process of the import, not of the run's) and returns."""
    if not _first_call(group, ctx):
        return
    run = _Run(group, ctx)
    base = run.helper_base()
    _FORKSERVER.Process(target=_beat_as_helper, args=(str(base), HELPER_SECONDS), daemon=False).start()
    run.started(base)
    run.beat(0)


def _runner_socket() -> int:
    """The runner's end of its socket to the warden: the one Unix socket of this process."""
    for fd in map(int, os.listdir("/proc/self/fd")):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                with socket.socket(fileno=os.dup(fd)) as probe:
                    if probe.family == socket.AF_UNIX:
                        return fd
        except OSError:
            continue
    raise RuntimeError("no Unix socket: not in a processor host")


def _break_the_warden(how: str) -> None:
    if how == "junk":
        os.write(_runner_socket(), struct.pack("!i", 5) + b"junk!")  # a frame that unpickles to nothing
    else:
        _, hard = resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE)
        resource.prlimit(os.getppid(), resource.RLIMIT_NOFILE, (0, hard))


def _helpers_then_break(group, ctx, how: str) -> None:
    if not _first_call(group, ctx):
        return
    run = _Run(group, ctx)
    child = run.helper_base()
    subprocess.Popen(_helper_command(child))
    run.started(child)
    _break_the_warden(how)
    run.beat(math.inf)  # until the host ends


def junk_on_the_runners_socket(group, ctx) -> None:
    """Leaves a child running and writes bytes that are no message to the warden, then runs on."""
    _helpers_then_break(group, ctx, "junk")


def wardens_file_limit_lowered(group, ctx) -> None:
    """Leaves a child running and lowers the warden's RLIMIT_NOFILE to 0 (its poll fails), then runs on."""
    _helpers_then_break(group, ctx, "limit")
