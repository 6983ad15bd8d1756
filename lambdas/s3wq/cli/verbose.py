"""What ``-v`` logs, command by command: each command's ``--help`` says what it logs, not what another does."""

from __future__ import annotations

# What the store's client logs at INFO: where it found its credentials, the requests it retried.
_CLIENT = "the S3 client's messages (credentials found, requests retried)"

VERBOSE_HELP = {
    "populate": f"log {_CLIENT} while the sources are listed and the index written",
    "status": f"log {_CLIENT} while the flags are listed and counted",
    "start": "log the AWS clients' messages (CloudFormation, Step Functions, S3: credentials found, requests retried)",
    "failures": "show each failed group's whole traceback, not only its last lines",
    "export": "log each result object as it is read, and the bad lines skipped",
    "inspect": f"log {_CLIENT} while the group's records are read",
    "work": "log each group's end (done, failed, handed back: with its pages and seconds), the traceback of each attempt "
    "that raised, and the processor's own INFO logs; with -j, every worker's, marked with its id",
    "requeue-failed": f"log {_CLIENT} while failed groups are put back",
    "reset": f"log {_CLIENT} while the groups' flags are deleted",
    "release-locks": f"log {_CLIENT} while the worker's locks are released",
}
# Before the command: its own -v, whatever it logs.
GLOBAL_VERBOSE_HELP = "log more, as the command's own -v says (s3wq COMMAND --help)"


def verbose_help(command: str) -> str:
    return VERBOSE_HELP[command]
