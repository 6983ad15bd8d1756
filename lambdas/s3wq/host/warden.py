"""The processor host's middle process: the warden, which ends the host's processes, and forks the runner.

The host is three processes in a session of their own: the *reaper*
(:mod:`s3wq.host.reaper`), which ends whatever the warden leaves; the
*warden* it forks, which runs no user code and holds no GIL for long; and
the *runner* the warden forks (:mod:`s3wq.host.runner_process`), which loads
the processor and runs groups. Each is alone in its process group. The
warden relays messages between the worker
(:class:`s3wq.host.sandbox.ProcessorHost`) and the runner. It ends the
host's processes (see :mod:`s3wq.host.containment`): a run's leftovers when
the run ends, before the worker hears of its end; and every process of the
host when the worker is gone, when the lease it last heard of has run out (a
kernel timer on the suspend-aware clock resumes it with SIGCONT, so a
process of the run that stopped it cannot delay that), when the worker asks,
or when the runner dies. Its exit code says whether they all died.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from multiprocessing.connection import Connection, wait
from typing import NoReturn

from s3wq.host.containment import KeptAppearing, ProcessTree, describe_leftovers, not_kept, signal_on_parent_death
from s3wq.host.killtimer import KillTimer
from s3wq.host.procfs import Member, read_stat
from s3wq.host.runner_process import runner_main
from s3wq.host.wire import (
    EXIT_ALL_ENDED,
    EXIT_SOME_SURVIVED,
    FROM_RUNNER,
    GIVE_UP_KILLING_SECONDS,
    SELF_STOP_GRACE_SECONDS,
    Exit,
    HostReady,
    HostStart,
    Lease,
    Loaded,
    LoadFailed,
    Reap,
    Run,
    RunCleanedUp,
    RunEnded,
    RunnerDied,
    RunnerIdentity,
    receive,
    send,
)
from s3wq.protocol import clock

_WATCH_SLICE_SECONDS = 0.5

# Signals that end the host: the reaper's death (PR_SET_PDEATHSIG), a kill request (the reaper passes the worker's on).
_ENDING_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
# The lease timer's signals: SIGCONT, which the kernel delivers to a stopped process by resuming it, so that a process
# of the run that stopped the warden (SIGSTOP) cannot hold the host past the lease; SIGALRM where there is no kernel
# timer on the lease clock (setitimer sends it). Repeated every _LEASE_TIMER_REPEAT_SECONDS after the deadline, in
# case something stops the warden again as it resumes.
_LEASE_TIMER_SIGNALS = (signal.SIGCONT, signal.SIGALRM)
_LEASE_TIMER_REPEAT_SECONDS = 0.1
# How long a runner whose socket closed may take to be reaped before it counts as gone without a code.
_RUNNER_EXIT_SECONDS = 1.0
# How long a run's leftovers may keep reappearing as they are frozen before the runner counts as starting them.
_RESPAWN_SECONDS = 1.0
# How long after its group is resumed a runner that starts no new process is taken for starting none. Paid only by a
# run that left processes; long enough for a resumed thread to be scheduled on a loaded machine (at 20 ms, 15
# runnable tasks on 2 cores let a forking raw thread through now and then, and the kept host's children overlapped
# the retry).
_RESUMED_WATCH_SECONDS = 0.25


class _Warden:
    """The host's session leader: relays between worker and runner, and alone decides when a process of the host ends."""

    def __init__(self) -> None:
        self.tree = ProcessTree()  # the subreaper of every process of the host from here on (Linux)
        self.runner_pid = 0
        self.runner_code: int | None = None
        self.baseline: set[tuple[int, int]] = set()  # processes the module started at import: its own, never a run's
        self.deadline: float | None = None  # while a run is in progress
        self.lease_over = KillTimer(signal.SIGCONT)
        self.worker: Connection | None = None
        self.runner_group_stopped = False  # by _stop_runner_group, until a run's leftovers are gone
        self.runner: Connection | None = None
        self._ending = False

    def on_signal(self, signum: int, frame: object) -> None:
        self.end_host()

    def on_lease_timer(self, signum: int, frame: object) -> None:
        # SIGCONT also comes from whoever resumes a stopped warden (ProcessorHost.kill does): only the deadline ends the host.
        if self.deadline is not None and clock.now() >= self.deadline:
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
                select,
                reap=self.reap,
                within=GIVE_UP_KILLING_SECONDS,
                settle_within=settle_within,
                zombies_too=zombies_too,
                on_found=self._stop_runner_group,
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
                f"s3wq: the processor host could not end {names} in {GIVE_UP_KILLING_SECONDS:g} s ({why}): its group is left to its lease",
                file=sys.stderr,
                flush=True,
            )
            os._exit(EXIT_SOME_SURVIVED)
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
        os._exit(EXIT_ALL_ENDED)

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

    def keep(self, pids: Sequence[int]) -> None:
        """Count as the module's own the runner's children of ``pids`` (multiprocessing's forkserver and resource tracker).

        multiprocessing starts them at first use, inside a run, and keeps them
        for the rest of the process: killed as a run's leftovers, every run
        that used a pool would fail, and the next would find them dead. Only
        a live direct child of the runner qualifies; what they start later (a
        pool's workers) is a run's, as for every process of the module.
        """
        for pid in pids:
            member = read_stat(pid)
            if member is not None and member.parent == self.runner_pid and member.alive:
                self.baseline.add(member.key)

    def _stop_runner_group(self) -> None:
        """SIGSTOP the runner's process group, every member of it at once: what its run started there forks no more.

        A fork chain (each generation forks one child and exits) outruns a
        freeze that stops its members one by one in rounds, on a loaded
        machine for seconds; the kernel stops a group in one call. What left
        the group (``setsid``) is frozen in rounds as before.
        """
        if self.tree.contained and self.runner_code is None:
            try:
                os.killpg(self.runner_pid, signal.SIGSTOP)
                self.runner_group_stopped = True
            except (ProcessLookupError, PermissionError):
                pass  # gone: the rounds find what is left

    def _resume_runner_group(self) -> bool:
        """SIGCONT what is left of the runner's group once a run's leftovers are gone (the runner, the module's own); whether it was stopped."""
        if not self.runner_group_stopped:
            return False
        self.runner_group_stopped = False
        try:
            os.killpg(self.runner_pid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass
        return True

    def _runner_starts_more(self) -> bool:
        """Whether new processes of no run turn up just after the runner was resumed: one of its threads is starting them.

        With its group stopped the runner forked no more while its run's
        leftovers were ended; a thread the runner could not see as the run's
        (a raw or native one) that keeps starting processes starts the next
        as soon as it is scheduled again.
        """
        give_up = clock.now() + _RESUMED_WATCH_SECONDS
        while clock.now() < give_up:
            self.reap()
            # Alive: what was just killed lingers as zombies until the runner waits for them.
            if any(member.alive for member in self._run_leftovers(self.tree.members())):
                return True
            time.sleep(0.005)
        return False

    def _runs_own(self, killed: list[Member]) -> list[Member]:
        """What of ``killed`` the run left: not the runner, nor the module's own."""
        return [m for m in killed if m.pid != self.runner_pid and m.key not in self.baseline]

    def finish_run(self, finished: RunEnded) -> None:
        """A run ended: end what it left running, and only then tell the worker; threads left running end the host."""
        threads = finished.threads
        self.keep(finished.kept_pids)
        host_ending = bool(threads)
        if threads and self.tree.contained:
            # A thread cannot be stopped alone, and it may be starting processes: the runner goes first, with the host.
            killed = self._runs_own(self._end_members(dict.values, zombies_too=True))
        else:
            try:
                killed = self._end_members(self._run_leftovers, settle_within=_RESPAWN_SECONDS)
            except KeptAppearing as exc:
                # The runner (a thread the runner could not see as the run's, a native one) keeps starting them: the host goes.
                killed = exc.killed + self._runs_own(self._end_members(dict.values, zombies_too=True))
                host_ending = True
            if self._resume_runner_group() and not host_ending and self._runner_starts_more():
                # A thread of the runner it could not name (a raw or native one) starts them: the host goes.
                killed += self._runs_own(self._end_members(dict.values, zombies_too=True))
                host_ending = True
        # The lease timer stayed armed until the run's processes were gone: a frozen worker cannot delay that.
        self.deadline = None
        self.lease_over.disarm()
        self.tell_worker(RunCleanedUp(finished.end, describe_leftovers([m.name for m in killed], threads), host_ending))
        if host_ending:
            self.end_host()
        self._tell_runner_to_reap(killed)

    def _tell_runner_to_reap(self, killed: list[Member]) -> None:
        if orphans := [m.pid for m in killed if m.parent == self.runner_pid]:
            assert self.runner is not None
            try:
                send(self.runner, Reap(tuple(orphans)))
            except OSError:
                pass  # the runner died: reaped by the watch

    def tell_worker(self, message: HostReady | LoadFailed | RunCleanedUp) -> None:
        assert self.worker is not None
        try:
            send(self.worker, message)
        except OSError:
            self.end_host()  # the worker is gone: so is its claim

    def _runner_died(self) -> NoReturn:
        """The runner is gone (it crashed, or a processor killed its own process group): end the host, then say what its run left."""
        over = self.deadline is not None and clock.now() >= self.deadline - SELF_STOP_GRACE_SECONDS
        self._ending = True
        left = describe_leftovers([m.name for m in self._runs_own(self._end_members(dict.values, zombies_too=True))], [])
        assert self.worker is not None
        try:
            send(self.worker, RunnerDied(self.runner_code, over, left))
        except OSError:
            pass  # the worker is gone: the host is ended all the same
        os._exit(EXIT_ALL_ENDED)

    def _from_worker(self, runner: Connection) -> None:
        assert self.worker is not None
        try:
            message = receive(self.worker)
        except (EOFError, OSError):
            self.end_host()  # the worker is gone: so is its claim
        if isinstance(message, Exit):
            self.end_host()
        if isinstance(message, Run):
            self.deadline = message.held_until + SELF_STOP_GRACE_SECONDS
        elif isinstance(message, Lease) and self.deadline is not None:  # one sent as the run ended is old news
            self.deadline = message.held_until + SELF_STOP_GRACE_SECONDS
        if self.deadline is not None:
            self.lease_over.arm(self.deadline, repeat=_LEASE_TIMER_REPEAT_SECONDS)
        try:
            send(runner, message)
        except OSError:
            pass  # the runner died: reaped below

    def _from_runner(self, runner: Connection) -> None:
        try:
            reply = receive(runner)
        except (EOFError, OSError):
            # The runner is gone, or closed its socket: its exit code, if it comes soon.
            give_up = clock.now() + _RUNNER_EXIT_SECONDS
            while self.runner_code is None and clock.now() < give_up:
                time.sleep(0.01)
                self.reap()
            self._runner_died()
        except Exception:  # noqa: BLE001 -- bytes that are no message (a processor wrote to the runner's socket): the runner failed
            self._runner_died()
        if not isinstance(reply, FROM_RUNNER):
            self._runner_died()
        if isinstance(reply, RunEnded):
            self.finish_run(reply)
            return
        if isinstance(reply, Loaded):
            # What the module started at import is its own; and the worker learns whether /proc shows the host.
            self.baseline = {m.key for m in self.tree.members().values() if m.pid != self.runner_pid}
            reply = HostReady(self.tree.contained)
        self.tell_worker(reply)  # HostReady, or LoadFailed as the runner said it

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


def warden_main(start: HostStart, *, parent_pid: int, tell_runner: int | None = None) -> None:
    """The warden, below the reaper (``parent_pid``): fork the runner, tell ``tell_runner`` who it is, and watch."""
    warden = _Warden()  # before the runner exists: every process of the host is to be the warden's
    # Handled signals, not SIGKILL: the warden must live to end every process of the host.
    for signum in _ENDING_SIGNALS:
        signal.signal(signum, warden.on_signal)
    for signum in _LEASE_TIMER_SIGNALS:
        signal.signal(signum, warden.on_lease_timer)
    signal_on_parent_death(signal.SIGHUP)
    if os.getppid() != parent_pid:  # the reaper died before we could ask to hear of it
        warden.end_host()
    worker = Connection(start.worker_fd)
    ours, theirs = socket.socketpair()
    runner_pid = os.fork()  # no threads yet, no user code loaded: a safe fork
    if runner_pid == 0:
        worker.close()
        ours.close()
        if tell_runner is not None:
            os.close(tell_runner)
        signal_on_parent_death(signal.SIGKILL)  # the runner dies with its warden
        for signum in (*_ENDING_SIGNALS, *_LEASE_TIMER_SIGNALS):
            signal.signal(signum, signal.SIG_DFL)
        if warden.tree.contained:
            # A processor's os.killpg(0, ...) -- "end everything I started" -- ends the runner's group, not the warden.
            os.setpgid(0, 0)
        try:
            runner_main(Connection(theirs.detach()), start.processor_spec, start.workspace_uri, start.input_policy)
        finally:
            os._exit(0)
    theirs.close()
    if tell_runner is not None:
        runner = read_stat(runner_pid)
        try:
            os.write(tell_runner, RunnerIdentity(runner_pid, runner.started if runner else 0).line())
        finally:
            os.close(tell_runner)
    warden.watch(worker, Connection(ours.detach()), runner_pid)
