"""The processor host: a child process that runs the processor, and that the worker can stop at any moment.

Python cannot stop a thread, and a processor can hang in a C extension or a
GPU call, so a worker that must stop its processor before its lease ends
runs it in a separate process, as Lambda runs a handler in a sandbox it can
kill. The host loads the processor once and runs groups one after another,
so a model a processor loads at import stays loaded between groups; only a
stop (timeout, lost lease, Ctrl-C) costs a new host.

The host is a warden process that forks the runner (see "host side" below),
both in a session of their own, so that a Ctrl-C in the terminal reaches
only the worker. Any one of these ends the host with everything the
processor started:

* the worker kills the host's process group (SIGKILL) when a run must end,
  and when the processor leaves threads or processes running behind it;
* the warden ends the group when the worker dies (its pipe closes, and on
  Linux the kernel tells it: PR_SET_PDEATHSIG), and when the lease the worker
  last reported runs out -- a kernel timer on the suspend-aware clock wakes
  it (:mod:`s3wq.killtimer`), so a worker that is stuck or frozen (SIGSTOP),
  or a machine waking from sleep past the lease, cannot delay it;
* the runner's own kernel timer kills it at the same moment, even while the
  processor holds the GIL in native code.

Wire format (pickled tuples over a socket pair):
worker -> host: ("run", hash, paths, worker_id, attempt, owner, deadline_epoch, held_until), ("lease", held_until), ("exit",)
host -> worker: ("ready",) | ("load_error", message) first, then per run ("done", input errors, the first of them, leftovers) |
                ("raised", error, traceback, the processor's own frame, leftovers) | ("died", exit code, lease over)
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Sequence

from . import clock
from .errors import ProcessorNotFound, S3wqError
from .inputs import ANYTHING, InputPolicy, policy_from_json, policy_to_json
from .killtimer import KillTimer
from .tracebacks import ErrorFrame, own_frame, processor_roots

# The host stops itself this long after the lease the worker reported, if
# the worker has not stopped it first; less than the worker's lease margin.
_SELF_STOP_GRACE_SECONDS = 0.25
_WATCH_SLICE_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1
MAX_TRACEBACK_CHARS = 8000
# Not ``-m s3wq.sandbox``: the package imports this module before runpy would run it as __main__.
_HOST_ENTRY = "import sys; from s3wq.sandbox import host_main; host_main(sys.argv[1:])"


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


def processor_traceback(exc: BaseException) -> list[str]:
    """The traceback from the processor's own frame down: s3wq's frame that called it says nothing."""
    return traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)


def one_line_error(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()[:2000]


def _describe_exit(code: int | None, lease_over: bool = False) -> str:
    if lease_over:
        return "the processor host stopped it: the lease it last heard of had run out"
    if code is None:
        return "the processor host stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the processor host was killed by {name} (out of memory, or a crash in native code)"
    return f"the processor host exited with code {code}"


class ProcessorHost:
    """Worker side of a processor host: start it, run a group, tell it about the lease, kill it."""

    def __init__(self, processor_spec: str, workspace_uri: str, *, input_policy: InputPolicy = ANYTHING):
        self.processor_spec = processor_spec
        self.workspace_uri = workspace_uri
        # What the processor's ctx.read_input may read (on Lambda: S3, in the allowed locations only).
        self.input_policy = input_policy
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._held_until = 0.0  # the lease the host last heard of
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
            sys.executable, "-c", _HOST_ENTRY, str(theirs.fileno()), str(os.getpid()), self.processor_spec, self.workspace_uri,
            policy_to_json(self.input_policy),
        ]
        try:
            self._process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), start_new_session=True, env=env)
        except BaseException:
            ours.close()
            raise
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
        self._held_until = held_until
        self._send(("run", hash_, list(paths), worker_id, attempt, owner, deadline_epoch, held_until))

    def lease(self, held_until: float) -> None:
        self._held_until = held_until
        self._send(("lease", held_until))

    def wait(self, timeout: float, wake_fds: Sequence[int] = ()) -> Returned | Raised | None:
        """The run's end if it came within ``timeout`` (None otherwise, or when a wake fd fired).

        A processor that left threads or processes running behind it ends
        its host too: they must not go on working on a group handed back.
        """
        ready = wait([self._conn, *wake_fds], timeout=max(0.0, timeout))
        if self._conn not in ready:
            if self._process.poll() is not None:  # gone without a word
                return self._died(self._process.returncode)
            return None
        message = self._receive()
        if message is None:
            self._process.wait()
            return self._died(self._process.returncode)
        if message[0] == "died":
            return self._died(message[1], message[2])
        leftovers = "threads or processes" if message[-1] is True else (message[-1] or "")
        if message[0] == "done":
            end: Returned | Raised = Returned(message[1], tuple(message[2]), leftovers=leftovers)
        else:
            end = Raised(message[1], message[2], message[3], leftovers=leftovers)
        if leftovers:
            self.kill()
        return end

    def _died(self, code: int | None, lease_over: bool = False) -> Raised:
        self.kill()
        # The host ends itself at the lease it last heard of; a death after that is its doing.
        return Raised(_describe_exit(code, lease_over or clock.now() >= self._held_until))

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
#
# The host is two processes in a session of their own: a *warden*, the
# session leader, which runs no user code and holds no GIL for long, and the
# *runner* it forks, which loads the processor and runs groups. The warden
# relays messages between the worker and the runner and ends the whole
# process group -- the runner and anything the processor started -- when the
# worker is gone, when the lease it last heard of has run out (a kernel timer
# on the suspend-aware clock wakes it), or when the runner dies.


def _prctl_pdeathsig(signum: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the warden still sees its pipe close


def _kill_group() -> None:
    """End the whole host: the warden, the runner, and everything the processor started."""
    os.killpg(0, signal.SIGKILL)


def _leftovers() -> bool:
    """Whether the processor left threads or processes running (Linux: /proc; elsewhere threads only)."""
    if threading.active_count() > 2:  # the main thread and the listener
        return True
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as children:
                if children.read().strip():
                    return True
        except OSError:
            continue
    return False


class _RunnerState:
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
        """Have the kernel end the runner at the lease's end; never while idle."""
        if self.running:
            self.kill_timer.arm(self.held_until + _SELF_STOP_GRACE_SECONDS)
        else:
            self.kill_timer.disarm()


