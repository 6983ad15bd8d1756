"""The processor host's own side: the warden, which alone ends the host's processes, and the runner it forks.

The host is two processes in a session of their own: a *warden*, the
session leader, which runs no user code and holds no GIL for long, and the
*runner* it forks, which loads the processor and runs groups. The warden
relays messages between the worker (:class:`s3wq.host.sandbox.ProcessorHost`)
and the runner. It alone ends the host's processes (see
:mod:`s3wq.host.containment`): a run's leftovers when the run ends, before the
worker hears of its end; and every process of the host when the worker is
gone, when the lease it last heard of has run out (a kernel timer on the
suspend-aware clock wakes it), when the worker asks, or when the runner
dies. Its exit code says whether they all died.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.connection import Connection, wait

from s3wq.errors import S3wqError
from s3wq.host.containment import KeptAppearing, Member, ModuleThreads, ProcessTree, describe_leftovers, leftover_threads, not_kept
from s3wq.host.killtimer import KillTimer
from s3wq.inputs import InputPolicy, policy_from_json
from s3wq.protocol import clock
from s3wq.protocol.tracebacks import own_frame, processor_roots

# The host stops itself this long after the lease the worker reported, if
# the worker has not stopped it first; less than the worker's lease margin.
_SELF_STOP_GRACE_SECONDS = 0.25
_WATCH_SLICE_SECONDS = 0.5
_PR_SET_PDEATHSIG = 1

# Signals that end the host: the worker's death (PR_SET_PDEATHSIG), the lease's end (the warden's timer), a kill request.
_ENDING_SIGNALS = (signal.SIGHUP, signal.SIGALRM, signal.SIGTERM)
# The warden's exit codes: every process of the host is gone; some would not die (ProcessorHost.kill reads them).
EXIT_ENDED = 0
EXIT_MEMBERS_SURVIVED = 75
# How long the warden keeps killing a process that will not die (uninterruptible sleep) before it says so;
# a process torn down with a large memory or a GPU context can take seconds to exit after SIGKILL.
_GIVE_UP_SECONDS = 10.0
# How long a runner whose socket closed may take to be reaped before it counts as gone without a code.
_RUNNER_EXIT_SECONDS = 1.0
# How long a run's leftovers may keep reappearing as they are frozen before the runner counts as starting them.
_RESPAWN_SECONDS = 1.0
# The warden -> runner message naming the runner's children it killed: zombies the runner must wait for.
_REAP = "reap"


def _prctl_pdeathsig(signum: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the warden still sees its pipe close


class _RunnerState:
    def __init__(self) -> None:
        self.kill_timer = KillTimer()
        self.lock = threading.Lock()
        self.held_until = 0.0
        self.running = False
        self.runs: list[tuple] = []
        self.arrived = threading.Condition(self.lock)

    def held(self) -> bool:
        """ctx.claim_is_held(): only while a run is in progress, so that a thread a run left behind sees False."""
        return self.running and clock.now() < self.held_until

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
        if message[0] == _REAP:
            _reap_killed(message[1])
            continue
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


def _reap_killed(pids: list[int]) -> None:
    """Wait for the runner's children that the warden killed: a long-lived runner would keep each as a zombie.

    Only those: a child the module started and still owns is its to wait for
    (a multiprocessing Process whose pid another wait took reads as alive).
    A killed child is a zombie until waited for, so its pid names it still.
    """
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # the processor waited for it itself


def _runner_main(conn: Connection, processor_spec: str, workspace_uri: str, input_policy: InputPolicy) -> None:
    from s3wq.host.sandbox import one_line_error, processor_traceback
    from s3wq.model import Group
    from s3wq.processors import ProcessorContext, load_processor
    from s3wq.protocol.bodies import MAX_TRACEBACK_CHARS
    from s3wq.store import open_backend

    try:
        processor = load_processor(processor_spec)
        backend = open_backend(workspace_uri)
    except S3wqError as exc:
        conn.send(("load_error", str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 -- the user's module failed to import: report it, the worker names it
        conn.send(("load_error", f"processor {processor_spec!r} failed to load: {one_line_error(exc)}"))
        return
    roots = processor_roots(processor)
    state = _RunnerState()
    # What runs from the module's import on (a warm pool, an SDK's thread) is the module's, never a run's leftover.
    own_threads = ModuleThreads()
    listener = threading.Thread(target=_listen, args=(conn, state), daemon=True, name="s3wq-host-listener")
    own_threads.add(listener)
    listener.start()
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
            worker_id=worker_id,
            attempt=attempt,
            deadline=deadline_epoch,
            group=group,
            backend=backend,
            owner=owner,
            _held=state.held,
            input_policy=input_policy,
        )
        try:
            processor(group, ctx)
            reply: tuple = ("done", ctx.input_error_count, ctx.input_errors)
        except Exception as exc:  # noqa: BLE001 -- a processor failure is an attempt, reported to the worker
            reply = ("raised", one_line_error(exc), "".join(processor_traceback(exc))[-MAX_TRACEBACK_CHARS:], own_frame(exc, roots))
        with state.lock:
            state.running = False
            state.arm()
        conn.send((*reply, leftover_threads(own_threads)))


class _Warden:
    """The host's session leader: relays between worker and runner, and alone decides when a process of the host ends."""

    def __init__(self) -> None:
        self.tree = ProcessTree()  # the subreaper of every process of the host from here on (Linux)
        self.runner_pid = 0
        self.runner_code: int | None = None
        self.baseline: set[tuple[int, int]] = set()  # processes the module started at import: its own, never a run's
        self.deadline: float | None = None  # while a run is in progress
        self.lease_over = KillTimer(signal.SIGALRM)
        self.worker: Connection | None = None
        self.runner: Connection | None = None
        self._ending = False

    def on_signal(self, signum: int, frame: object) -> None:
        self.end_host()

    def reap(self) -> None:
        """Wait for every dead child of the warden: the runner (keeping its exit code), and the orphans it inherited."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.runner_pid:
                self.runner_code = os.waitstatus_to_exitcode(status)

    def _end_members(
        self,
        select: Callable[[dict[int, Member]], Iterable[Member]],
        *,
        zombies_too: bool = False,
        settle_within: float | None = None,
    ) -> list[Member]:
        """Freeze and SIGKILL what ``select`` picks until it is gone, and return what was killed; exit, saying so, if some would not die.

        :class:`KeptAppearing` (only with ``settle_within``) goes to the caller.
        """
        try:
            killed, survivors = self.tree.end(
                select, reap=self.reap, within=_GIVE_UP_SECONDS, settle_within=settle_within, zombies_too=zombies_too
            )
        except KeptAppearing as exc:
            if settle_within is not None:
                raise
            killed, survivors, why = exc.killed, exc.killed, "new ones kept appearing"
        else:
            why = "uninterruptible sleep, or another user's process"
        if survivors:
            self.tree.end(dict.values, reap=self.reap, within=0.0)  # one round at the rest of the host: the runner, the module's own
            names = describe_leftovers([m.name for m in survivors], [])
            print(
                f"s3wq: the processor host could not end {names} in {_GIVE_UP_SECONDS:g} s ({why}): its group is left to its lease",
                file=sys.stderr,
                flush=True,
            )
            os._exit(EXIT_MEMBERS_SURVIVED)
        return killed

    def end_host(self) -> None:
        """End every process of the host, then exit: the worker is gone, the lease is over, or it asked."""
        if self._ending:
            return  # a signal while ending: the ending goes on
        self._ending = True
        if not self.tree.contained:
            os.killpg(0, signal.SIGKILL)  # no subreaper, no /proc: the process group, the warden with it
        # Everything, the module's own processes too, until none is left even as a zombie.
        self._end_members(dict.values, zombies_too=True)
        os._exit(EXIT_ENDED)

    def end_host_hard(self, error: BaseException) -> None:
        """The warden itself failed (a /proc read refused, poll refused): end the host however it still can, and exit."""
        print(f"s3wq: the processor host's warden failed ({type(error).__name__}: {error}): ending the host", file=sys.stderr, flush=True)
        try:
            # A processor may have lowered the warden's file limit (prlimit): /proc cannot be read without descriptors.
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            self._ending = False
            self.end_host()
        finally:
            # Still failing: the process group, the warden with it (a SIGKILL'd warden reads as "not shown gone").
            os.killpg(0, signal.SIGKILL)

    def _run_leftovers(self, members: dict[int, Member]) -> list[Member]:
        # Only the exact processes of "ready" are the module's: what they start later (a forkserver's child) is a run's.
        return [m for m in not_kept(members, self.baseline) if m.pid != self.runner_pid]

    def finish_run(self, reply: tuple) -> None:
        """A run ended: end what it left running, and only then tell the worker; threads left running end the host."""
        *fields, threads = reply
        host_ending = bool(threads)
        if threads and self.tree.contained:
            # A thread cannot be stopped alone, and it may be starting processes: the runner goes first, with the host.
            killed = self._end_members(dict.values, zombies_too=True)
            killed = [m for m in killed if m.pid != self.runner_pid and m.key not in self.baseline]
        else:
            try:
                killed = self._end_members(self._run_leftovers, settle_within=_RESPAWN_SECONDS)
            except KeptAppearing as exc:
                # The runner (a thread the runner could not see as the run's, a native one) keeps starting them: the host goes.
                killed = exc.killed + self._end_members(dict.values, zombies_too=True)
                host_ending = True
        # The lease timer stayed armed until the run's processes were gone: a frozen worker cannot delay that.
        self.deadline = None
        self.lease_over.disarm()
        self.tell_worker((*fields, describe_leftovers([m.name for m in killed], threads), host_ending))
        if host_ending:
            self.end_host()
        self._tell_runner_to_reap(killed)

    def _tell_runner_to_reap(self, killed: list[Member]) -> None:
        if orphans := [m.pid for m in killed if m.parent == self.runner_pid]:
            try:
                self.runner.send((_REAP, orphans))
            except OSError:
                pass  # the runner died: reaped by the watch

    def tell_worker(self, message: tuple) -> None:
        try:
            self.worker.send(message)
        except OSError:
            self.end_host()  # the worker is gone: so is its claim

    def _runner_died(self) -> None:
        over = self.deadline is not None and clock.now() >= self.deadline - _SELF_STOP_GRACE_SECONDS
        self.tell_worker(("died", self.runner_code, over))
        self.end_host()

    def _from_worker(self, runner: Connection) -> None:
        try:
            message = self.worker.recv()
        except (EOFError, OSError):
            self.end_host()  # the worker is gone: so is its claim
        if message[0] == "exit":
            self.end_host()
        if message[0] == "run":
            self.deadline = message[7] + _SELF_STOP_GRACE_SECONDS
        elif message[0] == "lease" and self.deadline is not None:  # one sent as the run ended is old news
            self.deadline = message[1] + _SELF_STOP_GRACE_SECONDS
        if self.deadline is not None:
            self.lease_over.arm(self.deadline)
        try:
            runner.send(message)
        except OSError:
            pass  # the runner died: reaped below

    def _from_runner(self, runner: Connection) -> None:
        try:
            reply = runner.recv()
        except (EOFError, OSError):
            # The runner is gone, or closed its socket: its exit code, if it comes soon.
            give_up = clock.now() + _RUNNER_EXIT_SECONDS
            while self.runner_code is None and clock.now() < give_up:
                time.sleep(0.01)
                self.reap()
            self._runner_died()
        except Exception:  # noqa: BLE001 -- bytes that are no message (a processor wrote to the runner's socket): the runner failed
            self._runner_died()
        if not _well_formed(reply):
            self._runner_died()
        if reply[0] in ("done", "raised"):
            self.finish_run(reply)
            return
        if reply[0] == "ready":
            # What the module started at import is its own; and the worker learns whether /proc shows the host.
            self.baseline = {m.key for m in self.tree.members().values() if m.pid != self.runner_pid}
            reply = ("ready", self.tree.contained)
        self.tell_worker(reply)

    def watch(self, worker: Connection, runner: Connection, runner_pid: int) -> None:
        self.worker, self.runner, self.runner_pid = worker, runner, runner_pid
        try:
            self._relay(worker, runner)
        except BaseException as exc:  # noqa: BLE001 -- whatever broke the warden, the host must not outlive it
            self.end_host_hard(exc)

    def _relay(self, worker: Connection, runner: Connection) -> None:
        while True:
            # Sliced: a wait's own timeout stands still while the machine sleeps, the timer does not; and orphans are reaped.
            timeout = _WATCH_SLICE_SECONDS if self.deadline is None else min(_WATCH_SLICE_SECONDS, max(0.0, self.deadline - clock.now()))
            ready = wait([worker, runner], timeout=timeout)
            self.reap()
            if self.deadline is not None and clock.now() >= self.deadline:
                self.end_host()
            if worker in ready:
                self._from_worker(runner)
            if runner in ready:
                self._from_runner(runner)
            # A runner whose socket a child of the processor still holds dies unseen by recv.
            if self.runner_code is not None:
                self._runner_died()


# What the runner sends, by kind: how many fields follow (a run's end ends with its leftover threads).
_RUNNER_FIELDS = {"ready": 0, "load_error": 1, "done": 3, "raised": 4}


def _well_formed(reply: object) -> bool:
    return isinstance(reply, tuple) and bool(reply) and _RUNNER_FIELDS.get(reply[0]) == len(reply) - 1


def host_main(argv: Sequence[str]) -> None:
    fd, parent_pid, processor_spec, workspace_uri, input_policy = argv
    warden = _Warden()  # before the runner exists: every process of the host is to be the warden's
    # Handled signals, not SIGKILL: the warden must live to end every process of the host.
    for signum in _ENDING_SIGNALS:
        signal.signal(signum, warden.on_signal)
    _prctl_pdeathsig(signal.SIGHUP)
    if os.getppid() != int(parent_pid):  # the worker died before we could ask to hear of it
        warden.end_host()
    worker = Connection(int(fd))
    ours, theirs = socket.socketpair()
    runner_pid = os.fork()  # no threads yet, no user code loaded: a safe fork
    if runner_pid == 0:
        worker.close()
        ours.close()
        _prctl_pdeathsig(signal.SIGKILL)  # the runner dies with its warden
        for signum in _ENDING_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        try:
            _runner_main(Connection(theirs.detach()), processor_spec, workspace_uri, policy_from_json(input_policy))
        finally:
            os._exit(0)
    theirs.close()
    warden.watch(worker, Connection(ours.detach()), runner_pid)
