"""Following a Step Functions execution of the deployed state machine to its end, counting its workspace as it runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from s3wq.ops.status import QueueStatus, queue_status
from s3wq.store import Backend

# Counting a big workspace lists every flag: poll gently by default.
POLL_SECONDS = 2.0


def follow_execution(
    sfn: Any,
    execution_arn: str,
    backend: Backend,
    *,
    on_status: Callable[[QueueStatus], None] | None = None,
    interval: float = POLL_SECONDS,
) -> tuple[dict, QueueStatus]:
    """Poll the execution and the queue until the execution ends; return its description and the last status.

    ``on_status`` hears every count as it is made (the command line shows its
    progress display), the last one too.
    """
    while True:
        description = sfn.describe_execution(executionArn=execution_arn)
        status = queue_status(backend)
        if on_status is not None:
            on_status(status)
        if description["status"] != "RUNNING":
            return description, status
        time.sleep(interval)
