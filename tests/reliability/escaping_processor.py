"""Processors whose runs start processes that try to outlive them (``reliability.escaping_processor:<name>``).

Every process a run starts writes heartbeats as :mod:`heartbeat_processor`
does, in the directory named by ``S3WQ_TEST_MARK_DIR``, under the run's
group, worker and attempt: the run's own call is ``<run>``, each helper it
starts ``<run>-h<n>``. So :func:`holder_overlap_seconds` measures, from the
helpers' own clocks, how long processes of two different runs of one group
were running at once. Helpers write their pid in ``S3WQ_TEST_PID_DIR`` (so
that a test can check they are gone, and clean up after the code before
this one, which left them running), and beat for ``HELPER_SECONDS`` at most.

Only a group's first call misbehaves (it creates a marker object in the
workspace, which only one call can win); later calls beat for
``QUICK_SECONDS`` and return. A host records its start in
``S3WQ_TEST_HOST_DIR``, one file per process, when that is set.
"""

from __future__ import annotations

import fcntl
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from s3wq.errors import ObjectExists

from .heartbeat_processor import BEAT_SECONDS, MARK_DIR_ENV, QUICK_SECONDS, Run, _write

PID_DIR_ENV = "S3WQ_TEST_PID_DIR"
HOST_DIR_ENV = "S3WQ_TEST_HOST_DIR"
# A run writes this file in the mark directory's parent just before it returns (the frozen-worker case), then waits for FROZEN.
RETURNING = "returning"
FROZEN = "frozen"
# Long enough to outlive the next holder's run by far, on the code before containment; bounded all the same.
HELPER_SECONDS = 20.0
_WAIT_SECONDS = 30.0

# A helper: no s3wq, no site packages (it starts fast); ``hardy`` ignores SIGTERM and SIGHUP. Its pid
# file holds its call and stays locked (flock) while it lives: the kernel unlocks it as the process dies,
# so a DeathWatch learns when it had certainly stopped, closer than its last beat can tell.
# What every helper script runs first, given ``base`` and ``pid_dir``: its locked pid file, and ``write(kind)``
# of a mark (the temporary file named by pid: a fork chain's generations may write at once).
ALIVE_PRELUDE = r"""
import fcntl, os, time
pid_file = os.path.join(pid_dir, str(os.getpid()))
alive = os.open(pid_file + ".tmp", os.O_CREAT | os.O_WRONLY)
fcntl.flock(alive, fcntl.LOCK_EX)
os.write(alive, os.path.basename(base).encode())
os.replace(pid_file + ".tmp", pid_file)
def write(kind):
    temporary = f"{base}.{kind}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        f.write(str(time.time_ns()))
    os.replace(temporary, f"{base}.{kind}")
"""
_HELPER = (
    r"""
import signal, sys
base, seconds, hardy, pid_dir = sys.argv[1], float(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
if hardy:
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
"""
    + ALIVE_PRELUDE
    + r"""
write("start")
until = time.monotonic() + seconds
while time.monotonic() < until:
    write("beat")
    time.sleep(0.02)
write("end")
"""
)

if os.environ.get(HOST_DIR_ENV):
    Path(os.environ[HOST_DIR_ENV], str(os.getpid())).touch()


def _helper_command(base: Path, *, hardy: bool = False) -> list[str]:
    return [sys.executable, "-S", "-c", _HELPER, str(base), str(HELPER_SECONDS), "1" if hardy else "0", os.environ[PID_DIR_ENV]]


def _wait_for(path: Path, what: str) -> None:
    give_up = time.monotonic() + _WAIT_SECONDS
    while not path.exists():
        if time.monotonic() > give_up:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


