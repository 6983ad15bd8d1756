"""Status Lambda: counts for the configured workspace; the state machine's drain loop reads ``remaining``.

Returns the :class:`~s3wq.ops.status.QueueStatus` document, ``{groups, paths,
done, failed, locked, pending, remaining, ...}``.
Given ``{"worker_items": N}`` instead, it returns ``[0, 1, ..., N-1]``: the
Distributed Map's items, one per worker. States.ArrayRange makes at most
1,000; a Map runs up to 10,000 (about 49 KB of JSON at that size, well
within a state's 256 KiB).
"""

from __future__ import annotations

from typing import Any

from s3wq.config import MAX_WORKERS_PER_EXECUTION
from s3wq.errors import BadInput
from s3wq.handlers.runtime import logger, runtime, tracer
from s3wq.ops.status import queue_status


def worker_items(workers: Any) -> list[int]:
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS_PER_EXECUTION:
        raise BadInput(f"'worker_items' must be a whole number from 1 to {MAX_WORKERS_PER_EXECUTION}, got {workers!r:.40}")
    return list(range(workers))


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)  # up to 10,000 items: more than a trace should hold
def handler(event: Any, context: Any) -> dict | list:
    if isinstance(event, dict) and "worker_items" in event:
        return worker_items(event["worker_items"])
    status = queue_status(runtime().backend).as_document()
    logger.info("status", extra=status)
    return status
