"""The processor host: a child process that runs the processor, and that the worker can stop at any moment.

Python cannot stop a thread, and a processor can hang in a C extension or a
GPU call, so a worker that must stop its processor before its lease ends
runs it in a separate process, as Lambda runs a handler in a sandbox it can
kill. The host loads the processor once and runs groups one after another,
so a model a processor loads at import stays loaded between groups; only a
stop (timeout, lost lease, Ctrl-C) costs a new host.

Three things stop a host, any one of which is enough:

* the worker kills its process group (SIGKILL) when the run must end;
* the host exits as soon as its pipe to the worker closes, and on Linux the
  kernel kills it when the worker dies (PR_SET_PDEATHSIG);
* the host watches the lease itself and exits if it is still running a group
  when the lease the worker last reported runs out -- a worker that is stuck
  or stopped (SIGSTOP) cannot make its processor outlive the lease. A kernel
  timer on the suspend-aware clock does it (:mod:`s3wq.killtimer`), so a
  processor stuck in native code, or a machine waking from sleep past the
  lease, cannot delay it; a watching thread backs it up.

The host runs in its own session, so a Ctrl-C in the terminal reaches only
the worker, which then stops the host and hands the group back.

Wire format (pickled tuples over a socket pair):
worker -> host: ("run", hash, paths, worker_id, attempt, owner, deadline_epoch, held_until), ("lease", held_until), ("exit",)
host -> worker: ("ready",) | ("load_error", message) first, then per run ("done",) | ("raised", error, traceback)
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Sequence

from . import clock
from .errors import ProcessorNotFound, S3wqError
from .killtimer import KillTimer

# The host stops itself this long after the lease the worker reported, if
# the worker has not stopped it first; less than the worker's lease margin.
_SELF_STOP_GRACE_SECONDS = 0.25
_WATCH_SLICE_SECONDS = 0.5
_EXIT_CODE_LEASE_ENDED = 75
_PR_SET_PDEATHSIG = 1
MAX_TRACEBACK_CHARS = 8000
# Not ``-m s3wq.sandbox``: the package imports this module before runpy would run it as __main__.
_HOST_ENTRY = "import sys; from s3wq.sandbox import host_main; host_main(sys.argv[1:])"


@dataclass(frozen=True)
class Returned:
    """The processor returned."""


@dataclass(frozen=True)
class Raised:
    """The processor raised (or its host died): one attempt used."""

    error: str
    traceback: str = ""


def one_line_error(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()[:2000]


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the processor host stopped answering"
    if code < 0 and code != -signal.SIGALRM:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the processor host was killed by {name} (out of memory, or a crash in native code)"
    if code == _EXIT_CODE_LEASE_ENDED or code == -signal.SIGALRM:
        return "the processor host stopped itself: the lease ran out before the worker stopped it"
    return f"the processor host exited with code {code}"


class ProcessorHost:
    """Worker side of a processor host: start it, run a group, tell it about the lease, kill it."""

    def __init__(self, processor_spec: str, workspace_uri: str):
        self.processor_spec = processor_spec
        self.workspace_uri = workspace_uri
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self.starts = 0

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

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
        # The host must import exactly what this process imports (on Lambda
        # the task root is on sys.path, not on PYTHONPATH).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        command = [
            sys.executable, "-c", _HOST_ENTRY, str(theirs.fileno()), str(os.getpid()), self.processor_spec, self.workspace_uri
        ]
        try:
            self._process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), start_new_session=True, env=env)
        finally:
            theirs.close()
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
        if message is None or message[0] != "ready":
            reason = message[1] if message and message[0] == "load_error" else _describe_exit(self._process.poll())
            self.kill()
            raise ProcessorNotFound(reason)
        return True

    def _receive(self) -> tuple | None:
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            return None

    def _send(self, message: tuple) -> None:
        try:
            self._conn.send(message)
        except (BrokenPipeError, OSError):
            pass  # the host died; the next wait reports how

    def run(self, hash_: str, paths: Sequence[str], *, worker_id: str, attempt: int, owner: str, deadline_epoch: float, held_until: float) -> None:
        self._send(("run", hash_, list(paths), worker_id, attempt, owner, deadline_epoch, held_until))

    def lease(self, held_until: float) -> None:
        self._send(("lease", held_until))

    def wait(self, timeout: float, wake_fds: Sequence[int] = ()) -> Returned | Raised | None:
        """The run's end if it came within ``timeout`` (None otherwise, or when a wake fd fired)."""
        ready = wait([self._conn, *wake_fds], timeout=max(0.0, timeout))
        if self._conn not in ready:
            return None
        message = self._receive()
        if message is None:
            self._process.wait()
            outcome = Raised(_describe_exit(self._process.returncode))
            self.kill()
            return outcome
        if message[0] == "done":
            return Returned()
        return Raised(message[1], message[2])

    def kill(self) -> None:
        """Stop the host and everything it started, and return once they are gone."""
        if self._process is not None:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._process.wait()
            self._process = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Let an idle host exit by itself; kill it if it does not."""
        if self.running:
            self._send(("exit",))
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


# --- host side ------------------------------------------------------------------------------------------------


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the pipe's EOF still ends the host
    if os.getppid() != parent_pid:  # the worker died before we could ask to follow it
        os._exit(1)


class _HostState:
    def __init__(self) -> None:
        self.kill_timer = KillTimer()
        self.lock = threading.Lock()
        self.held_until = 0.0
        self.running = False
        self.runs: list[tuple] = []
        self.arrived = threading.Condition(self.lock)

    def held(self) -> bool:
        return clock.now() < self.held_until

    def arm(self) -> None:
        """Have the kernel end the host at the lease's end, if nothing else does; never while idle."""
        if self.running:
            self.kill_timer.arm(self.held_until + _SELF_STOP_GRACE_SECONDS)
        else:
            self.kill_timer.disarm()


