"""``s3wq work -j N``: N workers, each an ``s3wq work`` process of its own, under one progress display.

Each child is a single ``work`` exactly, started with this command's own
arguments: its own worker id, processor host and containment, and its own
graceful stop. The children run in a process group of their own, so that a
Ctrl-C reaches them once, through this parent: the parent forwards the
signal it got to each, waits for all of them, and reports. A second signal
is forwarded too (each child then ends its host and exits at once, as one
worker does), and the parent exits with it.

The children's stderr is shown line by line, each line marked with the
worker it came from; their reports (``--json``, on their stdout) are summed
into the parent's. The exit code is the worst of theirs
(:func:`worst_exit_code`), or the signal's after a stop.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from s3wq.cli.arguments import non_negative_int
from s3wq.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_SERVICE_UNAVAILABLE, emit
from s3wq.cli.progress import RunProgress
from s3wq.cli.workspace import open_workspace
from s3wq.errors import BadInput, S3wqError
from s3wq.host.stopping import STOP_SIGNALS, GracefulStop
from s3wq.index import WorkIndex
from s3wq.ops.pages import PageTally
from s3wq.ops.status import queue_status
from s3wq.wording import plural

# Seconds between two counts of the workspace for the display.
POLL_SECONDS = 1.0
# From least to most serious: a service down (run again later), a stop by a signal, a failure, bad input.
# A code not listed (a child killed by a signal it did not handle) counts as a failure.
_SERIOUSNESS = [EXIT_OK, EXIT_SERVICE_UNAVAILABLE, *(128 + s for s in STOP_SIGNALS), EXIT_FAILED, EXIT_BAD_INPUT]


def add_jobs_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-j",
        "--jobs",
        type=non_negative_int,
        default=1,
        metavar="N",
        help="run N workers, each a process with its own worker id and processor host, under one progress display "
        "(0: one per core this process may use; default 1). Ctrl-C hands every worker's group back",
    )


def job_count(jobs: int) -> int:
    """The workers ``-j`` asks for: ``jobs``, or with 0 one per core this process may run on."""
    if jobs:
        return jobs
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worst_exit_code(codes: Iterable[int]) -> int:
    """The most serious of the workers' exit codes (0 for none)."""
    rank = {code: n for n, code in enumerate(_SERIOUSNESS)}
    worst = EXIT_OK
    for code in codes:
        code = code if code in rank else EXIT_FAILED
        if rank[code] > rank[worst]:
            worst = code
    return worst


@dataclass
class _Child:
    worker_id: str
    process: subprocess.Popen
    relay: threading.Thread | None = None
    report: dict | None = None
    exit_code: int | None = field(default=None)


def _child_argv(args: argparse.Namespace, worker_id: str, index: int, count: int) -> list[str]:
    # The command's own arguments, then the ones that make it one of N: argparse takes the last of an option given twice.
    return [
        sys.executable,
        "-m",
        "s3wq",
        *args.argv,
        *("--jobs", "1", "--worker-id", worker_id, "--worker-index", str(index), "--workers", str(count), "--json"),
    ]


def _relay(child: _Child, say: Any) -> None:
    """Each line the child writes to stderr, marked with its worker id."""
    stream: IO[str] = child.process.stderr  # type: ignore[assignment]
    for line in stream:
        say(f"[{child.worker_id}] {line.rstrip()}")


def run_jobs(args: argparse.Namespace, count: int) -> int:
    """Run ``count`` workers as ``s3wq work`` processes until each has stopped; their summed report, and the worst exit code."""
    if args.worker_index is not None or args.workers is not None:
        raise BadInput("-j spreads its workers along the index itself: leave out --worker-index and --workers")
    backend = open_workspace(args.workspace)
    WorkIndex(backend).require()  # a mistyped workspace is one line here, not one a worker
    base = args.worker_id or f"w-{uuid.uuid4().hex[:8]}"
    progress = None if args.json else RunProgress(stream=sys.stderr)
    say = progress.note if progress is not None else (lambda text: print(text, file=sys.stderr, flush=True))
    started = time.monotonic()
    with GracefulStop() as stop:
        children = [_start(args, f"{base}-{i}", i, count, say) for i in range(count)]
        stop.on_second_signal(lambda: _forward(children, stop.signum))
        try:
            _wait(children, stop, backend, progress, say)
        finally:
            if progress is not None:
                progress.stop()
    for child in children:
        if child.relay is not None:
            child.relay.join()
    return _report(args, children, stop, time.monotonic() - started)


