"""The processor host: a child process that runs the processor, and that the worker can stop at any moment.

Python cannot stop a thread, and a processor can hang in a C extension or a
GPU call, so a worker that must stop its processor before its lease ends
runs it in a separate process, as Lambda runs a handler in a sandbox it can
kill. The host loads the processor once and runs groups one after another,
so a model a processor loads at import stays loaded between groups; only a
stop (timeout, lost lease, Ctrl-C), or a thread a run left running, costs a
new host.

The host is a warden process that forks the runner (:mod:`s3wq.host.warden`),
both in a session of their own, so that a Ctrl-C in the terminal reaches
only the worker. On Linux the warden is the child subreaper of every process
the processor starts, however it detaches (a shell's ``&``, a double fork,
``setsid``), and finds them all in /proc (:mod:`s3wq.host.containment`). The
warden, never the worker, ends them:

* when a run ends (it returned or raised), the warden kills what the run
  left running -- every process below it but the runner and what the module
  started at import -- before it tells the worker, and its lease timer stays
  armed until they are gone, so a frozen worker cannot delay it; the reply
  names them (``leftovers``). Threads the run left running (not the module's
  own, nor an idle worker of a stdlib thread pool) cannot be stopped alone:
  the warden then ends the whole host, and the next group gets a new one;
* it ends every process of the host when the worker dies (its pipe closes,
  and on Linux the kernel tells it: PR_SET_PDEATHSIG), when the worker asks
  (:meth:`ProcessorHost.kill`, which returns once they are gone), when the
  runner dies, and when the lease the worker last reported runs out -- a
  kernel timer on the suspend-aware clock wakes it (:mod:`s3wq.host.killtimer`),
  so a worker that is stuck or frozen (SIGSTOP), or a machine waking from
  sleep past the lease, cannot delay it;
* the runner's own kernel timer kills it at the same moment, even while the
  processor holds the GIL in native code.

Off Linux (macOS: no subreaper, no /proc) the warden ends the host's
process group instead, and sees only threads left running: a process that
left the group (``setsid``) escapes, and one left in it runs until the host
ends.

The processor can end or freeze the warden itself (``os.kill(os.getppid(),
SIGKILL)``, ``os.killpg(0, SIGKILL)``, SIGSTOP). :meth:`ProcessorHost.kill`
sends SIGCONT with its SIGTERM, so a stopped warden still ends the host;
after a warden that ended uncleanly it kills the host's process group, and
where the host adopts orphans (``s3wq work``, Lambda: the worker is then
the child subreaper of what a dead warden leaves) it ends them as the
warden would. Where it cannot show them gone (an embedding program, which
adopts none; off Linux) the run is :class:`Unkillable`.

This module is the worker's side.

Wire format (pickled tuples over a socket pair):
worker -> host: ("run", hash, paths, worker_id, attempt, owner, deadline_epoch, held_until), ("lease", held_until), ("exit",)
host -> worker: ("ready", contained) | ("load_error", message) first, then per run
                ("done", input errors, the first of them, leftovers, host ending) |
                ("raised", error, traceback, the processor's own frame, leftovers, host ending) | ("died", exit code, lease over)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from s3wq.errors import ProcessorNotFound
from s3wq.host.orphans import ORPHANS as _ORPHANS  # this process's: one for every host it starts
from s3wq.host.warden import EXIT_ENDED
from s3wq.inputs import ANYTHING, InputPolicy, policy_to_json
from s3wq.protocol import clock
from s3wq.protocol.tracebacks import ErrorFrame

# How long kill() waits for the warden to end the host: longer than the warden keeps trying itself.
KILL_WAIT_SECONDS = 15.0
# Not ``-m s3wq.host.warden``: the package imports it before runpy would run it as __main__.
_HOST_ENTRY = "import sys; from s3wq.host.warden import host_main; host_main(sys.argv[1:])"


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


@dataclass(frozen=True)
class Unkillable:
    """A process of the host would not die, or the host could not show that it did: the run is not known to be over."""


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


def _signal_quietly(pid: int, signum: int, *, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _resume(pid: int) -> None:
    """SIGCONT: a warden the processor stopped (SIGSTOP) could not handle the SIGTERM sent with it."""
    _signal_quietly(pid, signal.SIGCONT)


class ProcessorHost:
    """Worker side of a processor host: start it, run a group, tell it about the lease, kill it."""

    def __init__(self, processor_spec: str, workspace_uri: str, *, input_policy: InputPolicy = ANYTHING, adopt_orphans: bool = False):
        self.processor_spec = processor_spec
        self.workspace_uri = workspace_uri
        # What the processor's ctx.read_input may read (on Lambda: S3, in the allowed locations only).
        self.input_policy = input_policy
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._held_until = 0.0  # the lease the host last heard of
        # Whether the host's warden sees every process it holds (Linux), or ends its process group (elsewhere).
        self._contained = False
        # Whether the warden said "ready": it had its SIGTERM handler then, so SIGTERM's own action is no clean end.
        self._ready = False
        # Whether this process becomes the subreaper of what a dead warden leaves, and ends it (``s3wq work``, Lambda).
        self.adopt_orphans = adopt_orphans
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
        if self.adopt_orphans:
            _ORPHANS.adopt()
        ours, theirs = socket.socketpair()
        # The host must import exactly what this process imports (on Lambda
        # the task root is on sys.path, not on PYTHONPATH).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        if self.adopt_orphans:
            name, _, value = _ORPHANS.mark.decode().partition("=")
            env[name] = value
        command = [
            sys.executable,
            "-c",
            _HOST_ENTRY,
            str(theirs.fileno()),
            str(os.getpid()),
            self.processor_spec,
            self.workspace_uri,
            policy_to_json(self.input_policy),
        ]
        try:
            self._process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), start_new_session=True, env=env)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        _ORPHANS.wardens.add(self._process.pid)
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
        if message is None or message[0] != "ready":
            reason = message[1] if message and message[0] == "load_error" else _describe_exit(self._process.poll())
            self.kill()
            raise ProcessorNotFound(reason)
        self._contained = message[1]
        self._ready = True
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

    def run(
        self, hash_: str, paths: Sequence[str], *, worker_id: str, attempt: int, owner: str, deadline_epoch: float, held_until: float
    ) -> None:
        self._held_until = held_until
        self._send(("run", hash_, list(paths), worker_id, attempt, owner, deadline_epoch, held_until))

    def lease(self, held_until: float) -> None:
        self._held_until = held_until
        self._send(("lease", held_until))

    def wait(self, timeout: float, wake_fds: Sequence[int] = ()) -> Returned | Raised | Unkillable | None:
        """The run's end if it came within ``timeout`` (None otherwise, or when a wake fd fired).

        The warden has ended what the run left running before it replies.
        When that was threads, the host ends too: this returns once it has.
        """
        ready = wait([self._conn, *wake_fds], timeout=max(0.0, timeout))
        if self._conn not in ready:
            if self._process.poll() is not None:  # gone without a word
                return self._died(self._process.returncode)
            return None
        message = self._receive()
        if message is None:  # the warden exited (it holds the other end alone)
            return self._died(None)
        kind, *fields = message
        if kind == "died":
            return self._died(fields[0], fields[1])
        *details, leftovers, host_ending = fields
        end = Returned(details[0], tuple(details[1]), leftovers=leftovers) if kind == "done" else Raised(*details, leftovers=leftovers)
        if host_ending and not self.kill():
            return Unkillable()
        return end

    def _died(self, code: int | None, lease_over: bool = False) -> Raised | Unkillable:
        """The runner died (``code``: its exit code), or the warden did (None: its own)."""
        warden = self._process
        if not self.kill():
            return Unkillable()
        if code is None:
            code = warden.returncode
        # The host ends itself at the lease it last heard of; a death after that is its doing.
        return Raised(_describe_exit(code, lease_over or clock.now() >= self._held_until))

    def kill_now(self) -> None:
        """Ask the warden to end the host, without waiting (a second Ctrl-C: the worker exits at once)."""
        if self._process is not None:
            _signal_quietly(self._process.pid, signal.SIGTERM)

    def kill(self) -> bool:
        """Have the warden end every process of the host, and return once they are gone.

        False if they are not known to be gone: one would not die (the warden
        says so), or the warden did not end cleanly (killed, crashed, or not
        ended within KILL_WAIT_SECONDS) and what it left could not be shown
        gone: its process group is killed, and where the host adopts orphans
        they are swept (elsewhere whatever left the group may still run). The
        caller must then leave the group's lock to go stale: nothing it
        writes may land beside a process of the run.
        """
        gone = True
        if self._process is not None:
            warden = self._process
            if warden.poll() is None:
                _signal_quietly(warden.pid, signal.SIGTERM)
                _resume(warden.pid)
                try:
                    warden.wait(timeout=KILL_WAIT_SECONDS)
                except subprocess.TimeoutExpired:
                    _signal_quietly(warden.pid, signal.SIGKILL, group=True)
                    warden.wait()
                    gone = False
            _ORPHANS.wardens.discard(warden.pid)
            if not (gone and self._ended_cleanly(warden.returncode)):
                gone = self._end_what_it_left(warden.pid)
            self._process = None
        _ORPHANS.reap()
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        return gone

    def _ended_cleanly(self, code: int) -> bool:
        if code == EXIT_ENDED:
            return True
        # SIGTERM's own action before the warden could handle it: before "ready", so before it forked anything.
        if code == -signal.SIGTERM and not self._ready:
            return True
        # Off Linux the warden ends its own process group, itself with it.
        return code == -signal.SIGKILL and not self._contained

    def _end_what_it_left(self, group: int) -> bool:
        """After an unclean end: kill the host's process group (the processor's own children), then sweep the orphans."""
        _signal_quietly(group, signal.SIGKILL, group=True)
        # Only a host that adopts its orphans can show them gone: this process may be the subreaper for another
        # host that does, but what this host's warden left was never marked, and may have gone anywhere.
        return self.adopt_orphans and _ORPHANS.sweep()

    def close(self) -> None:
        """Let an idle host exit by itself; kill it if it does not."""
        if self.running:
            self._send(("exit",))
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
