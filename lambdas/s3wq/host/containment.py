"""The boundary a processor host's warden holds: every process below it, found and ended by the warden itself.

On Linux the warden makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``) before it forks the runner. A process of
the host whose parent dies -- a helper a shell started with ``&``, a daemon
that forked twice and called ``setsid`` -- is then reparented to the warden,
not to PID 1, so every process a processor starts stays a descendant of the
warden whatever it does with sessions and process groups. The warden lists
them through ``/proc/<pid>/task/<tid>/children`` (or, on a kernel without
that file, from every ``/proc/<pid>/stat``: :mod:`s3wq.host.procfs`), and
ends them in two steps.
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
import time
from collections.abc import Callable, Iterable, Sequence

from s3wq.errors import S3wqError
from s3wq.host.procfs import Member, children_files, descendants, direct_children, read_stat
from s3wq.protocol import clock
from s3wq.wording import plural

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_FIRST_PAUSE_SECONDS = 0.001
_LONGEST_PAUSE_SECONDS = 0.05
# Between freezing rounds: long enough for a fork in flight to land and an orphan to be reparented.
_FREEZE_PAUSE_SECONDS = 0.005
# Names shown in a leftovers line, and its length: the same bug must read the same every group.
_NAMES_SHOWN = 3
MAX_LEFTOVERS_CHARS = 300


def _become_subreaper() -> bool:
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self/task"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def signal_on_parent_death(signum: int) -> None:
    """Have the kernel send ``signum`` to this process when its parent dies (Linux): a parent SIGKILLed says nothing."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the socket or pipe from the parent still closes


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
        now = read_stat(member.pid)
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
        self._children_files = children_files()

    def members(self) -> dict[int, Member]:
        """Every descendant (zombies too), by pid."""
        if not self.contained:
            return {}
        return descendants(self.root, from_children_files=self._children_files)

    def end(
        self,
        select: Callable[[dict[int, Member]], Iterable[Member]],
        *,
        reap: Callable[[], None],
        within: float,
        settle_within: float | None = None,
        zombies_too: bool = False,
        on_found: Callable[[], None] | None = None,
    ) -> tuple[list[Member], list[Member]]:
        """End what ``select`` picks from the members: freeze it all (SIGSTOP), then SIGKILL it, until it is gone.

        ``on_found`` runs once, as soon as there is something to end (the
        warden stops the runner's process group with it, at once).

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
        frozen, settled = self._freeze(select, reap, until=min(give_up, clock.now() + (settle_within or within)), on_found=on_found)
        if frozen is None:
            return [], []  # nothing to end: the usual end of a run that started no process
        for member in frozen.values():
            _signal_member(member, signal.SIGKILL)
        if not settled:
            raise KeptAppearing(list(frozen.values()))
        return self._kill_until_gone(select, reap, frozen, until=give_up, zombies_too=zombies_too)

    def _freeze(
        self,
        select: Callable[[dict[int, Member]], Iterable[Member]],
        reap: Callable[[], None],
        *,
        until: float,
        on_found: Callable[[], None] | None = None,
    ) -> tuple[dict[tuple[int, int], Member] | None, bool]:
        """SIGSTOP every member ``select`` picks until two rounds, a pause apart, find none not seen before.

        A round that finds a new member (alive or a zombie: one that just
        exited may have a child on its way to the warden) is not clean; the
        pause lets a fork in flight land and an orphan be reparented. A
        first round that finds nothing at all is final (None) if the root's
        own children are still those it listed: a fork in flight has a
        parent the round would have found, and an orphan reparented while
        the round walked lands among the root's children, read again after
        the walk (its old parent may be gone by then: reaped by a process
        ``select`` leaves alone, a forkserver, say). Only such a process, or
        one of its threads, could be starting one at that moment, and no
        number of rounds tells those apart. So a run that started no process
        costs two /proc reads, not the few milliseconds of pauses.
        """
        seen: dict[tuple[int, int], Member] = {}
        clean_rounds = 0
        pause = _FIRST_PAUSE_SECONDS
        while clean_rounds < 2:
            reap()
            members = self.members()
            new = [m for m in select(members) if m.key not in seen]
            if not new and not seen and clean_rounds == 0 and self._root_children_settled(members):
                return None, True
            if on_found is not None:
                on_found()
                on_found = None
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

    def _root_children_settled(self, members: dict[int, Member]) -> bool:
        """Whether the root's children now are among those ``members`` listed: nobody was reparented to it meanwhile."""
        listed = {pid for pid, member in members.items() if member.parent == self.root}
        return set(direct_children(self.root, from_children_files=self._children_files)) <= listed

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

    def kept(member: Member | None) -> bool:
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


def describe_leftovers(processes: Sequence[str], threads: Sequence[str], *, process_count: int | None = None) -> str:
    """One line naming what a run left running: counts and names, no pids, so the same bug reads the same every group.

    ``process_count``: how many processes, where ``processes`` names only some of them.
    """
    parts = []
    if processes:
        count = len(processes) if process_count is None else process_count
        parts.append(f"{plural(count, 'process', 'processes')} ({_names(processes)})")
    if threads:
        parts.append(f"{plural(len(threads), 'thread')} ({_names(threads)})")
    return " and ".join(parts)[:MAX_LEFTOVERS_CHARS]