def _start(args: argparse.Namespace, worker_id: str, index: int, count: int, say: Any) -> _Child:
    process = subprocess.Popen(
        _child_argv(args, worker_id, index, count),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Its own process group: a Ctrl-C at the terminal reaches it once, forwarded by this parent, not twice.
        process_group=0,
    )
    child = _Child(worker_id, process)
    child.relay = threading.Thread(target=_relay, args=(child, say), name=f"s3wq-jobs-{worker_id}", daemon=True)
    child.relay.start()
    return child


def _forward(children: list[_Child], signum: int | None) -> None:
    for child in children:
        if signum is not None and child.process.poll() is None:
            child.process.send_signal(signum)


def _wait(children: list[_Child], stop: GracefulStop, backend: Any, progress: RunProgress | None, say: Any) -> None:
    """Show the workspace's progress until every child has exited, forwarding a stop to them once it is asked for."""
    forwarded = False
    tally = PageTally(backend)
    while True:
        if stop.requested and not forwarded:
            _forward(children, stop.signum)
            forwarded = True
        for child in children:
            if child.exit_code is None and child.process.poll() is not None:
                child.exit_code = child.process.returncode
                child.report = _read_report(child)
        if all(child.exit_code is not None for child in children):
            return
        if progress is not None:
            try:
                progress.update(queue_status(backend), tally.count())
            except S3wqError as exc:  # the display's count only: the workers meet the store themselves and report it
                say(f"s3wq: the progress display could not count the workspace: {exc}")
        select.select(stop.fds if not forwarded else [], [], [], POLL_SECONDS)


def _read_report(child: _Child) -> dict | None:
    """The child's report: the JSON document its --json printed, or None if it printed none (it failed before it ran)."""
    assert child.process.stdout is not None
    out = child.process.stdout.read()
    try:
        doc = json.loads(out)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def summed(reports: list[dict]) -> dict:
    """The workers' reports as one: counts and seconds added up (the store's requests too), the rest listed."""
    total: dict[str, Any] = {}
    for report in reports:
        for key, value in report.items():
            if isinstance(value, bool) or not isinstance(value, (int, float, dict)):
                continue
            if isinstance(value, dict):
                into = total.setdefault(key, {})
                for name, n in value.items():
                    into[name] = into.get(name, 0) + n
            else:
                total[key] = total.get(key, 0) + value
    return total


def _report(args: argparse.Namespace, children: list[_Child], stop: GracefulStop, seconds: float) -> int:
    reports = [c.report for c in children if c.report is not None]
    doc = {
        **summed(reports),
        "workspace": args.workspace,
        "workers": len(children),
        "worker_ids": [c.worker_id for c in children],
        "exit_codes": [c.exit_code for c in children],
        "stopped_reasons": [r.get("stopped_reason") for r in reports],
        "seconds": round(seconds, 2),
    }
    doc["pages_per_second"] = round(doc.get("pages", 0) / seconds, 2) if seconds > 0 else None
    emit(args, doc, _summary_line)
    if stop.requested:
        assert stop.signum is not None
        print(f"s3wq: stopped by {signal.Signals(stop.signum).name}; every worker handed back the group in hand", file=sys.stderr)
        return stop.exit_code
    return worst_exit_code(c.exit_code or 0 for c in children)


def _summary_line(d: dict) -> str:
    pages = f" ({d['pages']} pages, {d['pages_per_second']} pages/s)" if d.get("pages") else ""
    if d.get("input_errors"):
        pages += f" ({plural(d['input_errors'], 'input error')}: s3wq failures {d['workspace']} --inputs)"
    reasons = sorted({str(r) for r in d["stopped_reasons"]})
    return (
        f"{plural(d['workers'], 'worker')}: processed {d.get('processed', 0)}{pages} in {d['seconds']:.1f} s, "
        f"failed {d.get('failed', 0)}, conflicts {d.get('conflicts', 0)}, reclaimed {d.get('reclaimed', 0)}; "
        f"stopped: {', '.join(reasons) or 'before they ran'}"
    )
