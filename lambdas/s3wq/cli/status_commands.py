"""``status``: the counts of a workspace, once or followed (``--watch``), and the manifests' rejected lines."""

from __future__ import annotations

import argparse
import json
import sys
import time

from s3wq.cli.group_lists import check_list_options, list_status
from s3wq.cli.output import EXIT_FAILED, EXIT_OK, emit, printable, printable_lines
from s3wq.cli.progress import RunProgress
from s3wq.cli.workspace import open_workspace
from s3wq.errors import BadInput, NothingIndexed
from s3wq.index import WorkIndex
from s3wq.ops.pages import PagesDone, PageTally
from s3wq.ops.problems import ManifestErrorWatch, manifest_error_keys, manifest_problems, workspace_problems
from s3wq.ops.status import QueueStatus, queue_status
from s3wq.wording import plural as _plural


def _counts_line(status: QueueStatus) -> str:
    # finished and wait_seconds are for scripts and the state machine (--json).
    counts = {name: str(status[name]) for name in ("groups", "paths", "done", "failed", "locked", "pending", "remaining")}
    if status.claimed_ahead:
        # One worker, two locks: the group it runs (or waits to retry), and the next, claimed ahead of it and not started.
        counts["locked"] += f" ({status.claimed_ahead} claimed ahead, not started)"
    return "  ".join(f"{k}={v}" for k, v in counts.items())


def pages_line(pages: PagesDone, remaining: int) -> str | None:
    """Pages done, per group, and the pages left as groups remaining x pages per group so far; None if no group recorded pages."""
    if not pages.groups:
        return None
    about = "about " if pages.estimated else ""
    line = f"pages: {about}{pages.pages} done, {pages.per_group:.1f} per done group"
    left = pages.remaining(remaining)
    if remaining and left is not None:
        line += f"; about {left} to go ({_plural(remaining, 'group')} remaining x pages per group so far)"
    if pages.unknown:
        line += f" ({_plural(pages.unknown, 'done group')} recorded no pages)"
    return line


def _status_text(doc: dict, workspace: str) -> str:
    status = QueueStatus.read(doc)
    lines = [_counts_line(status)]
    if doc.get("pages"):
        lines.extend(filter(None, [pages_line(PagesDone.read(doc["pages"]), status.remaining)]))
    if status.unavailable:
        lines.append(
            f"{_plural(status.unavailable, 'group')} handed back unrun, no attempt used: a service the processor needs was unavailable; "
            "run the workers again when it is up"
        )
    if doc.get("input_error_groups"):
        lines.append(
            f"{_plural(doc['input_error_groups'], 'done group')} had inputs the processor could not use: s3wq failures {workspace} --inputs"
        )
    lines.extend(_manifest_problems_lines(doc))
    return "\n".join(lines)


def _manifest_errors_lines(m: dict) -> list[str]:
    """One manifest's record: where it is, how many bad lines, and the first few with their reasons."""
    count = m["bad_lines"] or 0
    lines = [f"manifest {printable(m['manifest'])}: {_plural(count, 'bad line')} skipped, listed in {printable(m['record'])}"]
    lines.extend(f"  line {printable(b['line'])}: {printable(b['reason'])}" for b in m.get("first_bad_lines", []))
    if count > len(m.get("first_bad_lines", [])):
        lines.append(f"  ... and {_plural(count - len(m.get('first_bad_lines', [])), 'more bad line')} in the record")
    return lines


def _manifest_problems_lines(doc: dict) -> list[str]:
    lines = [line for m in doc.get("manifest_errors", []) for line in _manifest_errors_lines(m)]
    hidden = doc.get("manifests_with_bad_lines", 0) - len(doc.get("manifest_errors", []))
    if hidden > 0:
        lines.append(f"... and {_plural(hidden, 'more manifest')} with bad lines")
    return lines