def _listen(conn: Connection, state: _RunnerState) -> None:
    """The runner's ear: lease updates and runs from the warden; exit when the warden is gone."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        with state.lock:
            if message[0] == "lease":
                state.held_until = message[1]
            else:
                if message[0] == "run":
                    state.held_until = message[7]
                    state.running = True
                state.runs.append(message)
                state.arrived.notify()
            state.arm()


def _runner_main(conn: Connection, processor_spec: str, workspace_uri: str, input_policy: InputPolicy) -> None:
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
    roots = processor_roots(processor)
    state = _RunnerState()
    threading.Thread(target=_listen, args=(conn, state), daemon=True, name="s3wq-host-listener").start()
    conn.send(("ready",))
    while True:
        with state.lock:
            while not state.runs:
                state.arrived.wait()
            message = state.runs.pop(0)
            if message[0] == "exit":
                return
            state.arm()  # before the processor starts, not only when the listener gets round to it
        _, hash_, paths, worker_id, attempt, owner, deadline_epoch, _held_until = message
        group = Group(hash_, tuple(paths))
        ctx = ProcessorContext(
            worker_id=worker_id, attempt=attempt, deadline=deadline_epoch, group=group, backend=backend, owner=owner, _held=state.held,
            input_policy=input_policy,
        )
        try:
            processor(group, ctx)
            reply: tuple = ("done", ctx.input_error_count, ctx.input_errors, _leftovers())
        except Exception as exc:  # a processor failure is an attempt, reported to the worker
            reply = ("raised", one_line_error(exc), "".join(processor_traceback(exc))[-MAX_TRACEBACK_CHARS:], own_frame(exc, roots), _leftovers())
        with state.lock:
            state.running = False
            state.arm()
        conn.send(reply)


def _warden(worker: Connection, runner: Connection, runner_pid: int) -> None:
    """Relay between worker and runner; end the whole group when the worker is gone or the lease is over."""
    deadline: float | None = None  # while a run is in progress
    lease_over = KillTimer(signal.SIGALRM)
    signal.signal(signal.SIGALRM, lambda *_: _kill_group())

    def reaped() -> int | None:
        pid, status = os.waitpid(runner_pid, os.WNOHANG)
        return None if pid == 0 else os.waitstatus_to_exitcode(status)

    while True:
        # Sliced: a wait's own timeout stands still while the machine sleeps; the timer does not.
        ready = wait([worker, runner], timeout=None if deadline is None else min(_WATCH_SLICE_SECONDS, max(0.0, deadline - clock.now())))
        if deadline is not None and clock.now() >= deadline:
            _kill_group()
        if worker in ready:
            try:
                message = worker.recv()
            except (EOFError, OSError):
                _kill_group()  # the worker is gone: so is its claim
            if message[0] == "run":
                deadline = message[7] + _SELF_STOP_GRACE_SECONDS
            elif message[0] == "lease":
                deadline = message[1] + _SELF_STOP_GRACE_SECONDS
            if deadline is not None:
                lease_over.arm(deadline)
            runner.send(message)
            if message[0] == "exit":
                os.waitpid(runner_pid, 0)
                return
        if runner in ready:
            try:
                reply = runner.recv()
            except (EOFError, OSError):
                reply = None
            if reply is None:
                code = None
                while code is None:
                    code = reaped()
                    time.sleep(0.01)
                worker.send(("died", code, deadline is not None and clock.now() >= deadline - _SELF_STOP_GRACE_SECONDS))
                _kill_group()
            if reply[0] in ("done", "raised"):
                deadline = None
                lease_over.disarm()
            worker.send(reply)
        # A runner whose socket a child of the processor still holds dies unseen by recv.
        code = reaped()
        if code is not None:
            worker.send(("died", code, deadline is not None and clock.now() >= deadline - _SELF_STOP_GRACE_SECONDS))
            _kill_group()


def host_main(argv: Sequence[str]) -> None:
    fd, parent_pid, processor_spec, workspace_uri, input_policy = argv
    # A handled signal, not SIGKILL: the warden must live to end its group.
    _prctl_pdeathsig(signal.SIGHUP)
    signal.signal(signal.SIGHUP, lambda *_: _kill_group())
    if os.getppid() != int(parent_pid):  # the worker died before we could ask to hear of it
        _kill_group()
    worker = Connection(int(fd))
    ours, theirs = socket.socketpair()
    runner_pid = os.fork()  # no threads yet, no user code loaded: a safe fork
    if runner_pid == 0:
        worker.close()
        ours.close()
        _prctl_pdeathsig(signal.SIGKILL)  # the runner dies with its warden
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        try:
            _runner_main(Connection(theirs.detach()), processor_spec, workspace_uri, policy_from_json(input_policy))
        finally:
            os._exit(0)
    theirs.close()
    _warden(worker, Connection(ours.detach()), runner_pid)
