"""Worker Lambda: one item of the Distributed Map, draining groups until the queue is empty or time runs out.

Event (a Map item): ``{"worker_index": 3, "workers": 50, ...}``.
Returns ``{worker_id, processed, failed, conflicts, reclaimed, stopped_reason, ..., s3_requests}``.
A processor exception is one attempt of one group and never fails the
invocation; a storage failure does, so that Step Functions retries it. A
processor that raises ServiceUnavailable stops the worker, which returns
``stopped_reason: service_unavailable`` (and logs an error). The
processor runs in a processor host that the worker stops before the
invocation's deadline, so a group that outlasts the invocation is handed back
(with how long it ran) instead of being killed with the invocation.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from s3wq.config import WorkerSettings, lambda_safety_margin
from s3wq.errors import ConfigError
from s3wq.handlers.runtime import PowertoolsObserver, logger, metrics, remaining_seconds, runtime, tracer
from s3wq.host.runners import HostRunner
from s3wq.model import StopReason
from s3wq.store import request_counts
from s3wq.worker import Worker


def _map_item(event: Any) -> tuple[int, int]:
    if not isinstance(event, dict):
        raise ConfigError(f"worker event must be an object like {{'worker_index': 0, 'workers': 1}}, got {type(event).__name__}")
    try:
        index, workers = int(event.get("worker_index", 0)), int(event.get("workers", 1))
    except (TypeError, ValueError):
        raise ConfigError(
            f"worker_index and workers must be integers, got {event.get('worker_index')!r}, {event.get('workers')!r}"
        ) from None
    if workers < 1 or not 0 <= index < workers:
        raise ConfigError(f"worker_index must be in [0, workers), got {index} of {workers}")
    return index, workers


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: Any, context: Any) -> dict:
    rt = runtime()
    index, workers = _map_item(event)
    requests_at_start = request_counts(rt.s3)
    request_id = getattr(context, "aws_request_id", "local")
    worker_id = f"w{index}-{request_id[:8]}"
    logger.append_keys(worker_id=worker_id)
    time_limit = remaining_seconds(context)
    margin = lambda_safety_margin(time_limit)
    group_timeout = rt.config.group_timeout
    if group_timeout is not None:
        # The synth checked it against the function's timeout less this margin;
        # this invocation's start-up took a little of that, and a run never
        # gets more than the invocation has left either way.
        group_timeout = min(group_timeout, time_limit - margin)
    settings = WorkerSettings(
        time_limit=time_limit,
        safety_margin=margin,
        lease=rt.config.lease,
        foreign_lock_timeout=rt.config.foreign_lock_timeout,
        max_attempts=rt.config.max_attempts,
        group_timeout=group_timeout,
    )
    worker = Worker(
        rt.backend,
        None,
        settings,
        runner=HostRunner(rt.host),
        worker_id=worker_id,
        position=index / workers,
        remaining_time=lambda: remaining_seconds(context),
        observer=PowertoolsObserver(worker_id),
        processor_name=rt.config.processor,
    )
    report = worker.run()
    metrics.add_metric(name="LocksReclaimed", unit=MetricUnit.Count, value=report.reclaimed)
    # The S3 requests of this invocation, by operation (the client counts since its creation).
    before, after = requests_at_start, request_counts(rt.s3)
    doc = {**report.to_dict(), "s3_requests": {op: n - before.get(op, 0) for op, n in after.items() if n > before.get(op, 0)}}
    if report.stopped_reason == StopReason.PROCESSOR_FAILING:
        logger.error(f"processor {rt.config.processor} failed every group it ran with the same error; this worker stopped", extra=doc)
    elif report.stopped_reason == StopReason.SERVICE_UNAVAILABLE:
        # A report, not a failed invocation: Step Functions' retry would run the group again against the same dead service.
        # The drain loop reads the handed-back group from the status function's count, and ends the execution.
        logger.error(
            f"a service processor {rt.config.processor} needs is unavailable ({report.service_error}): "
            "its group was handed back unrun, no attempt used, and this worker stopped",
            extra=doc,
        )
    else:
        logger.info("worker stopped", extra=doc)
    return doc
