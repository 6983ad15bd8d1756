"""The ``s3wq`` command line: populate, work, start, status, failures, inspect, the repairs, and the local cloud.

Exit codes: 0 success, 1 the store or the run failed, 2 bad input (nothing changed).
The commands live by concern in ``run_commands`` (populate, work, start),
``status_commands``, ``inspect_commands`` (failures, inspect),
``repair_commands`` (requeue-failed, reset, release-locks) and
``local_commands``; ``parser`` holds the argparse tree and ``arguments``
its value types; ``output`` the exit codes and printing, ``workspace``
opening the workspace a command names, ``progress`` the live display, and
``execution`` finding a deployed stack, starting an execution and showing
it followed (:mod:`s3wq.ops.executions` follows it); ``jobs`` runs ``work -j
N``'s worker processes, and ``verbose`` says what each command's ``-v`` logs.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import NoCredentialsError, NoRegionError

from s3wq.cli.output import EXIT_BAD_INPUT, EXIT_FAILED, printable_lines
from s3wq.cli.parser import build_parser
from s3wq.errors import BadInput, S3wqError

__all__ = ["build_parser", "entry_point", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as given: `work -j N` starts its workers with it
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    try:
        return args.func(args)
    except BadInput as exc:
        # A bad line or a stored record's text may be quoted in the message.
        print(printable_lines(f"s3wq: error: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except (NoRegionError, NoCredentialsError) as exc:
        print(f"s3wq: error: {exc} (set AWS_REGION and credentials, or AWS_PROFILE)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except S3wqError as exc:
        print(printable_lines(f"s3wq: failed: {exc}"), file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("s3wq: interrupted", file=sys.stderr)
        return 130


def entry_point() -> Any:
    sys.exit(main())
