"""The processor host: child processes that run the processor, and that the worker can stop at any moment.

Python cannot stop a thread, and a processor can hang in a C extension or a
GPU call, so a worker that must stop its processor before its lease ends
runs it in separate processes, as Lambda runs a handler in a sandbox it can
kill. The host loads the processor once and runs groups one after another,
so a model a processor loads at import stays loaded between groups; only a
stop (timeout, lost lease, Ctrl-C), or a thread a run left running, costs a
new host.

The host is three processes in a session of their own, so that a Ctrl-C in
the terminal reaches only the worker: the *reaper* (:mod:`s3wq.host.reaper`),
the *warden* it forks (:mod:`s3wq.host.warden`) and the *runner* the warden
forks (:mod:`s3wq.host.runner_process`), which loads the processor. Each is
alone in its process group, and none but the runner runs user code: they
start without the worker's ``sys.path`` (the runner takes it), so a
``sitecustomize.py`` or a module named like the stdlib's in a processor
folder or the current directory runs in neither. On Linux the warden and the
reaper are *child subreapers*: a process the processor starts stays below
them however it detaches (a shell's ``&``, a double fork, ``setsid``), and is
found in /proc (:mod:`s3wq.host.containment`) by its ancestry, which no
process can change. The warden ends them:

* when a run ends (it returned or raised), the warden kills what the run
  left running -- every process below it but the runner, what the module
  started at import, and multiprocessing's forkserver and resource tracker --
  before it tells the worker, and its lease timer stays armed until they are
  gone, so a frozen worker cannot delay it; the reply names them
  (``leftovers``). Threads the run left running (not the module's own, nor
  an idle worker of a stdlib thread pool) cannot be stopped alone: the
  warden then ends the whole host, and the next group gets a new one;
* it ends every process of the host when the worker dies, when the worker
  asks (:meth:`ProcessorHost.kill`, which returns once they are gone), when
  the runner dies, and when the lease the worker last reported runs out --
  a kernel timer on the suspend-aware clock (:mod:`s3wq.host.killtimer`)
  resumes it with SIGCONT, so a worker that is stuck or frozen, a process
  of the run that stopped the warden, or a machine waking from sleep past
  the lease cannot delay it;
* the runner's own kernel timer kills it at the same moment, even while the
  processor holds the GIL in native code.

When the warden itself dies (a processor killed it: ``os.kill(os.getppid(),
SIGKILL)``, ``pkill``), the reaper ends every process still below it, and
says what they were. A process of the host that would not die (another
user's, one in uninterruptible sleep), or a reaper that did not end cleanly,
makes the run :class:`Unkillable`: nothing is written, and the lock is left
to its lease.

Off Linux (macOS: no subreaper, no /proc) the host ends its process group
instead, and sees only threads left running: a process that left the group
(``setsid``) escapes, and one left in it runs until the host ends.

This module is the worker's side. What it and the host's processes say to
each other, and the exit codes and times they agree on, are in
:mod:`s3wq.host.wire`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path

from s3wq.errors import ProcessorNotFound
from s3wq.host.containment import describe_leftovers
from s3wq.host.procfs import oom_kills
from s3wq.host.run_ends import Raised, Returned, Unkillable
from s3wq.host.wire import (
    EXIT_ALL_ENDED,
    HOST_PATH_ENV,
    KILL_WAIT_SECONDS,
    Exit,
    HostReady,
    HostStart,
    Lease,
    LoadFailed,
    ReaperReport,
    Run,
    RunCleanedUp,
    RunnerDied,
    receive,
    send,
)
from s3wq.inputs import ANYTHING, InputPolicy
from s3wq.protocol import clock

# Not ``-m s3wq.host.reaper``: the package imports it before runpy would run it as __main__. The path is made after
# start-up, so no sitecustomize on it runs: first the folder that holds this process's s3wq, so that the host runs
# the same s3wq as the worker, not another the interpreter has installed (it holds s3wq alone, or what pip installed
# beside it and, on Lambda, a processor folder's files, which may not shadow the stdlib: s3wq.processors.folder);
# then the interpreter's own (the stdlib first); then the rest of the worker's, where s3wq's dependencies may be
# (a Lambda layer, the local cloud's requirements), behind the stdlib, so that nothing there named like it is taken.
_HOST_ENTRY = (
    "import os, sys; sys.path.insert(0, sys.argv[1]); "
    f"sys.path += [p for p in os.environ['{HOST_PATH_ENV}'].split(os.pathsep) if p and p not in sys.path]; "
    "from s3wq.host.reaper import reaper_main; reaper_main(sys.argv[2:])"
)
_S3WQ_ROOT = str(Path(__file__).resolve().parents[2])


# Signals that mean a crash in native code, not a kill from outside.
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE}


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


def _signal_quietly(pid: int, signum: int, *, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _resume(pid: int) -> None:
    """SIGCONT: a reaper the processor stopped (SIGSTOP) could not handle the SIGTERM sent with it."""
    _signal_quietly(pid, signal.SIGCONT)


class ProcessorHost:
    """Worker side of a processor host: start it, run a group, tell it about the lease, kill it."""

    def __init__(self, processor_spec: str, workspace_uri: str, *, input_policy: InputPolicy = ANYTHING):
        self.processor_spec = processor_spec
        self.workspace_uri = workspace_uri
        # What the processor's ctx.read_input may read (on Lambda: S3, in the allowed locations only).
        self.input_policy = input_policy
        self._process: subprocess.Popen | None = None  # the reaper
        self._conn: Connection | None = None  # to the warden
        self._report_fd: int | None = None  # the reaper's last word
        self.last_report: ReaperReport | None = None
        self._held_until = 0.0  # the lease the host last heard of
        # Whether the host's warden sees every process it holds (Linux), or ends its process group (elsewhere).
        self._contained = False
        # Whether the host said "ready": its reaper had its SIGTERM handler then, so SIGTERM's own action is no clean end.
        self._ready = False
        self._oom_kills_at_run: int | None = None
        self.starts = 0

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _command(self, conn_fd: int, report_fd: int) -> list[str]:
        start = HostStart(report_fd, os.getpid(), conn_fd, self.processor_spec, self.workspace_uri, self.input_policy)
        return [
            sys.executable,
            "-P",  # no current directory on the path: a file there named like a module the host imports is not imported
            "-c",
            _HOST_ENTRY,
            _S3WQ_ROOT,
            *start.to_argv(),
        ]

    def start(self, wake_fds: Sequence[int] = ()) -> bool:
        """Start the host if it is not running and wait until its processor is loaded.

        Raises ProcessorNotFound (naming the problem) if the processor cannot
        be loaded. False if one of ``wake_fds`` became readable first (a stop
        request): the host is then killed again.
        """
        if self.running:
            return True
        self.kill()
        ours, theirs = socket.socketpair()
        report_read, report_write = os.pipe()
        os.set_blocking(report_read, False)
        # The runner imports exactly what this process imports (on Lambda the task root is on sys.path, not on
        # PYTHONPATH); the reaper and the warden start without it (see HOST_PATH_ENV).
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env[HOST_PATH_ENV] = os.pathsep.join(p for p in sys.path if p)
        try:
            self._process = subprocess.Popen(
                self._command(theirs.fileno(), report_write),
                pass_fds=(theirs.fileno(), report_write),
                start_new_session=True,
                env=env,
            )
        except BaseException:
            ours.close()
            os.close(report_read)
            raise
        finally:
            theirs.close()
            os.close(report_write)
        self._report_fd = report_read
        self._ready = False
        self._conn = Connection(ours.detach())
        self.starts += 1
        while True:
            ready = wait([self._conn, *wake_fds], timeout=1.0)
            if self._conn in ready:
                break
            if ready:
                self.kill()
                return False
            if self._process.poll() is not None:
                break
        message = self._receive()
        if not isinstance(message, HostReady):
            reason = message.reason if isinstance(message, LoadFailed) else describe_exit(self._process.poll())
            self.kill()
            raise ProcessorNotFound(reason)
        self._contained = message.contained
        self._ready = True
        return True

    def _receive(self) -> object:
        """The warden's next message; None once it is gone."""
        assert self._conn is not None
        try:
            return receive(self._conn)
        except (EOFError, OSError):
            return None

    def _send(self, message: Run | Lease | Exit) -> None:
        assert self._conn is not None
        try:
            send(self._conn, message)
        except (BrokenPipeError, OSError):
            pass  # the host died; the next wait reports how

    def run(
        self, hash_: str, paths: Sequence[str], *, worker_id: str, attempt: int, owner: str, deadline_epoch: float, held_until: float
    ) -> None:
        self._held_until = held_until
        self._oom_kills_at_run = oom_kills()
        self._send(Run(hash_, tuple(paths), worker_id, attempt, owner, deadline_epoch, held_until))

    def lease(self, held_until: float) -> None:
        self._held_until = held_until
        self._send(Lease(held_until))

    def wait(self, timeout: float, wake_fds: Sequence[int] = ()) -> Returned | Raised | Unkillable | None:
        """The run's end if it came within ``timeout`` (None otherwise, or when a wake fd fired).

        The warden has ended what the run left running before it replies.
        When that was threads, the host ends too: this returns once it has.
        """
        assert self._conn is not None and self._process is not None
        ready = wait([self._conn, *wake_fds], timeout=max(0.0, timeout))
        if self._conn not in ready:
            if self._process.poll() is not None:  # gone without a word
                return self._warden_died()
            return None
        message = self._receive()
        if isinstance(message, RunnerDied):
            return self._runner_died(message)
        if not isinstance(message, RunCleanedUp):  # None: the warden exited (it holds the other end alone)
            return self._warden_died()
        if message.host_ending and not self.kill():
            return Unkillable()
        end = message.end
        if end.error is None:
            return Returned(end.input_error_count, end.input_errors, leftovers=message.leftovers, pages=end.pages)
        return Raised(end.error, end.traceback, end.frame, leftovers=message.leftovers, unavailable=end.unavailable)

    def _out_of_memory(self) -> bool | None:
        now = oom_kills()
        return None if now is None or self._oom_kills_at_run is None else now > self._oom_kills_at_run

    def _runner_died(self, died: RunnerDied) -> Raised | Unkillable:
        """The runner died; the warden has ended the host, and named what the run left."""
        out_of_memory = self._out_of_memory()
        if not self.kill():
            return Unkillable()
        # The host ends itself at the lease it last heard of; a death after that is its doing.
        over = died.lease_over or clock.now() >= self._held_until
        return Raised(describe_exit(died.exit_code, lease_over=over, out_of_memory=out_of_memory), leftovers=died.leftovers, host_died=True)

    def _warden_died(self) -> Raised | Unkillable:
        """The warden exited without a word (killed, crashed): the reaper ends what it left, and names it."""
        out_of_memory = self._out_of_memory()
        if not self.kill():
            return Unkillable()
        report = self.last_report or ReaperReport()
        # What the reaper ended, as a run's leftovers are described.
        leftovers = describe_leftovers(report.ended, [], process_count=report.ended_count)
        if clock.now() >= self._held_until:
            return Raised(describe_exit(report.warden_exit_code, lease_over=True), leftovers=leftovers, host_died=True)
        error = describe_exit(report.warden_exit_code, out_of_memory=out_of_memory, whose="the processor host's warden")
        return Raised(error, leftovers=leftovers, host_died=True)

    def kill_now(self) -> None:
        """Ask the reaper to end the host, without waiting (a second Ctrl-C: the worker exits at once)."""
        if self._process is not None:
            _signal_quietly(self._process.pid, signal.SIGTERM)

    def kill(self) -> bool:
        """Have the host end every process of it, and return once they are gone.

        False if they are not known to be gone: one would not die (the
        reaper says so), or the reaper did not end cleanly (killed, or not
        ended within KILL_WAIT_SECONDS): its process group is killed, and
        whatever else it held may still run. The caller must then leave the
        group's lock to go stale: nothing it writes may land beside a process
        of the run.
        """
        gone = True
        if self._process is not None:
            reaper = self._process
            if reaper.poll() is None:
                _signal_quietly(reaper.pid, signal.SIGTERM)
                _resume(reaper.pid)
                try:
                    reaper.wait(timeout=KILL_WAIT_SECONDS)
                except subprocess.TimeoutExpired:
                    _signal_quietly(reaper.pid, signal.SIGKILL, group=True)
                    reaper.wait()
                    gone = False
            assert self._report_fd is not None
            self.last_report = ReaperReport.read(self._report_fd)
            os.close(self._report_fd)
            self._report_fd = None
            if not (gone and self._ended_cleanly(reaper.returncode)):
                _signal_quietly(reaper.pid, signal.SIGKILL, group=True)  # off Linux, what is still in its group
                gone = False
            self._process = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        return gone

    def _ended_cleanly(self, code: int) -> bool:
        if code == EXIT_ALL_ENDED:
            return True
        # SIGTERM's own action before the reaper could handle it: before "ready", so before it forked anything.
        if code == -signal.SIGTERM and not self._ready:
            return True
        # Off Linux the host ends its own process group, the reaper with it.
        return code == -signal.SIGKILL and not self._contained

    def close(self) -> None:
        """Let an idle host exit by itself; kill it if it does not."""
        if self.running:
            self._send(Exit())
            assert self._process is not None
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