def _nothing_indexed(backend, problems: dict) -> NothingIndexed:
    lines = [
        f"no index at {backend.uri}: populate indexed nothing, and rejected lines of "
        f"{_plural(problems['manifests_with_bad_lines'], 'manifest')}:",
        *(f"  {line}" for line in _manifest_problems_lines(problems)),
        "fix the manifest and upload it again (an upload with no bad line clears its record)",
    ]
    return NothingIndexed("\n".join(lines), problems)


def _require_index(backend) -> None:
    """NoIndex (exit 2) if nothing was populated; NothingIndexed (exit 1) if populate ran and rejected every line it read.

    Costs one or two HEADs with an index; without one, a LIST of
    manifest_errors/ and a GET per record.
    """
    index = WorkIndex(backend)
    if index.exists():
        return
    keys = manifest_error_keys(backend)
    # The deployed populate writes the index before a manifest's record, so
    # a record found with no index after it is a manifest none of whose lines was usable.
    if keys and not index.exists():
        raise _nothing_indexed(backend, manifest_problems(backend, keys))
    index.require()


def open_indexed_workspace(uri: str):
    """The workspace's backend; NoIndex (exit 2) if nothing was populated there."""
    backend = open_workspace(uri)
    WorkIndex(backend).require()
    return backend


def _counted(backend) -> QueueStatus:
    status = queue_status(backend)
    if status.groups == 0:
        # Only an empty count pays for the check: a typo must not read as a finished run.
        _require_index(backend)
    return status


def _wait_for_index(backend, interval: float, errors: ManifestErrorWatch) -> None:
    """Poll until an index exists; NothingIndexed once a record shows that populate indexed nothing.

    A poll costs a HEAD or two and a LIST of manifest_errors/.
    """
    announced = False
    index = WorkIndex(backend)
    while not index.exists():
        if errors.poll() and not index.exists():  # the index goes first: see _require_index
            raise _nothing_indexed(backend, errors.problems())
        if not announced:
            print(f"s3wq: waiting for an index at {backend.uri} (populate has not run yet)", file=sys.stderr, flush=True)
            announced = True
        time.sleep(interval)


def cmd_status(args: argparse.Namespace) -> int:
    check_list_options(args)
    if args.list is not None:
        return list_status(args, open_indexed_workspace(args.workspace))
    backend = open_workspace(args.workspace)
    if args.wait_for_index and not args.watch:
        raise BadInput("--wait-for-index goes with --watch")
    try:
        return _status(args, backend)
    except NothingIndexed as exc:
        if args.json:
            print(json.dumps({"workspace": backend.uri, "indexed": False, **exc.problems}, ensure_ascii=False), flush=True)
        raise


def _status(args: argparse.Namespace, backend) -> int:
    tally = PageTally(backend)
    if not args.watch:
        doc = {**_counted(backend).as_document(), "pages": tally.count().as_document(), **workspace_problems(backend)}
        emit(args, doc, lambda d: _status_text(d, args.workspace))
        return EXIT_OK
    # Manifest errors are shown as they appear: a LIST of manifest_errors/ a
    # poll, and a GET for each record not seen before.
    errors = ManifestErrorWatch(backend)
    if args.wait_for_index:
        _wait_for_index(backend, args.interval, errors)
    # --json --watch: one JSON line per poll, for scripts; otherwise the progress display.
    progress = None if args.json else RunProgress()
    try:
        while True:
            status = _counted(backend)
            pages = tally.count()
            appeared = errors.poll()
            if progress:
                progress.update(status, pages)
                for m in appeared:
                    progress.note("\n".join(_manifest_errors_lines(m)))
            else:
                print(
                    json.dumps({**status.as_document(), "pages": pages.as_document(), **errors.problems()}, ensure_ascii=False), flush=True
                )
            if status.remaining == 0 and status.locked == 0:
                break
            time.sleep(args.interval)
    finally:
        if progress:
            progress.stop()
    if not args.json:
        doc = {**status.as_document(), "pages": pages.as_document(), **workspace_problems(backend)}
        print(printable_lines(_status_text(doc, args.workspace)))
    return EXIT_OK if status.failed == 0 else EXIT_FAILED
