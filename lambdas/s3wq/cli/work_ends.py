"""How long ``s3wq work`` runs, and what it tells the user when it stops with work left or with none to do.

A worker that ends having processed nothing, or with groups still pending,
exits 0: nothing failed. Its summary line alone ("processed 0; stopped:
queue_empty") read as a run that did the job. The advice here names why it
stopped and the command that would go on, from a count of the workspace
(``s3wq status``'s) made only then.
"""

from __future__ import annotations

import argparse
import sys

from s3wq.config import DEFAULT_TIME_LIMIT_SECONDS, UNLIMITED_TIME_SECONDS, WorkerSettings
from s3wq.model import StopReason
from s3wq.ops.status import QueueStatus, queue_status
from s3wq.protocol.flags import done_by
from s3wq.store import Backend, layout
from s3wq.wording import plural
from s3wq.worker.report import WorkerReport

# Done flags read to tell which processor made a workspace's results: a few, not one per group.
DONE_FLAGS_SAMPLED = 5
# The stops after which a count of the workspace says what is left; the others say it themselves (a signal, the
# breaker, a service down), and a worker that processed groups until the queue was empty has nothing to add.
_COUNTED_STOPS = frozenset({StopReason.TIME_LIMIT, StopReason.NOT_ENOUGH_TIME, StopReason.LOCKED_BY_OTHERS, StopReason.QUEUE_EMPTY})


def interactive() -> bool:
    """Whether a person runs this command at a terminal: stdin and stdout both are one (a pipe or a redirect is not)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def time_limit_of(args: argparse.Namespace) -> float:
    """``--time-limit`` in seconds: 0 is no limit, and so is the default on a terminal; elsewhere the default is the Lambda maximum.

    A person at a terminal wants the queue done and stops the worker with
    Ctrl-C; a script, a CI job or a container that starts workers wants them
    bounded as a Lambda worker is, and runs another.
    """
    if args.time_limit is None:
        return UNLIMITED_TIME_SECONDS if interactive() else DEFAULT_TIME_LIMIT_SECONDS
    return UNLIMITED_TIME_SECONDS if args.time_limit == 0 else args.time_limit


def time_limit_shown(settings: WorkerSettings) -> float | None:
    """The time limit as a report shows it: None for no limit."""
    return None if settings.time_limit >= UNLIMITED_TIME_SECONDS else settings.time_limit


def stop_advice(args: argparse.Namespace, backend: Backend, settings: WorkerSettings, report: WorkerReport) -> list[str]:
    """The lines that say why this worker stopped with work left, or with nothing done, and what would go on."""
    if report.stopped_reason not in _COUNTED_STOPS or (report.stopped_reason == StopReason.QUEUE_EMPTY and report.processed):
        return []
    status = queue_status(backend, foreign_lock_timeout=settings.foreign_lock_timeout)
    ws = args.workspace
    if report.stopped_reason == StopReason.QUEUE_EMPTY:
        return _nothing_to_do(args, backend, status)
    if not status.remaining:
        return []
    pending = plural(status.remaining, "group")
    limit = f"{settings.time_limit:g} s"
    if report.stopped_reason == StopReason.TIME_LIMIT:
        return [f"stopped at the time limit ({limit}) with {pending} pending: run s3wq work {ws} again, or --time-limit 0 for no limit"]
    if report.stopped_reason == StopReason.NOT_ENOUGH_TIME:
        return [
            f"stopped with {pending} pending that need more time than this worker had left of its {limit}: "
            f"run s3wq work {ws} with a longer --time-limit (0: no limit)"
        ]
    return [
        f"stopped with {pending} pending, held by other workers (s3wq status {ws}): run s3wq work {ws} again once they let go, "
        f"or, if those workers are dead, s3wq release-locks {ws} --worker-id ID"
    ]


def _nothing_to_do(args: argparse.Namespace, backend: Backend, status: QueueStatus) -> list[str]:
    ws, lines = args.workspace, []
    if status.failed:
        lines.append(f"{plural(status.failed, 'group')} failed for good: see s3wq failures {ws}; s3wq requeue-failed {ws} puts them back")
    if status.groups and status.done == status.groups:
        makers = _done_by(backend)
        if makers and args.processor not in makers:
            lines.append(
                f"every group is done (by {', '.join(sorted(makers))}); to run them again with {args.processor}: "
                f"s3wq reset {ws} --all, then work"
            )
        else:
            lines.append(f"every group is already done; to run them again: s3wq reset {ws} --all, then work")
    return lines


def _done_by(backend: Backend) -> set[str]:
    """The processors named by the first few done flags; empty when none names one (an older s3wq's flags, olmocr's)."""
    makers = set()
    keys = backend.list_keys(layout.DONE_PREFIX)
    for count, hash_ in enumerate(layout.hashes_in_keys(keys, layout.DONE_PREFIX, layout.DONE_SUFFIX)):
        if count == DONE_FLAGS_SAMPLED:
            break
        maker = done_by(backend, hash_)
        if maker is None:
            return set()  # one flag that names none: which processor made the others' neighbours is not known
        makers.add(maker)
    return makers
