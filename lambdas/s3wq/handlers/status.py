"""Status Lambda: counts for the configured workspace; the state machine's drain loop reads ``remaining``.

Returns the :class:`~s3wq.ops.status.QueueStatus` document, ``{groups, paths,
done, failed, locked, pending, remaining, ...}``, and publishes ``remaining``
as the workspace's backlog metric (config.BACKLOG_METRIC): the drain loop
counts before and after each round, so a run's backlog is known from its
first count to its last.
Given ``{"input_errors": true}``, it returns the input errors instead
(problems.input_error_counts: ``{input_error_groups, input_errors}``): the
drain loop asks once, for its summary, as a count of them costs a read of each
group's record.
Given ``{"worker_items": N}``, it returns ``[0, 1, ..., N-1]``: the
Distributed Map's items, one per worker. States.ArrayRange makes at most
1,000; a Map runs up to 10,000 (about 49 KB of JSON at that size, well
within a state's 256 KiB).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from s3wq.config import BACKLOG_METRIC, MAX_WORKERS_PER_EXECUTION, WORKSPACE_DIMENSION
from s3wq.errors import BadInput
from s3wq.handlers.runtime import logger, metrics, runtime, tracer
from s3wq.ops.problems import INPUT_ERRORS_EVENT_KEY, input_error_counts
from s3wq.ops.status import queue_status


def worker_items(workers: Any) -> list[int]:
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS_PER_EXECUTION:
        raise BadInput(f"'worker_items' must be a whole number from 1 to {MAX_WORKERS_PER_EXECUTION}, got {workers!r:.40}")
    return list(range(workers))


def publish_backlog(remaining: int, workspace: str) -> None:
    """One EMF line with the count, flushed here: only a count publishes (planning the Map's items does not)."""
    metrics.add_dimension(name=WORKSPACE_DIMENSION, value=workspace)
    metrics.add_metric(name=BACKLOG_METRIC, unit=MetricUnit.Count, value=remaining)
    metrics.flush_metrics()
    metrics.clear_metrics()  # a flush with metrics off (outside Lambda) keeps them: none may pile up for the next count


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)  # up to 10,000 items: more than a trace should hold
def handler(event: Any, context: Any) -> dict | list:
    if isinstance(event, dict) and "worker_items" in event:
        return worker_items(event["worker_items"])
    rt = runtime()
    if isinstance(event, dict) and event.get(INPUT_ERRORS_EVENT_KEY) is True:
        counts = input_error_counts(rt.backend)
        logger.info("input errors", extra=counts)
        return counts
    status = queue_status(rt.backend).as_document()
    logger.info("status", extra=status)
    publish_backlog(status["remaining"], rt.config.workspace)
    return status
