"""The processor host's outermost process: the reaper, which ends whatever the warden could not.

The warden (:mod:`s3wq.host.warden`) ends a run's processes, and every
process of the host when the host must end. A processor can still end the
warden by mistake -- ``os.killpg`` on a group it shares, ``pkill python`` --
and a process of the run can leave every mark a scan could find it by: its
environment (``env -i``, ``Popen(env=...)``), its title (``setproctitle``
overwrites the environment's memory), its session (``setsid``). What it
cannot leave is its ancestry: on Linux a process whose parent dies is
reparented to the nearest *child subreaper* above it, and nothing moves it
anywhere else. The reaper is that subreaper, above the warden. It runs no
user code, it is the session leader and alone in its process group (the
warden and the runner each have a group of their own), and its only child is
the warden; so every process below it is the host's, by a rule no process
can shed, and the worker's own children are never in question.

It waits for the warden. When the warden exits -- cleanly, once it has ended
the host, or not (killed, crashed) -- the reaper ends every process still
below it, freezing them first, as the warden does. A stop request (SIGTERM
from :meth:`s3wq.host.sandbox.ProcessorHost.kill`, SIGHUP when the worker
dies) goes on to the warden, with SIGCONT in case a process of the run
stopped it; a warden that does not end within :data:`WARDEN_GRACE_SECONDS`
is ended with the rest. The reaper then writes one line to the worker, what
the warden's exit code was and what it had to end itself, and exits
:data:`EXIT_ALL_ENDED` only if nothing is left below it.

Off Linux (no subreaper, no /proc) the reaper sees nothing below it; it ends
its process group instead, which a process that left it (``setsid``)
escapes, as before.
"""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Sequence

from s3wq.host.containment import KeptAppearing, ProcessTree, signal_on_parent_death
from s3wq.host.procfs import Member
from s3wq.host.warden import warden_main
from s3wq.host.wire import (
    EXIT_ALL_ENDED,
    EXIT_SOME_SURVIVED,
    GIVE_UP_KILLING_SECONDS,
    WARDEN_GRACE_SECONDS,
    HostStart,
    ReaperReport,
    RunnerIdentity,
)
from s3wq.protocol import clock

