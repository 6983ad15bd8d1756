"""The boundary a processor host's warden holds: every process below it, found and ended by the warden itself; and the threads a run left.

On Linux the warden makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``) before it forks the runner. A process of
the host whose parent dies -- a helper a shell started with ``&``, a daemon
that forked twice and called ``setsid`` -- is then reparented to the warden,
not to PID 1, so every process a processor starts stays a descendant of the
warden whatever it does with sessions and process groups. The warden lists
them through ``/proc/<pid>/task/<tid>/children`` (or, on a kernel without
that file, from every ``/proc/<pid>/stat``), and ends them in two steps.
First it freezes them: SIGSTOP to every member found, listing again until
two rounds a few milliseconds apart find nobody new, since a list read while
members fork or exit can miss a child on its way (a fork chain, an orphan
being reparented), and a stopped process forks no more. Then SIGKILL to all
of them (it works on stopped processes), and reaping, until none is left.
A /proc read that fails for any reason but "no such process" (EMFILE, say)
raises: a process the warden could not see is never taken for gone.

A process is named by its pid *and* its start time (field 22 of
``/proc/<pid>/stat``), and signalled through a pidfd opened and checked
against that start time: a pid that its parent reaped and the system gave to
another process meanwhile is never signalled.

What the boundary does not hold: a process that another service starts on
the processor's behalf (``systemd-run``, ``docker exec``, ``ssh``, a request
to a daemon already running) is not a descendant; a setuid program (``sudo``)
runs as another user and cannot be signalled; a process in uninterruptible
sleep (a hung mount, a GPU driver) dies only when its call returns (SIGKILL
is pending, so it runs no more of its own code); a process that leaves the
pid namespace's view of /proc is not seen.

Elsewhere (macOS: no subreaper, no /proc) :class:`ProcessTree` sees nothing
and ``contained`` is False: the host then ends its process group, as it
always did, and a process that left the group (``setsid``) escapes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import thread as _futures_thread
from dataclasses import dataclass
from types import FrameType

from s3wq.errors import S3wqError
from s3wq.protocol import clock
from s3wq.wording import plural

_PR_SET_CHILD_SUBREAPER = 36
_FIRST_PAUSE_SECONDS = 0.001
_LONGEST_PAUSE_SECONDS = 0.05
# Between freezing rounds: long enough for a fork in flight to land and an orphan to be reparented.
_FREEZE_PAUSE_SECONDS = 0.005
# Names shown in a leftovers line, and its length: the same bug must read the same every group.
_NAMES_SHOWN = 3
MAX_LEFTOVERS_CHARS = 300
# A thread that is just returning, or a pool worker just handed an item, settles within this.
_THREAD_SETTLE_SECONDS = 0.05
_POOL_WORKER_CODE = _futures_thread._worker.__code__
_POOL_JOB_CODE = _futures_thread._WorkItem.run.__code__
# What reading /proc/<pid>/... raises once the process is gone (and reaped); nothing else means gone.
_GONE = (FileNotFoundError, ProcessLookupError)


@dataclass(frozen=True)
class Member:
    """A process below the warden, as /proc showed it."""

    pid: int
    parent: int
    started: int  # clock ticks after boot: with the pid, names one process for good
    name: str
    alive: bool  # False once every thread of it is a zombie: it runs nothing, and only its parent's wait removes it

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.started)


def _name_and_fields(path: str) -> tuple[str, list[str]] | None:
    try:
        with open(path) as f:
            text = f.read()
    except _GONE:
        return None  # gone meanwhile; any other error (EMFILE, ENFILE) raises: unseen is not gone
    # The name sits between the first "(" and the last ")": it may hold spaces and parentheses itself.
    head, rest = text.rsplit(")", 1)
    return head.split("(", 1)[1], rest.split()


def _any_thread_running(pid: int) -> bool:
    """Whether a thread of ``pid`` is not yet a zombie: a process whose main thread exited first shows "Z" until they all have."""
    try:
        tasks = [task for task in os.listdir(f"/proc/{pid}/task") if task != str(pid)]
    except _GONE:
        return False
    return any((read := _name_and_fields(f"/proc/{pid}/task/{task}/stat")) is not None and read[1][0] not in "ZX" for task in tasks)


def _read_stat(pid: int) -> Member | None:
    read = _name_and_fields(f"/proc/{pid}/stat")
    if read is None:
        return None
    name, fields = read
    return Member(pid, int(fields[1]), int(fields[19]), name, fields[0] not in "ZX" or _any_thread_running(pid))


def running_children(pid: int) -> dict[int, str]:
    """``pid``'s direct children that still run, with their names (Linux: /proc; none are seen elsewhere). A zombie has stopped."""
    children = {}
    for child in ProcessTree.children_of(pid):
        member = _read_stat(child)
        if member is not None and member.parent == pid and member.alive:
            children[child] = member.name
    return children


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self/task"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _signal_member(member: Member, signum: int) -> None:
    """Signal ``member`` only if its pid still names the process that was listed."""
    try:
        pidfd: int | None = os.pidfd_open(member.pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        pidfd = None  # no pidfd (a kernel before 5.3): a plain signal, checked just before
    try:
        # Read after the pidfd was opened: the same start time means the pidfd holds the listed process.
        now = _read_stat(member.pid)
        if now is None or now.started != member.started:
            return
        if pidfd is None:
            os.kill(member.pid, signum)
        else:
            signal.pidfd_send_signal(pidfd, signum)
    except (ProcessLookupError, PermissionError):
        pass  # gone already; or another user's (setuid) process, which the next round finds again
    finally:
        if pidfd is not None:
            os.close(pidfd)


class ProcessTree:
    """The processes below this one, whose subreaper it made itself (Linux); empty where they cannot be seen."""

    def __init__(self) -> None:
        self.root = os.getpid()
        self.contained = _become_subreaper()
        # CONFIG_PROC_CHILDREN: without it, parents are read from every process's stat.
        self._children_files = os.path.exists(f"/proc/self/task/{self.root}/children")

    def members(self) -> dict[int, Member]:
        """Every descendant (zombies too), by pid."""
        if not self.contained:
            return {}
        found: dict[int, Member] = {}
        children_of = self.children_of if self._children_files else self._children_from_stats()
        pending = [self.root]
        while pending:
            parent = pending.pop()
            for pid in children_of(parent):
                member = _read_stat(pid)
                # The parent checked: a pid reaped and reused between the two reads is another process.
                if member is not None and member.parent == parent and pid not in found:
                    found[pid] = member
                    pending.append(pid)
        return found

    @staticmethod
    def children_of(pid: int) -> list[int]:
        children: list[int] = []
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except _GONE:
            return children
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    children += [int(child) for child in f.read().split()]
            except _GONE:
                continue
        return children

    @staticmethod
    def _children_from_stats() -> Callable[[int], list[int]]:
        by_parent: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (member := _read_stat(int(entry))) is not None:
                by_parent.setdefault(member.parent, []).append(member.pid)
        return lambda pid: by_parent.get(pid, [])

    def end(
        self,
        select: Callable[[dict[int, Member]], Iterable[Member]],
        *,
        reap: Callable[[], None],
        within: float,
        settle_within: float | None = None,
        zombies_too: bool = False,
    ) -> tuple[list[Member], list[Member]]:
        """End what ``select`` picks from the members: freeze it all (SIGSTOP), then SIGKILL it, until it is gone.

        ``reap`` waits for the warden's own dead children; with
        ``zombies_too`` the killing goes on until it has reaped every one of
        them (each zombie ends up the warden's once its parent is dead), so
        that no pid of them is left at all. If new members still turn up
        after ``settle_within`` seconds (``within`` by default), something
        ``select`` leaves alone is starting them: what was frozen is killed,
        and :class:`KeptAppearing` raised. Returns what was killed, and what
        was still alive after ``within`` seconds (it would not die).
        """
        give_up = clock.now() + within
        frozen, settled = self._freeze(select, reap, until=min(give_up, clock.now() + (settle_within or within)))
        for member in frozen.values():
            _signal_member(member, signal.SIGKILL)
        if not settled:
            raise KeptAppearing(list(frozen.values()))
        return self._kill_until_gone(select, reap, frozen, until=give_up, zombies_too=zombies_too)

    def _freeze(
        self, select: Callable[[dict[int, Member]], Iterable[Member]], reap: Callable[[], None], *, until: float
    ) -> tuple[dict[tuple[int, int], Member], bool]:
        """SIGSTOP every member ``select`` picks until two rounds, a pause apart, find none not seen before.

        A round that finds a new member (alive or a zombie: one that just
        exited may have a child on its way to the warden) is not clean; the
        pause lets a fork in flight land and an orphan be reparented.
        """
        seen: dict[tuple[int, int], Member] = {}
        clean_rounds = 0
        pause = _FIRST_PAUSE_SECONDS
        while clean_rounds < 2:
            reap()
            new = [m for m in select(self.members()) if m.key not in seen]
            for member in new:
                seen[member.key] = member
                if member.alive:
                    _signal_member(member, signal.SIGSTOP)
            clean_rounds = 0 if new else clean_rounds + 1
            if new and clock.now() > until:
                return {key: m for key, m in seen.items() if m.alive}, False
            time.sleep(pause)
            pause = min(2 * pause, _FREEZE_PAUSE_SECONDS)
        return {key: m for key, m in seen.items() if m.alive}, True

    def _kill_until_gone(
        self,
        select: Callable[[dict[int, Member]], Iterable[Member]],
        reap: Callable[[], None],
        frozen: dict[tuple[int, int], Member],
        *,
        until: float,
        zombies_too: bool,
    ) -> tuple[list[Member], list[Member]]:
        """SIGKILL what is still alive until two rounds find none of it (nor, ``zombies_too``, any zombie of it)."""
        killed = dict(frozen)
        pause = _FIRST_PAUSE_SECONDS
        clean_rounds = 0
        while clean_rounds < 2:
            reap()
            chosen = list(select(self.members()))
            alive = [m for m in chosen if m.alive]
            if not (chosen if zombies_too else alive):
                clean_rounds += 1
                time.sleep(_FIRST_PAUSE_SECONDS)
                continue
            clean_rounds = 0
            for member in alive:
                _signal_member(member, signal.SIGKILL)
                killed.setdefault(member.key, member)
            if clock.now() > until:
                return list(killed.values()), alive or chosen
            time.sleep(pause)
            pause = min(2 * pause, _LONGEST_PAUSE_SECONDS)
        return list(killed.values()), []


class KeptAppearing(S3wqError):
    """New processes kept appearing while the warden froze a run's: something it left alone (the runner) starts them."""

    def __init__(self, killed: list[Member]):
        super().__init__(f"{plural(len(killed), 'process', 'processes')} frozen and killed, and still more appearing")
        self.killed = killed


def outside(members: dict[int, Member], keep: set[tuple[int, int]]) -> list[Member]:
    """The members neither in ``keep`` nor below one of them (what a kept process starts is its own)."""

    def kept(member: Member) -> bool:
        while member is not None:
            if member.key in keep:
                return True
            member = members.get(member.parent)
        return False

    return [m for m in members.values() if not kept(m)]


def not_kept(members: dict[int, Member], keep: set[tuple[int, int]]) -> list[Member]:
    """The members not in ``keep`` (pid and start time): a process that a kept one starts later is not kept."""
    return [m for m in members.values() if m.key not in keep]


def _names(names: Sequence[str]) -> str:
    distinct = sorted(set(names))
    return ", ".join(distinct[:_NAMES_SHOWN]) + (", ..." if len(distinct) > _NAMES_SHOWN else "")


def describe_leftovers(processes: Sequence[str], threads: Sequence[str]) -> str:
    """One line naming what a run left running: counts and names, no pids, so the same bug reads the same every group."""
    parts = []
    if processes:
        parts.append(f"{plural(len(processes), 'process', 'processes')} ({_names(processes)})")
    if threads:
        parts.append(f"{plural(len(threads), 'thread')} ({_names(threads)})")
    return " and ".join(parts)[:MAX_LEFTOVERS_CHARS]


# --- threads ---------------------------------------------------------------------------------------------------


def _pool_worker_frame(frame: FrameType | None) -> FrameType | None:
    """The frame of a stdlib ThreadPoolExecutor's worker loop in a thread's stack, if it is one of a pool's threads."""
    while frame is not None and frame.f_code is not _POOL_WORKER_CODE:
        frame = frame.f_back
    return frame


def _pool_job(frame: FrameType | None) -> object | None:
    """The work item a pool's thread is running (None: not a pool's thread, or between jobs)."""
    loop = _pool_worker_frame(frame)
    return None if loop is None else loop.f_locals.get("work_item")


def idle_pool_worker(frame: FrameType | None) -> bool:
    """Whether a thread is a stdlib ThreadPoolExecutor worker waiting on its work queue, with nothing queued.

    Such a thread runs nothing of any run, so it is not a leftover: a pool
    the module fills lazily (its threads start in the first runs that submit
    work) must not cost a new host and a failed attempt per group, nor hold
    up every in-process run until its lease ends. Idle: the pool's
    ``_worker`` loop holds no work item whose future is pending, and the
    queue is empty; a worker still tidying up after a job whose future is
    done (the processor's ``result()`` came back first) is idle too. A work
    item just popped but not yet stored is in neither: callers look twice, a
    moment apart.
    """
    finished = True
    while frame is not None and frame.f_code is not _POOL_WORKER_CODE:
        if frame.f_code is _POOL_JOB_CODE:
            job = frame.f_locals.get("self")  # None once the job has set its exception
            finished = job is None or job.future.done()
        frame = frame.f_back
    if frame is None:
        return False
    local = frame.f_locals
    job, queue = local.get("work_item"), local.get("work_queue")
    return finished and (job is None or job.future.done()) and queue is not None and queue.empty()


class ModuleThreads:
    """The threads that ran before any run -- the module's own from its import (a warm pool, an SDK's), and s3wq's."""

    def __init__(self) -> None:
        frames = sys._current_frames()
        self.threads = set(threading.enumerate())
        # The job each pool thread of the module was running then (a loop it keeps running is its own).
        self._jobs = {thread: _pool_job(frames.get(thread.ident)) for thread in self.threads}

    def add(self, thread: threading.Thread) -> None:
        self.threads.add(thread)

    def at_own_work(self, thread: threading.Thread, frame: FrameType | None) -> bool:
        """Whether ``thread`` is one of these doing what it did then: its own loop, or the pool job it had then.

        A pool thread of the module running another job runs one a run
        submitted, most likely, and left running.
        """
        if thread not in self.threads:
            return False
        if _pool_worker_frame(frame) is None:
            return True
        job = _pool_job(frame)
        return job is not None and job is self._jobs.get(thread)


def _threads_of_runs(own: ModuleThreads) -> tuple[list[threading.Thread], bool]:
    """Threads at work that are not at the module's own (nor s3wq's), and whether an idle pool worker was passed over."""
    frames = sys._current_frames()
    busy, pooled = [], False
    for thread in threading.enumerate():
        frame = frames.get(thread.ident)
        # A native thread that once called into Python stays listed as a dummy forever: not ours to judge.
        if thread is threading.current_thread() or isinstance(thread, threading._DummyThread) or not thread.is_alive():
            continue
        if own.at_own_work(thread, frame):
            continue
        if idle_pool_worker(frame):
            pooled = True
        else:
            busy.append(thread)
    return busy, pooled


def leftover_threads(own: ModuleThreads) -> list[str]:
    """The names of the threads a run left at work: not ``own``'s at their own work, nor idle in a pool.

    A thread cannot be stopped alone: a process whose run left one must end.
    """
    busy, pooled = _threads_of_runs(own)
    if not busy and not pooled:
        return []
    give_up = time.monotonic() + _THREAD_SETTLE_SECONDS
    for thread in busy:
        if thread not in own.threads:  # a pool thread of the module goes back to its queue, not away
            thread.join(max(0.0, give_up - time.monotonic()))
    time.sleep(max(0.001, give_up - time.monotonic()) if busy else 0.001)  # and the GIL to a pool worker holding an item not yet stored
    return sorted(thread.name for thread in _threads_of_runs(own)[0])
