"""Reading processes from Linux's /proc: who is whose child, named by pid and start time, and whether it still runs.

A process is named by its pid *and* its start time (field 22 of
``/proc/<pid>/stat``): a pid that its parent reaped and the system gave to
another process meanwhile names another process. Children are listed through
``/proc/<pid>/task/<tid>/children`` or, on a kernel without that file, from
every ``/proc/<pid>/stat``. A read that fails for any reason but "no such
process" (EMFILE, say) raises: a process that could not be seen is never
taken for gone. Elsewhere (macOS: no /proc) nothing is seen.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

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


def read_stat(pid: int) -> Member | None:
    """``pid`` as /proc shows it now; None if it is gone."""
    read = _name_and_fields(f"/proc/{pid}/stat")
    if read is None:
        return None
    name, fields = read
    return Member(pid, int(fields[1]), int(fields[19]), name, fields[0] not in "ZX" or _any_thread_running(pid))


def children_of(pid: int) -> list[int]:
    """The pids of ``pid``'s direct children, from every thread's children file (CONFIG_PROC_CHILDREN)."""
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


def children_files() -> bool:
    """Whether this kernel lists a thread's children (CONFIG_PROC_CHILDREN); without it, parents are read from every stat."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def _children_from_stats() -> Callable[[int], list[int]]:
    by_parent: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (member := read_stat(int(entry))) is not None:
            by_parent.setdefault(member.parent, []).append(member.pid)
    return lambda pid: by_parent.get(pid, [])


def direct_children(pid: int, *, from_children_files: bool) -> list[int]:
    """The pids of ``pid``'s children, from its children files or, on a kernel without them, from every stat."""
    return children_of(pid) if from_children_files else _children_from_stats()(pid)


def descendants(root: int, *, from_children_files: bool) -> dict[int, Member]:
    """Every process below ``root`` (zombies too), by pid."""
    found: dict[int, Member] = {}
    listed = children_of if from_children_files else _children_from_stats()
    pending = [root]
    while pending:
        parent = pending.pop()
        for pid in listed(parent):
            member = read_stat(pid)
            # The parent checked: a pid reaped and reused between the two reads is another process.
            if member is not None and member.parent == parent and pid not in found:
                found[pid] = member
                pending.append(pid)
    return found


def running_children(pid: int) -> dict[int, str]:
    """``pid``'s direct children that still run, with their names (Linux: /proc; none are seen elsewhere). A zombie has stopped."""
    children = {}
    for child in children_of(pid):
        member = read_stat(child)
        if member is not None and member.parent == pid and member.alive:
            children[child] = member.name
    return children


def _oom_kill_counters() -> list[str]:
    """Where the kernel counts OOM kills of this process's memory cgroup (v2 memory.events, v1 memory.oom_control), likeliest first."""
    paths = []
    try:
        with open("/proc/self/cgroup") as cgroups:
            for line in cgroups:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    paths += [f"/sys/fs/cgroup{path}/memory.events", f"/sys/fs/cgroup/unified{path}/memory.events"]
                elif "memory" in controllers.split(","):
                    paths.append(f"/sys/fs/cgroup/memory{path}/memory.oom_control")
    except (OSError, ValueError):
        pass
    return [*paths, "/proc/vmstat"]


def oom_kills() -> int | None:
    """How many processes the kernel's OOM killer has killed: in this process's memory cgroup, else since boot; None where not told.

    Read before a run and after a process of it died of SIGKILL, it tells an
    out-of-memory kill (the count rose) from a SIGKILL another process sent
    (it did not). The cgroup's own count (a process of the host is in the
    worker's cgroup, and the kernel counts a kill in its victim's) is not
    moved by other cgroups' kills; /proc/vmstat, the fallback, is the
    machine's.
    """
    for path in _oom_kill_counters():
        try:
            with open(path) as counters:
                for line in counters:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except (OSError, ValueError):
            continue
    return None
