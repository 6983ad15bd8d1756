"""Find the deployed stack, start an execution, and follow it to the end with the progress display (:mod:`s3wq.ops.executions` follows it)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import IO, Any

from botocore.exceptions import BotoCoreError, ClientError

from s3wq.cli.progress import RunProgress
from s3wq.errors import BadInput, StorageError
from s3wq.ops.executions import POLL_SECONDS, follow_execution
from s3wq.ops.pages import PageTally
from s3wq.ops.status import QueueStatus
from s3wq.store import Backend
from s3wq.wording import plural

DEFAULT_STACK_NAME = "S3wq"


@dataclass(frozen=True)
class StackOutputs:
    stack_name: str
    state_machine_arn: str
    workspace: str
    manifest_prefix: str | None
    max_workers: int | None = None  # None: a stack deployed before it was an output


def find_stack(cloudformation: Any, stack_name: str) -> StackOutputs:
    """The outputs of a deployed s3wq stack; BadInput if there is no such stack or it is not one."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            raise BadInput(f"no CloudFormation stack named {stack_name!r} (deploy with `npx cdk deploy`, or pass --stack)") from exc
        raise StorageError(f"cannot describe stack {stack_name!r}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot describe stack {stack_name!r}: {exc}") from exc
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    missing = [k for k in ("StateMachineArn", "WorkspaceUri") if k not in outputs]
    if missing:
        raise BadInput(f"stack {stack_name!r} has no output {missing[0]}: is it an s3wq stack?")
    max_workers = outputs.get("MaxWorkers", "")
    return StackOutputs(
        stack_name,
        outputs["StateMachineArn"],
        outputs["WorkspaceUri"],
        outputs.get("ManifestPrefix"),
        int(max_workers) if max_workers.isdigit() else None,
    )


def concurrency_warning(lambda_client: Any, workers: int) -> str | None:
    """Why ``workers`` worker Lambdas may not all run at once in this account, or None.

    Workers beyond the account's unreserved concurrency are throttled (and
    throttle every other function); a function also scales by at most 1,000
    environments every 10 s, so a fleet of thousands takes tens of seconds to
    be all running.
    """
    try:
        limit = lambda_client.get_account_settings()["AccountLimit"]
    except (ClientError, BotoCoreError) as exc:
        return f"could not read the account's Lambda concurrency ({exc}); check that {plural(workers, 'worker')} fit in it"
    unreserved = limit.get("UnreservedConcurrentExecutions")
    if isinstance(unreserved, int) and workers > unreserved:
        return (
            f"{plural(workers, 'worker')} is more than the account's unreserved Lambda concurrency ({unreserved}): "
            "the rest are throttled and retried, and other functions are throttled with them "
            "(ask for a higher quota, or deploy with -c workerReservedConcurrency=N)"
        )
    return None


def start_execution(sfn: Any, state_machine_arn: str, *, workers: int, failure_tolerance: int = 0) -> str:
    name = f"cli-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    document = {"workers": workers, "failureTolerance": failure_tolerance}
    try:
        return sfn.start_execution(stateMachineArn=state_machine_arn, name=name, input=json.dumps(document))["executionArn"]
    except (ClientError, BotoCoreError) as exc:
        raise StorageError(f"cannot start an execution of {state_machine_arn}: {exc}") from exc


def follow_showing_progress(
    sfn: Any, execution_arn: str, backend: Backend, *, show: bool, stream: IO[str] | None = None, interval: float = POLL_SECONDS
) -> tuple[dict, QueueStatus]:
    """:func:`~s3wq.ops.executions.follow_execution`, with the progress display on ``stream`` (stdout) when ``show``."""
    progress = RunProgress(stream=stream) if show else None
    tally = PageTally(backend)
    try:
        return follow_execution(
            sfn,
            execution_arn,
            backend,
            on_status=None if progress is None else (lambda status: progress.update(status, tally.count())),
            interval=interval,
        )
    finally:
        if progress:
            progress.stop()