def _listen(conn: Connection, state: _HostState) -> None:
    """Read the worker's messages; stop the host if the worker is gone or the lease ran out mid-run."""
    while True:
        with state.lock:
            state.arm()
            # Sliced: a poll's own timeout stands still while the machine sleeps.
            timeout = None if not state.running else min(_WATCH_SLICE_SECONDS, max(0.0, state.held_until + _SELF_STOP_GRACE_SECONDS - clock.now()))
        if conn.poll(timeout):
            try:
                message = conn.recv()
            except (EOFError, OSError):
                os._exit(0)  # the worker is gone: so is its claim
            with state.lock:
                if message[0] == "lease":
                    state.held_until = message[1]
                else:
                    if message[0] == "run":
                        state.held_until = message[7]
                        state.running = True
                    state.runs.append(message)
                    state.arrived.notify()
        else:
            with state.lock:
                if state.running and clock.now() >= state.held_until + _SELF_STOP_GRACE_SECONDS:
                    os._exit(_EXIT_CODE_LEASE_ENDED)


def host_main(argv: Sequence[str]) -> None:
    fd, parent_pid, processor_spec, workspace_uri = argv
    _die_with_parent(int(parent_pid))
    conn = Connection(int(fd))
    from .backends import open_backend
    from .index import Group
    from .processors import ProcessorContext, load_processor

    try:
        processor = load_processor(processor_spec)
        backend = open_backend(workspace_uri)
    except S3wqError as exc:
        conn.send(("load_error", str(exc)))
        return
    except Exception as exc:  # the user's module failed to import: report it, the worker names it
        conn.send(("load_error", f"processor {processor_spec!r} failed to load: {one_line_error(exc)}"))
        return
    state = _HostState()
    # SIGALRM's default action ends the process: the kill timer's fallback off Linux.
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    threading.Thread(target=_listen, args=(conn, state), daemon=True, name="s3wq-host-listener").start()
    conn.send(("ready",))
    while True:
        with state.lock:
            while not state.runs:
                state.arrived.wait()
            message = state.runs.pop(0)
        if message[0] == "exit":
            return
        _, hash_, paths, worker_id, attempt, owner, deadline_epoch, _held_until = message
        group = Group(hash_, tuple(paths))
        ctx = ProcessorContext(
            worker_id=worker_id, attempt=attempt, deadline=deadline_epoch, group=group, backend=backend, owner=owner, _held=state.held
        )
        try:
            processor(group, ctx)
            reply: tuple = ("done",)
        except Exception as exc:  # a processor failure is an attempt, reported to the worker
            reply = ("raised", one_line_error(exc), "".join(traceback.format_exception(exc))[-MAX_TRACEBACK_CHARS:])
        with state.lock:
            state.running = False
            state.arm()
        conn.send(reply)

