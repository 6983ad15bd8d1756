"""What the processor host's processes say to each other: every message, exit code and time they agree on.

The worker's side (:mod:`s3wq.host.sandbox`) starts the *reaper*
(:mod:`s3wq.host.reaper`), which forks the *warden* (:mod:`s3wq.host.warden`),
which forks the *runner* (:mod:`s3wq.host.runner_process`). Each of them
reads and writes only the records below, so a change to what one says is
made here, where the other side reads it::

    worker -> reaper          HostStart, as the reaper's command line
    worker -> warden          Run, Lease, Exit (the warden passes Run and Lease on to the runner)
    warden -> runner          Reap
    runner -> warden          Loaded or LoadFailed, then a RunEnded per run
    warden -> worker          HostReady or LoadFailed, then a RunCleanedUp or RunnerDied per run
    warden -> reaper          RunnerIdentity, one line once the runner is forked
    reaper -> worker          ReaperReport, one JSON line as the reaper exits

The socket messages are these records, sent and received by :func:`send`
and :func:`receive` alone, pickled as plain values over multiprocessing's
``Connection``. The two lines to and from the reaper are text on a plain
pipe: the reaper writes its report as it exits, to a worker that may read
it only later, so it must fit the pipe's buffer and never be waited on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import NamedTuple

from s3wq.inputs import InputPolicy, policy_from_json, policy_to_json
from s3wq.protocol.tracebacks import ErrorFrame

# The exit codes of the warden and of the reaper: every process of the host is gone; some would not die.
EXIT_ALL_ENDED = 0
EXIT_SOME_SURVIVED = 75

# How long the warden keeps killing a process that will not die (uninterruptible sleep) before it says so;
# a process torn down with a large memory or a GPU context can take seconds to exit after SIGKILL.
GIVE_UP_KILLING_SECONDS = 10.0
# How long a warden asked to end the host has before the reaper ends it with the rest: longer than the
# warden keeps killing a process that will not die (it then exits saying so).
WARDEN_GRACE_SECONDS = GIVE_UP_KILLING_SECONDS + 2.0
# How long the worker waits for the reaper to end the host: longer than it waits for the warden and then keeps trying itself.
KILL_WAIT_SECONDS = WARDEN_GRACE_SECONDS + GIVE_UP_KILLING_SECONDS + 3.0
# The host stops itself this long after the lease the worker reported, if
# the worker has not stopped it first; less than the worker's lease margin.
SELF_STOP_GRACE_SECONDS = 0.25

# The worker's sys.path, for the runner alone: the reaper and the warden start without it, so that nothing a
# processor folder or the current directory holds (a sitecustomize.py, a module named like the stdlib's) runs in them.
HOST_PATH_ENV = "S3WQ_HOST_SYS_PATH"

# Of the processes the reaper ended (or could not), the names its report carries (each at most 15 bytes): a few
# are enough for the one line the worker makes of them, and the counts are whole.
_NAMES_REPORTED = 50


@dataclass(frozen=True)
class HostStart:
    """What the worker tells the reaper on its command line, and the reaper passes on to the warden it forks."""

    report_fd: int  # the pipe for the reaper's ReaperReport
    worker_pid: int  # the reaper ends at once if its parent is already another process
    worker_fd: int  # the warden's socket to the worker
    processor_spec: str
    workspace_uri: str
    input_policy: InputPolicy

    def to_argv(self) -> list[str]:
        return [
            str(self.report_fd),
            str(self.worker_pid),
            str(self.worker_fd),
            self.processor_spec,
            self.workspace_uri,
            policy_to_json(self.input_policy),
        ]

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> HostStart:
        report_fd, worker_pid, worker_fd, processor_spec, workspace_uri, input_policy = argv
        return cls(int(report_fd), int(worker_pid), int(worker_fd), processor_spec, workspace_uri, policy_from_json(input_policy))


class Run(NamedTuple):
    """Run the processor on one group; ``held_until``: the lease's end, on the lease clock (:mod:`s3wq.protocol.clock`)."""

    hash: str
    paths: tuple[str, ...]
    worker_id: str
    attempt: int
    owner: str
    deadline_epoch: float
    held_until: float


class Lease(NamedTuple):
    """The lease of the run in progress was renewed: it now holds until ``held_until`` (lease clock)."""

    held_until: float


class Exit(NamedTuple):
    """The worker needs the host no more: an idle host ends."""


class Reap(NamedTuple):
    """The runner's children the warden killed: zombies until the runner waits for them."""

    pids: tuple[int, ...]


class Loaded(NamedTuple):
    """The runner imported the processor and opened the workspace."""


class LoadFailed(NamedTuple):
    """The processor could not be loaded, and why (the worker raises ProcessorNotFound with it)."""

    reason: str


