"""``requeue-failed``, ``reset`` and ``release-locks``: the repairs, for groups that failed, that should run again, or that a dead worker holds."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from s3wq.cli.output import EXIT_BAD_INPUT, EXIT_OK, emit
from s3wq.cli.workspace import open_indexed_workspace, open_workspace
from s3wq.errors import BadInput
from s3wq.ops.inspection import done_groups, failed_groups
from s3wq.ops.repairs import ResetResult, release_locks, requeue_failed, reset_groups
from s3wq.store import layout
from s3wq.wording import plural as _plural


def _repaired(line: str, d: dict) -> str:
    if d["skipped_live"]:
        line += f"; {_plural(len(d['skipped_live']), 'group')} held by a live worker left alone (run again once it is done)"
    return line


def cmd_requeue_failed(args: argparse.Namespace) -> int:
    for hash_ in args.hash or []:
        layout.check_hash(hash_)
    result = requeue_failed(open_workspace(args.workspace), hashes=args.hash, foreign_lock_timeout=args.foreign_lock_timeout)

    emit(args, asdict(result), lambda d: _repaired(f"requeued {_plural(len(d['requeued']), 'failed group')}", d))
    return EXIT_OK


def cmd_reset(args: argparse.Namespace) -> int:
    if bool(args.hash) == args.all:
        raise BadInput("name the groups to reset: --hash H (repeatable) or --all")
    for hash_ in args.hash or []:
        layout.check_hash(hash_)
    backend = open_indexed_workspace(args.workspace)
    hashes = args.hash or sorted(done_groups(backend) | failed_groups(backend, foreign_lock_timeout=args.foreign_lock_timeout))
    if not hashes:
        emit(args, asdict(ResetResult()), lambda d: "nothing to reset: no group is done or failed")
        return EXIT_OK
    if not args.yes and sys.stdin.isatty():
        try:
            answer = input(
                f"reset {_plural(len(hashes), 'group')} of {backend.uri}, to run again (each result replaced when it does)? [y/N] "
            )
        except EOFError:  # Ctrl-D: no
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("s3wq: nothing reset", file=sys.stderr)
            return EXIT_BAD_INPUT
    result = reset_groups(backend, hashes, named=bool(args.hash), foreign_lock_timeout=args.foreign_lock_timeout)

    emit(args, asdict(result), lambda d: _repaired(f"reset {_plural(len(d['reset']), 'group')}: pending again", d))
    return EXIT_OK


def cmd_release_locks(args: argparse.Namespace) -> int:
    released = release_locks(open_workspace(args.workspace), worker_id=args.worker_id, owner=args.owner, force=args.force)
    holder = f"worker id {args.worker_id}" if args.owner is None else f"owner {args.owner}"
    emit(args, {"released": released}, lambda d: f"released {_plural(len(d['released']), 'lock')} held by {holder}")
    return EXIT_OK