# While the warden lives, the reaper wakes this often to reap the orphans it inherited.
_REAP_SLICE_SECONDS = 0.5
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class _Reaper:
    def __init__(self) -> None:
        self.tree = ProcessTree()  # the subreaper of every process of the host, from before the warden exists
        self.warden_pid = 0
        self.warden_exit_code: int | None = None
        self.asked_at: float | None = None  # when a stop request came
        self.runner: RunnerIdentity | None = None  # as the warden wrote it

    def on_stop(self, signum: int, frame: object) -> None:
        if self.warden_pid == 0:
            # Before the warden is known (a fork just returned, maybe): one that exists sees its parent gone, and ends.
            os._exit(EXIT_ALL_ENDED)
        if self.warden_exit_code is not None:
            return  # reaped already: its pid may be another process's by now; what it left is ended below
        if self.asked_at is None:
            self.asked_at = clock.now()
        for signum_to_send in (signal.SIGTERM, signal.SIGCONT):
            try:
                os.kill(self.warden_pid, signum_to_send)
            except ProcessLookupError:
                pass  # gone already: the wait below sees it

    def reap(self) -> None:
        """Wait for every dead child: the warden (keeping its code), and the orphans this process inherited (all the host's)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.warden_pid:
                self.warden_exit_code = os.waitstatus_to_exitcode(status)

    def wait_for_warden(self, wake_fd: int, runner_fd: int) -> None:
        """Until the warden has exited, or a stop request has waited WARDEN_GRACE_SECONDS for it; hear of the runner meanwhile."""
        try:
            warden = os.pidfd_open(self.warden_pid)
        except (AttributeError, OSError):
            warden = None  # no pidfd (a kernel before 5.3, macOS): woken by the slice alone
        while True:
            self.reap()
            if self.warden_exit_code is not None:
                return
            timeout = _REAP_SLICE_SECONDS
            if self.asked_at is not None:
                timeout = self.asked_at + WARDEN_GRACE_SECONDS - clock.now()
                if timeout <= 0:
                    return
            try:
                watched = [fd for fd in (warden, wake_fd, runner_fd if self.runner is None else None) if fd is not None]
                readable, _, _ = select.select(watched, [], [], min(timeout, _REAP_SLICE_SECONDS))
            except InterruptedError:
                continue
            if wake_fd in readable:
                os.read(wake_fd, 512)  # the signal's byte: its handler has run
            if runner_fd in readable and self.runner is None:
                self.runner = RunnerIdentity.read(runner_fd)

    def end_the_rest(self) -> tuple[list[Member], list[Member]]:
        """Freeze and kill whatever is still below the reaper: the warden if it would not end, and all it left."""
        if not self.tree.contained:
            os.killpg(0, signal.SIGKILL)  # no subreaper, no /proc: the process group, the reaper with it
        try:
            return self.tree.end(dict.values, reap=self.reap, within=GIVE_UP_KILLING_SECONDS, zombies_too=True)
        except KeptAppearing as exc:  # new ones still appearing when the time was up: counted as survivors
            return exc.killed, exc.killed


def _report(fd: int, warden_exit_code: int | None, ended: list[Member], survived: list[Member], runner: RunnerIdentity) -> None:
    """One line for the worker: how the warden ended, and what the reaper ended (or could not) itself.

    The runner is left out of what was ended: it dies with its warden (PR_SET_PDEATHSIG), and is not what a run left.
    """
    ended_names = [m.name for m in ended if m.alive and m.key != runner.key]
    report = ReaperReport.of(warden_exit_code, ended_names, [m.name for m in survived])
    try:
        os.write(fd, report.line())
    except OSError:
        pass  # the worker is gone: the exit code still says whether every process ended


def reaper_main(argv: Sequence[str]) -> None:
    """Become the host's subreaper, fork the warden, and end what it leaves; ``argv``: a :class:`HostStart`."""
    start = HostStart.from_argv(argv)
    status_fd = start.report_fd
    reaper = _Reaper()  # before the warden exists: every process of the host is to be below the reaper
    wake_read, wake_write = os.pipe()
    runner_read, runner_write = os.pipe()
    os.set_blocking(runner_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    for signum in _STOP_SIGNALS:
        signal.signal(signum, reaper.on_stop)
    signal_on_parent_death(signal.SIGHUP)
    if os.getppid() != start.worker_pid:  # the worker died before we could ask to hear of it
        os._exit(EXIT_ALL_ENDED)
    reaper_pid = os.getpid()
    reaper.warden_pid = os.fork()  # no threads, no user code loaded: a safe fork
    if reaper.warden_pid == 0:
        for fd in (status_fd, wake_read, wake_write, runner_read):
            os.close(fd)
        signal.set_wakeup_fd(-1)
        for signum in _STOP_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        try:
            if reaper.tree.contained:
                os.setpgid(0, 0)  # a killpg of the warden's group does not reach the reaper
            warden_main(start, parent_pid=reaper_pid, tell_runner=runner_write)
        finally:
            os._exit(EXIT_ALL_ENDED)
    os.close(runner_write)
    os.close(start.worker_fd)  # the worker's socket is the warden's: its end closes when the warden does
    reaper.wait_for_warden(wake_read, runner_read)
    if reaper.runner is None:
        reaper.runner = RunnerIdentity.read(runner_read)  # written before the warden could die, or never
    ended, survived = reaper.end_the_rest()
    _report(status_fd, reaper.warden_exit_code, ended, survived, reaper.runner)
    os._exit(EXIT_SOME_SURVIVED if any(m.alive for m in survived) else EXIT_ALL_ENDED)
