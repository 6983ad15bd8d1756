"""``status WS --list STATE``: one page of the groups in one state, a line each, ready for ``s3wq inspect``."""

from __future__ import annotations

import argparse
import shlex

from s3wq.cli.arguments import positive_int
from s3wq.cli.output import EXIT_OK, emit
from s3wq.errors import BadInput
from s3wq.ops.listing import DEFAULT_LIST_LIMIT, ListedState, list_groups
from s3wq.wording import plural

LIST_STATES = tuple(str(s) for s in ListedState)
STATUS_EXAMPLES = ("s3wq status s3://my-bucket/run1 --watch", "s3wq status s3://my-bucket/run1 --list locked")


def _seconds(value: object) -> str:
    return f"{value:g}s" if isinstance(value, (int, float)) else "?"


def _lease(row: dict) -> str:
    age = "written before this machine last booted" if row.get("written_before_last_boot") else f"{_seconds(row.get('age_seconds'))} old"
    if "stale_in_seconds" in row:
        return f"lease {_seconds(row['lease_seconds'])}, last written {age}, stale in {_seconds(row['stale_in_seconds'])}"
    return f"lease {_seconds(row['lease_seconds'])}, last written {age}"


def _owner(row: dict) -> str:
    if row.get("foreign"):
        return "a lock s3wq cannot read (olmocr's)"
    return f"worker {row.get('worker_id')} (owner {row.get('owner')}), attempt {row.get('attempt')}"


def _pending_line(row: dict) -> str:
    lock = row["lock"]
    if lock is None:
        return "never run"
    if lock["lease"] == "stale":
        return f"stale: {_owner(lock)}, its {_lease(lock)}; the next worker takes it over"
    counted = "an attempt used" if lock.get("counted") else "no attempt used"
    return f"handed back ({lock.get('outcome')}, {counted}) by {_owner(lock)}"


def _row_line(row: dict) -> str:
    state = row["state"]
    if state == ListedState.LOCKED:
        return f"live: {_owner(row)}, {_lease(row)}"
    if state == ListedState.FAILED:
        return f"{plural(row['attempts'] or 0, 'attempt')} ({row['kind']}), failed at {row['failed_at']}: {row['error']}"
    if state == ListedState.DONE:
        return f"done at {row['finished_at']} by {row['worker_id']}, {plural(row['input_errors'] or 0, 'input error')}"
    return _pending_line(row)


def _next_command(args: argparse.Namespace, after: str) -> str:
    limit = "" if args.limit == DEFAULT_LIST_LIMIT else f" --limit {args.limit}"
    return f"s3wq status {shlex.quote(args.workspace)} --list {args.list}{limit} --after {after}"


def _list_text(doc: dict, args: argparse.Namespace) -> str:
    workspace = shlex.quote(args.workspace)
    lines = [
        f"{args.list} groups of {args.workspace}, in hash order"
        + (f" after {args.after}" if args.after else "")
        + f" ({plural(len(doc['groups']), 'group')}; s3wq inspect {workspace} HASH shows one):"
    ]
    lines.extend(f"{row['hash']}  {_row_line(row)}" for row in doc["groups"])
    after = doc["next_after"]
    lines.append(f"next page: {_next_command(args, after)}" if after else "end of the list")
    return "\n".join(lines)


def add_list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--list",
        choices=LIST_STATES,
        metavar="STATE",
        help="list the groups in STATE (locked, failed, pending, done; released or stale: kinds of pending), "
        "a line each with its owner, attempts and age, in hash order, for s3wq inspect",
    )
    p.add_argument("--limit", type=positive_int, help=f"with --list: groups a page (default {DEFAULT_LIST_LIMIT})")
    p.add_argument("--after", metavar="HASH", help="with --list: start after this hash (the cursor the last page printed)")


def list_status(args: argparse.Namespace, backend) -> int:
    if args.watch:
        raise BadInput("--list shows one page: it does not go with --watch")
    page = list_groups(backend, ListedState(args.list), limit=args.limit, after=args.after)
    doc = {"workspace": backend.uri, "state": str(page.state), "groups": page.groups, "next_after": page.next_after}
    emit(args, doc, lambda d: _list_text(d, args))
    return EXIT_OK


def check_list_options(args: argparse.Namespace) -> None:
    """--limit and --after only go with --list (one line, exit 2, before anything is read)."""
    if args.list is None and (args.after is not None or args.limit is not None):
        raise BadInput("--limit and --after page a --list: s3wq status WS --list locked|failed|pending|done")
    if args.list is not None and args.limit is None:
        args.limit = DEFAULT_LIST_LIMIT
