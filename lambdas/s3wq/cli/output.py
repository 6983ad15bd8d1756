"""What a command prints, and the exit codes it returns.

Every text shown comes through here: the workspace's own strings (paths,
errors, worker ids, tracebacks) are made printable before they reach a
terminal, and ``--json`` prints the document itself.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from s3wq.store import S3Backend, request_counts

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# `work` stopped because the processor raised ServiceUnavailable: nothing failed, and the same run later may succeed.
# sysexits.h's EX_UNAVAILABLE ("a service is unavailable"), apart from 1 so that a script can wait and run again.
EXIT_SERVICE_UNAVAILABLE = 69

# What `work --help` says of them.
WORK_EXIT_CODES = f"""exit codes:
  {EXIT_OK}   the queue is empty, or this worker's time is up, and no group failed here
  {EXIT_FAILED}   a group failed here, the breaker stopped the worker, or the store failed
  {EXIT_BAD_INPUT}   bad input: nothing was changed
  {EXIT_SERVICE_UNAVAILABLE}  the processor raised ServiceUnavailable: its group was handed back unrun, nothing failed;
      run again when the service is up
  130 interrupted (143 for SIGTERM, 129 for SIGHUP): the group in hand was handed back"""


def printable(value: object) -> str:
    """``value`` as text with every character a terminal would act on escaped (``\\x1b``, ``\\x9b``, ``\\n``).

    Paths, errors, worker ids and tracebacks come from the workspace, which
    anyone who may write an index, a manifest or a record fills: none of
    their escape sequences may reach the screen. JSON needs none of this
    (json.dumps escapes control characters itself), so --json stays exact.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value))


def printable_lines(text: str) -> str:
    """``text``'s lines, each made printable: the newlines between them are the command's own."""
    return "\n".join(printable(line) for line in text.split("\n"))


def emit(args: argparse.Namespace, doc: dict, human: Callable[[dict], str]) -> None:
    print(json.dumps(doc, ensure_ascii=False) if args.json else printable_lines(human(doc)))


def with_requests(backend, doc: dict) -> dict:
    if isinstance(backend, S3Backend):
        doc["s3_requests"] = request_counts(backend.s3)
    return doc