class ProcessorEnd(NamedTuple):
    """How the processor's call ended: it returned (``error`` is None), or it raised."""

    input_error_count: int = 0  # returned: how many inputs it reported it could not use
    input_errors: tuple[dict[str, str], ...] = ()  # and the first of them
    error: str | None = None  # raised: the exception, in one line
    traceback: str = ""
    frame: ErrorFrame | None = None  # the deepest line of the processor's own code
    unavailable: bool = False  # raised ServiceUnavailable, or a subclass of it: judged by its class in the runner
    pages: int | None = None  # returned: the pages it reported done (ctx.pages_done), None if it reported none


class RunEnded(NamedTuple):
    """A run ended, as the runner saw it: how the processor ended, and what of the run may be left running.

    ``kept_pids``: multiprocessing's forkserver and resource tracker, which it
    keeps for the rest of the process (the module's own from then on).
    ``threads``: the names of the threads the run left at work.
    """

    end: ProcessorEnd
    kept_pids: tuple[int, ...]
    threads: tuple[str, ...]


class HostReady(NamedTuple):
    """The host is ready for runs; ``contained``: whether the warden sees every process it holds (Linux), or ends its group."""

    contained: bool


class RunCleanedUp(NamedTuple):
    """A run ended, and the warden has ended what it left: ``leftovers`` names that ("" if nothing).

    ``host_ending``: the run left threads (or a runner that starts
    processes), so the host ends too.
    """

    end: ProcessorEnd
    leftovers: str
    host_ending: bool


class RunnerDied(NamedTuple):
    """The runner died and the warden has ended the host: the runner's exit code, whether the lease was over, what the run left."""

    exit_code: int | None
    lease_over: bool
    leftovers: str


Message = Run | Lease | Exit | Reap | Loaded | LoadFailed | RunEnded | HostReady | RunCleanedUp | RunnerDied
# What the runner may send; anything else on its socket (a processor wrote to it) counts as the runner failing.
FROM_RUNNER = (Loaded, LoadFailed, RunEnded)

_BY_NAME: dict[str, type] = {
    record.__name__: record for record in (Run, Lease, Exit, Reap, Loaded, LoadFailed, RunEnded, HostReady, RunCleanedUp, RunnerDied)
}
_CARRYING_AN_END = (RunEnded, RunCleanedUp)


def send(conn: Connection, message: Message) -> None:
    """Send ``message`` as its name and its fields, plain values: a record pickled as itself costs ten times as much.

    Pickle names a record's class and looks it up at both ends: about 10 us
    a record, and a run's four records (two hops each way) would add a
    tenth to what the host costs a run that does nothing.
    """
    fields: tuple[object, ...] = tuple(message)
    if isinstance(message, _CARRYING_AN_END):
        fields = (tuple(message.end), *fields[1:])
    conn.send((type(message).__name__, *fields))


def receive(conn: Connection) -> Message:
    """The next record from ``conn``: EOFError or OSError once the other end is gone; another error if what came is none."""
    name, *fields = conn.recv()
    record = _BY_NAME[name]
    if record in _CARRYING_AN_END:
        fields[0] = ProcessorEnd(*fields[0])
    return record(*fields)


@dataclass(frozen=True)
class RunnerIdentity:
    """The runner's pid and start time, which the warden tells the reaper: the reaper does not count the runner as a leftover."""

    pid: int = 0
    started: int = 0

    @property
    def key(self) -> tuple[int, int]:
        """As :attr:`s3wq.host.procfs.Member.key` names a process."""
        return (self.pid, self.started)

    def line(self) -> bytes:
        return f"{self.pid} {self.started}\n".encode()

    @classmethod
    def read(cls, fd: int) -> RunnerIdentity:
        """The identity in the pipe ``fd``; pid 0 if the warden never wrote one (it died before it forked the runner)."""
        try:
            pid, started = os.read(fd, 64).split()
            return cls(int(pid), int(started))
        except (OSError, ValueError):
            return cls()


@dataclass(frozen=True)
class ReaperReport:
    """What the reaper said as it exited: the warden's exit code (None: not seen), and what it had to end itself, or could not."""

    warden_exit_code: int | None = None
    ended: tuple[str, ...] = ()  # the names of some of them
    ended_count: int = 0
    survived: tuple[str, ...] = ()  # the names of some of them
    survived_count: int = 0

    @classmethod
    def of(cls, warden_exit_code: int | None, ended: Sequence[str], survived: Sequence[str]) -> ReaperReport:
        return cls(warden_exit_code, tuple(ended[:_NAMES_REPORTED]), len(ended), tuple(survived[:_NAMES_REPORTED]), len(survived))

    def line(self) -> bytes:
        return json.dumps(asdict(self)).encode() + b"\n"

    @classmethod
    def read(cls, fd: int) -> ReaperReport | None:
        """The report in the pipe ``fd`` (non-blocking), or None if the reaper wrote none (it was killed)."""
        try:
            doc = json.loads(os.read(fd, 65536))
            return cls(doc["warden_exit_code"], tuple(doc["ended"]), doc["ended_count"], tuple(doc["survived"]), doc["survived_count"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
