"""The argparse tree of ``s3wq``: one function per command's arguments, in the order ``--help`` lists them."""

from __future__ import annotations

import argparse

from s3wq import __version__
from s3wq.cli.arguments import locations, non_negative_float, non_negative_int, port, positive_float, positive_int
from s3wq.cli.execution import DEFAULT_STACK_NAME
from s3wq.cli.export_command import add_export
from s3wq.cli.group_lists import STATUS_EXAMPLES, add_list_arguments
from s3wq.cli.inspect_commands import cmd_failures, cmd_inspect
from s3wq.cli.jobs import add_jobs_argument
from s3wq.cli.local_commands import cmd_local_demo, cmd_local_up
from s3wq.cli.output import EXIT_BAD_INPUT, WORK_EXIT_CODES
from s3wq.cli.processor_flags import VLM_EXAMPLE, add_ocr_arguments, add_processor_arguments, add_vlm_arguments
from s3wq.cli.repair_commands import cmd_release_locks, cmd_requeue_failed, cmd_reset
from s3wq.cli.run_commands import cmd_populate, cmd_start, cmd_work
from s3wq.cli.status_commands import cmd_status
from s3wq.cli.verbose import GLOBAL_VERBOSE_HELP, verbose_help
from s3wq.config import (
    DEFAULT_BREAKER_GROUPS,
    DEFAULT_GROUP_SIZE,
    DEFAULT_GROUP_TIMEOUT_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_INPUT_BYTES,
    DEFAULT_TIME_LIMIT_SECONDS,
    FOREIGN_LOCK_TIMEOUT_SECONDS,
    MAX_RETRY_BACKOFF_SECONDS,
    RETRY_BACKOFF_SECONDS,
)

WORKSPACE_HELP = "s3://bucket/prefix, or a local directory"
FORMATTER = argparse.RawDescriptionHelpFormatter


class _OneLineErrors(argparse.ArgumentParser):
    """Usage errors as one line naming the problem, like every other bad input."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrors(
        prog="s3wq",
        description="A distributed work queue whose state lives in S3 (olmocr-compatible workspace).",
        epilog="examples:\n"
        "  s3wq local demo                                 # the whole app on an embedded local cloud\n"
        "  s3wq populate s3://my-bucket/run1 's3://my-bucket/pdfs/*.pdf' --group-size 10\n"
        "  s3wq work s3://my-bucket/run1 --processor text --time-limit 900\n"
        "  s3wq status s3://my-bucket/run1 --json\n"
        "Any S3-compatible endpoint works through AWS_ENDPOINT_URL.",
        formatter_class=FORMATTER,
    )
    parser.add_argument("--version", action="version", version=f"s3wq {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=GLOBAL_VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_OneLineErrors)
    for add_command in (
        _add_populate,
        _add_status,
        _add_start,
        _add_failures,
        _add_inspect,
        lambda sub: add_export(sub, _command),
        _add_work,
        _add_requeue_failed,
        _add_reset,
        _add_release_locks,
        _add_local,
    ):
        add_command(sub)
    return parser


def _command(sub, name: str, help_: str, *examples: str) -> argparse.ArgumentParser:
    """A command's parser, with the options every command has: --json and -v."""
    epilog = ("example:" if len(examples) == 1 else "examples:") + "".join(f"\n  {e}" for e in examples)
    p = sub.add_parser(name, help=help_, description=help_, epilog=epilog, formatter_class=FORMATTER)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    # -v after the command too (SUPPRESS: absent here, the one before the command stands).
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose_help(name))
    return p