class _Run:
    """One call, which beats from its start: its base name, and its helpers' (each running once its start mark exists)."""

    def __init__(self, group, ctx):
        self.base = Path(os.environ[MARK_DIR_ENV]) / f"{group.hash}.{ctx.worker_id}.{ctx.attempt}.{os.urandom(6).hex()}"
        self.helpers = 0
        _write(self._mark(self.base, "start"), time.time_ns())
        _write(self._mark(self.base, "beat"), time.time_ns())

    @staticmethod
    def _mark(base: Path, kind: str) -> Path:
        return base.with_name(f"{base.name}.{kind}")

    def helper_base(self) -> Path:
        self.helpers += 1
        return self.base.with_name(f"{self.base.name}-h{self.helpers}")

    def started(self, base: Path) -> None:
        _wait_for(self._mark(base, "start"), "a helper to start")
        _write(self._mark(self.base, "beat"), time.time_ns())

    def beat(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            _write(self._mark(self.base, "beat"), time.time_ns())
            time.sleep(BEAT_SECONDS)
        if math.isfinite(seconds):
            _write(self._mark(self.base, "end"), time.time_ns())


def _first_call(group, ctx) -> bool:
    """Whether this is the group's first call (the one that misbehaves); a later one beats briefly and returns."""
    try:
        ctx.backend.create(f"test-markers/first-{group.hash}", b"")
        return True
    except ObjectExists:
        _Run(group, ctx).beat(QUICK_SECONDS)
        return False


def _setsid_daemon(command: list[str]) -> None:
    """Start ``command`` as a daemon does: fork, setsid, fork again, the middle process exits (waited for)."""
    middle = os.fork()
    if middle == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.execv(command[0], command)
        finally:
            os._exit(0)
    os.waitpid(middle, 0)


def shell_helper_then_raise(group, ctx) -> None:
    """``sh -c 'helper &'``, as ``subprocess.run(..., shell=True)`` or a wrapper script does; then raises."""
    if not _first_call(group, ctx):
        return
    run = _Run(group, ctx)
    base = run.helper_base()
    subprocess.run(shlex.join(_helper_command(base)) + " &", shell=True, check=True)
    run.started(base)
    run.beat(0)  # its end: it raises now
    raise RuntimeError("gave up, leaving its helper running")


def setsid_daemon_then_raise(group, ctx) -> None:
    """A daemon: double fork and setsid, out of the host's session and process group; then raises."""
    if not _first_call(group, ctx):
        return
    run = _Run(group, ctx)
    base = run.helper_base()
    _setsid_daemon(_helper_command(base))
    run.started(base)
    run.beat(0)
    raise RuntimeError("gave up, leaving its daemon running")


def child_left_on_return(group, ctx) -> None:
    """Leaves a child running and returns -- once the test has frozen the worker (it waits for FROZEN)."""
    if not _first_call(group, ctx):
        return
    run = _Run(group, ctx)
    base = run.helper_base()
    subprocess.Popen(_helper_command(base))
    run.started(base)
    signals = Path(os.environ[MARK_DIR_ENV]).parent
    (signals / RETURNING).touch()
    _wait_for(signals / FROZEN, "the test to freeze the worker")
    run.beat(0)  # its end


def hardy_daemon_and_hang(group, ctx) -> None:
    """Ignores SIGTERM, starts a setsid'd daemon that ignores SIGTERM and SIGHUP, and a plain child, then beats until stopped."""
    if not _first_call(group, ctx):
        return
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    run = _Run(group, ctx)
    daemon, child = run.helper_base(), run.helper_base()
    _setsid_daemon(_helper_command(daemon, hardy=True))
    subprocess.Popen(_helper_command(child, hardy=True))
    run.started(daemon)
    run.started(child)
    Path(os.environ[PID_DIR_ENV], str(os.getpid())).touch()  # the runner too is a process of the run
    run.beat(math.inf)


class DeathWatch:
    """When each helper had certainly stopped: a thread per helper waits on the lock its pid file holds while it lives."""

    def __init__(self, pid_dir: Path):
        self.pid_dir = pid_dir
        self.died_ns: dict[str, int] = {}  # by helper call
        self._watched: set[str] = set()
        self._stop = threading.Event()
        self._scanner = threading.Thread(target=self._scan, daemon=True)
        self._scanner.start()

    def _scan(self) -> None:
        while not self._stop.wait(0.002):
            for path in self.pid_dir.iterdir():
                if path.name not in self._watched and not path.name.endswith(".tmp") and (call := path.read_text()):
                    self._watched.add(path.name)
                    threading.Thread(target=self._wait_for_death, args=(path, call.rsplit(".", 1)[-1]), daemon=True).start()

    def _wait_for_death(self, path: Path, call: str) -> None:
        with open(path) as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # the kernel releases it as the helper dies
            self.died_ns[call] = time.time_ns()

    def close(self) -> None:
        self._stop.set()
        self._scanner.join()


def _holder(run: Run) -> tuple[str, int, str]:
    """Which run a call belongs to: its own, or the one whose helper it is."""
    return (run.worker, run.attempt, run.call.split("-")[0])


def holder_overlap_seconds(runs: list[Run], deaths: DeathWatch | None = None) -> float:
    """Total time during which processes of two different runs of one group were running at once.

    A helper had certainly stopped one beat after its last beat, or when its death was seen, whichever came first.
    """
    died = deaths.died_ns if deaths else {}

    def until(run: Run) -> int:
        return min(run.running_until_ns, died.get(run.call, run.running_until_ns))

    total = 0
    for i, earlier in enumerate(runs):
        for later in runs[i + 1 :]:
            if later.hash == earlier.hash and _holder(later) != _holder(earlier):
                total += max(0, min(until(earlier), until(later)) - later.start_ns)
    return total / 1e9


def helpers(runs: list[Run]) -> list[Run]:
    return [r for r in runs if "-h" in r.call]
