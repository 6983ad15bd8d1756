"""What a dead warden left: the processes of its host that nothing would end but the worker, their subreaper.

Where the host adopts orphans (``s3wq work``, Lambda) the worker makes itself
the child subreaper of what a dead warden leaves, and tells those processes
from its other children by a mark every host it starts carries in its
environment (:data:`HOST_MARK_ENV`). :meth:`s3wq.host.sandbox.ProcessorHost.kill`
sweeps them after a warden that did not end cleanly.
"""

from __future__ import annotations

import os
import uuid

from s3wq.errors import S3wqError
from s3wq.host.containment import ProcessTree, outside
from s3wq.host.procfs import Member

# How long the worker keeps killing what a dead warden left, before it calls the run unkillable.
SWEEP_SECONDS = 5.0
# The environment variable that marks every process of this process's hosts (see Orphans).
HOST_MARK_ENV = "S3WQ_PROCESSOR_HOST"


class Orphans:
    """What dead wardens left: this process, their subreaper (Linux, once a host that adopts orphans started), ends and reaps it.

    A processor can kill its warden (``os.kill(os.getppid(), SIGKILL)``,
    ``os.killpg(0, SIGKILL)``): the warden's processes are then reparented to
    the nearest subreaper above it, this process, and nothing else would end
    them. Only an orphan is ended: the wardens this process started, alive
    or not yet reaped by their Popen, are kept with all below them.
    """

    def __init__(self) -> None:
        self._tree: ProcessTree | None = None
        self.wardens: set[int] = set()
        # Every host this process starts carries this mark in its environment, and so does what it starts (unless a
        # processor execs a child with an environment of its own): an orphan is told from this process's other
        # children -- an embedding program's servers and tools -- by it, never by being below this process alone.
        self.mark = f"{HOST_MARK_ENV}={uuid.uuid4().hex}".encode()
        self._marked: set[tuple[int, int]] = set()  # orphans seen with the mark: their zombies are ours to reap

    @property
    def adopting(self) -> bool:
        return self._tree is not None and self._tree.contained

    def adopt(self) -> None:
        # Once: a subreaper must reap every orphan from then on, which an embedding program may not expect.
        if self._tree is None:
            self._tree = ProcessTree()

    def _carries_mark(self, member: Member) -> bool:
        if member.key in self._marked:
            return True
        try:
            with open(f"/proc/{member.pid}/environ", "rb") as environ:
                marked = self.mark in environ.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):
            return False  # gone meanwhile
        if marked:
            self._marked.add(member.key)
        return marked

    def _outside_hosts(self, members: dict[int, Member]) -> list[Member]:
        """The orphans of dead hosts: below this process, outside every live host, carrying a host's mark."""
        me = os.getpid()
        candidates = outside(members, {m.key for m in members.values() if m.parent == me and m.pid in self.wardens})
        return [m for m in candidates if self._carries_mark(m)]

    def reap(self) -> None:
        """Wait for orphans that died, by pid: waitpid(-1) would steal a Popen's status."""
        if not self.adopting:
            return
        me = os.getpid()
        try:
            members = self._tree.members()
        except OSError:
            return  # /proc unreadable for now (EMFILE): the next call reaps them
        for member in self._outside_hosts(members):
            if member.parent == me and not member.alive:
                try:
                    os.waitpid(member.pid, os.WNOHANG)
                except ChildProcessError:
                    pass  # not ours after all (reaped meanwhile)

    def sweep(self) -> bool:
        """Kill every orphan, in rounds, and reap them: True once none runs (False if this process is no subreaper)."""
        if not self.adopting:
            return False
        try:
            _, stuck = self._tree.end(self._outside_hosts, reap=self.reap, within=SWEEP_SECONDS, zombies_too=True)
        except (OSError, S3wqError):
            return False  # /proc could not be read, or orphans kept appearing: not shown gone
        return not any(member.alive for member in stuck)


ORPHANS = Orphans()