def _add_input_locations(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument(
        "--input-locations",
        type=locations,
        metavar="S3_URIS",
        help=f"{verb} s3:// inputs only in these buckets or folders, comma-separated (s3://bucket,s3://bucket/prefix) "
        "(default: any bucket this machine's credentials may read)",
    )


def _add_populate(sub) -> None:
    p = _command(
        sub,
        "populate",
        "Index input paths into groups (idempotent: paths already indexed are skipped).",
        "s3wq populate s3://my-bucket/run1 s3://my-bucket/a.pdf 's3://my-bucket/pdfs/*.pdf' @manifest.txt.gz",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="S3 URI, S3 glob, local path or glob, or @FILE: a manifest with one source per line "
        "(# comments and blank lines ignored; .gz and .zst accepted; FILE may be an s3:// URI)",
    )
    p.add_argument("--group-size", type=positive_int, default=DEFAULT_GROUP_SIZE, help=f"paths per group (default {DEFAULT_GROUP_SIZE})")
    p.add_argument(
        "--no-check",
        action="store_true",
        help="do not check that each s3:// path exists (a HEAD, or a LIST page per 1,000 keys of its folder): for huge manifests",
    )
    p.add_argument(
        "--allow-local-inputs",
        action="store_true",
        help="on an S3 workspace, index local paths too (only workers on this machine can read them; a worker on Lambda refuses them)",
    )
    _add_input_locations(p, "index")
    p.set_defaults(func=cmd_populate)


def _add_status(sub) -> None:
    p = _command(
        sub, "status", "Count groups: done, failed, locked and pending; --watch follows a run; --list STATE lists them.", *STATUS_EXAMPLES
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--watch", action="store_true", help="follow until nothing is pending or locked (a progress bar on a terminal)")
    p.add_argument("--interval", type=positive_float, default=2.0, help="seconds between polls with --watch (default 2)")
    p.add_argument(
        "--wait-for-index",
        action="store_true",
        help="with --watch: wait for an index to appear (a manifest just uploaded, populate still to run) instead of failing",
    )
    add_list_arguments(p)
    p.set_defaults(func=cmd_status)


def _add_start(sub) -> None:
    p = _command(
        sub,
        "start",
        "Start an execution of the deployed stack's state machine (found through CloudFormation).",
        "s3wq start --workers 200 --wait",
    )
    p.add_argument("--stack", default=DEFAULT_STACK_NAME, help=f"CloudFormation stack name (default {DEFAULT_STACK_NAME})")
    p.add_argument("--workers", type=positive_int, required=True, help="worker Lambdas per round")
    p.add_argument("--failure-tolerance", type=non_negative_int, default=0, help="failed groups the execution tolerates (default 0)")
    p.add_argument("--wait", action="store_true", help="follow the execution to its end; the exit code is its result")
    p.set_defaults(func=cmd_start)


def _add_failures(sub) -> None:
    p = _command(
        sub,
        "failures",
        "List failed groups with their paths, attempts, last error and where it was raised; --inputs: inputs the processor could not use.",
        "s3wq failures s3://my-bucket/run1 --json",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--inputs", action="store_true", help="list the inputs of done groups that the processor reported it could not use")
    p.set_defaults(func=cmd_failures)


def _add_inspect(sub) -> None:
    p = _command(
        sub,
        "inspect",
        "Show one group: paths, lock (owner, attempt, age), done/failed state, result.",
        "s3wq inspect s3://my-bucket/run1 3f2a...e9",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("hash", help="the group's 40-character hash")
    p.set_defaults(func=cmd_inspect)


def _add_work(sub) -> None:
    p = _command(
        sub,
        "work",
        "Run one worker (-j N: N of them) until the queue is empty or its time budget is spent.",
        "s3wq work s3://my-bucket/run1 --processor mypkg.ocr:process_group --time-limit 900",
        VLM_EXAMPLE,
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    add_jobs_argument(p)
    p.add_argument("--worker-id", help="name recorded in locks and flags (default: random; with -j, ID-0, ID-1...)")
    p.add_argument(
        "--worker-index", type=non_negative_int, metavar="I", help="this worker's number, 0..N-1, when N start together (spreads them out)"
    )
    p.add_argument("--workers", type=positive_int, metavar="N", help="how many workers start together (with --worker-index)")
    _add_lease_arguments(p)
    _add_attempt_arguments(p)
    add_processor_arguments(p)
    p.add_argument(
        "--allow-local-inputs",
        action="store_true",
        help="on an S3 workspace, read local paths the index names (refused by default: anyone who may write the workspace writes its index)",
    )
    _add_input_locations(p, "read")
    add_ocr_arguments(p)
    add_vlm_arguments(p)
    p.add_argument(
        "--max-input-bytes",
        type=positive_int,
        default=DEFAULT_MAX_INPUT_BYTES,
        metavar="BYTES",
        help="the most one input may hold for ctx.read_input to read it; a larger one is that input's error, "
        f"told from its size before it is read (default {DEFAULT_MAX_INPUT_BYTES}, {DEFAULT_MAX_INPUT_BYTES // 2**20} MiB)",
    )
    p.epilog = f"{p.epilog}\n{WORK_EXIT_CODES}"
    p.set_defaults(func=cmd_work)


def _add_lease_arguments(p: argparse.ArgumentParser) -> None:
    """How long a worker runs, and how long its locks and olmocr's are honoured."""
    p.add_argument(
        "--time-limit",
        type=non_negative_float,
        metavar="SECONDS",
        help="seconds this worker may run; 0: no limit (default: none when stdin and stdout are a terminal, "
        f"else {DEFAULT_TIME_LIMIT_SECONDS:.0f}, the Lambda maximum, as in a script, a CI job or a container)",
    )
    p.add_argument(
        "--lease",
        "--lock-timeout",
        dest="lease",
        type=positive_float,
        metavar="SECONDS",
        help=f"how long this worker's lock stays valid without renewal; longer runs renew it every third of it "
        f"(default: the time limit, up to {DEFAULT_LEASE_SECONDS:.0f})",
    )
    _add_foreign_lock_timeout(p)


def _add_foreign_lock_timeout(p: argparse.ArgumentParser) -> None:
    """How old a lock s3wq cannot read must be to count as stale: for a worker's claims and an operator's repairs alike."""
    p.add_argument(
        "--foreign-lock-timeout",
        type=positive_float,
        default=FOREIGN_LOCK_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"how long a lock s3wq cannot read (olmocr's) is honoured (default {FOREIGN_LOCK_TIMEOUT_SECONDS:.0f}, olmocr's own)",
    )


def _add_attempt_arguments(p: argparse.ArgumentParser) -> None:
    """How a run of a group is bounded, retried and given up on."""
    p.add_argument(
        "--max-attempts",
        type=positive_int,
        default=DEFAULT_MAX_ATTEMPTS,
        help=f"attempts before a group fails (default {DEFAULT_MAX_ATTEMPTS})",
    )
    p.add_argument(
        "--group-timeout",
        type=positive_float,
        default=DEFAULT_GROUP_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="stop a run of a group that lasts longer (kind timeout; it counts as an attempt, and the worker moves on) "
        "(default: none, a run may take what the time limit leaves)",
    )
    p.add_argument(
        "--safety-margin", type=non_negative_float, help="seconds kept free before the deadline (default: 5%% of the limit, 0.2-10 s)"
    )
    p.add_argument(
        "--retry-backoff",
        type=non_negative_float,
        default=RETRY_BACKOFF_SECONDS,
        metavar="SECONDS",
        help=f"wait before retrying a group whose processor raised, doubled each attempt up to {MAX_RETRY_BACKOFF_SECONDS:.0f} s "
        f"(default {RETRY_BACKOFF_SECONDS:g}; 0: at once)",
    )
    p.add_argument(
        "--breaker",
        type=non_negative_int,
        default=DEFAULT_BREAKER_GROUPS,
        metavar="N",
        help=f"stop when the first N groups all fail with the same error: a broken processor (default {DEFAULT_BREAKER_GROUPS}; 0: off)",
    )


def _add_requeue_failed(sub) -> None:
    p = _command(
        sub, "requeue-failed", "Put failed groups back in the queue with their attempts reset.", "s3wq requeue-failed s3://my-bucket/run1"
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--hash", action="append", help="requeue only this group (repeatable)")
    _add_foreign_lock_timeout(p)
    p.set_defaults(func=cmd_requeue_failed)


def _add_reset(sub) -> None:
    p = _command(
        sub,
        "reset",
        "Make done (and failed) groups pending again, to run them again: after changing the processor, say. Asks first on a terminal.",
        "s3wq reset ./ws --all --yes",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--hash", action="append", help="reset this group (repeatable)")
    p.add_argument("--all", action="store_true", help="reset every done and failed group")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    _add_foreign_lock_timeout(p)
    p.set_defaults(func=cmd_reset)


def _add_release_locks(sub) -> None:
    p = _command(
        sub,
        "release-locks",
        "Hand back the groups a dead worker holds, so others take them now instead of when its leases end. "
        "Only for a worker known to be dead: a live one keeps running until its next renewal.",
        "s3wq inspect s3://my-bucket/run1 HASH          # the lock's owner: gpu-box-3:5f0c...",
        "s3wq release-locks s3://my-bucket/run1 --owner gpu-box-3:5f0c...",
        "s3wq release-locks s3://my-bucket/run1 --worker-id gpu-box-3 --force",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument(
        "--owner", metavar="TOKEN", help="one dead worker instance: a lock's owner token, as `s3wq inspect` shows it (live leases too)"
    )
    who.add_argument(
        "--worker-id",
        metavar="ID",
        help="every worker of this id; live leases refused without --force (a restarted worker has the same id)",
    )
    p.add_argument("--force", action="store_true", help="with --worker-id: release live leases too")
    p.set_defaults(func=cmd_release_locks)


def _add_local(sub) -> None:
    local = sub.add_parser(
        "local",
        help="The deployed app on this machine: an embedded local cloud (no AWS account, no Docker).",
        description="The synthesized CDK stack deployed into an embedded local cloud (moto: S3, Lambda, IAM, Step Functions).",
        formatter_class=FORMATTER,
        epilog="examples:\n  s3wq local demo --workers 8 --inputs 80\n  s3wq local up --port 4566",
    )
    local_sub = local.add_subparsers(dest="local_command", required=True, metavar="COMMAND", parser_class=_OneLineErrors)
    p = _local_command(
        local_sub,
        "demo",
        "Deploy into a local cloud, upload samples and a manifest, and let the S3 event run the job end to end.",
        "s3wq local demo --workers 8 --inputs 80 --group-size 2",
    )
    p.add_argument(
        "--inputs", type=positive_int, default=40, help="sample inputs, text files and PDFs, and scans for --processor ocr (default 40)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON summary")
    p.set_defaults(func=cmd_local_demo)
    p = _local_command(local_sub, "up", "Start a local cloud with the stack deployed and keep it running.", "s3wq local up --port 4566")
    p.add_argument("--port", type=port, help="loopback port, 1-65535 (default: a free one)")
    p.set_defaults(func=cmd_local_up)


def _local_command(local_sub, name: str, help_: str, example: str) -> argparse.ArgumentParser:
    """A ``local`` command's parser, with the options both have: the deployment's workers, group size, processor and logs."""
    p = local_sub.add_parser(name, help=help_, description=help_, epilog=f"example:\n  {example}", formatter_class=FORMATTER)
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log what the local cloud does")
    p.add_argument("--workers", type=positive_int, default=4, help="worker Lambdas the execution runs (default 4)")
    p.add_argument("--group-size", type=positive_int, default=2, help="paths per group (default 2)")
    p.add_argument(
        "--processor",
        default="text",
        help="processor (default text); ocr, vlm and auto run the worker with what its container image carries, built for this machine (pip)",
    )
    p.add_argument(
        "--vlm-endpoint",
        metavar="URL",
        help="with --processor vlm or auto: the model's OpenAI-compatible endpoint (default: a stand-in run here, whose answers are made up)",
    )
    p.add_argument(
        "--processor-dir",
        metavar="DIR",
        help="a folder of your modules and an optional requirements.txt, with --processor module:function in it: "
        "the Lambdas run the asset `cdk deploy -c processorDir=DIR` ships, built for this machine (pip), isolated from this venv",
    )
    p.add_argument(
        "--keep-logs",
        nargs="?",
        const="",
        metavar="DIR",
        help="keep the server's and the Lambdas' logs when it stops: in DIR, or in a new folder of the temp directory"
        " (default: removed with the local cloud, which leaves nothing behind)",
    )
    return p
