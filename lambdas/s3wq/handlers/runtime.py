"""Per-cold-start wiring shared by the handlers: config, clients, backend, Powertools.

Nothing here runs at import time except creating the Powertools objects,
which are cheap; clients are made on first use and cached for the life of the
execution environment, as Lambda recommends.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from s3wq.config import LambdaConfig
from s3wq.host.sandbox import ProcessorHost
from s3wq.model import Group
from s3wq.protocol.claims import Claim
from s3wq.store import Backend, S3Backend, make_s3_client, open_backend
from s3wq.worker import WorkerObserver

SERVICE = "s3wq"
METRICS_NAMESPACE = "s3wq"

# Outside Lambda (CLI, tests) Powertools must stay quiet and cheap: no EMF
# blobs on stdout and no X-Ray; inside Lambda these defaults do nothing.
if "AWS_LAMBDA_FUNCTION_NAME" not in os.environ:
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")


class _NoTracer:
    """Stands in for Powertools' Tracer when tracing is off.

    Creating a Tracer imports the X-Ray SDK (about 0.2 s, measured with
    ``python -X importtime``) even when tracing is disabled; a cold start
    without tracing should not pay for it.
    """

    def capture_lambda_handler(self, lambda_handler: Any = None, **_: Any) -> Any:
        return lambda_handler if lambda_handler is not None else (lambda fn: fn)


def _tracer() -> Any:
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() in ("1", "true"):
        return _NoTracer()
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE)


logger = Logger(service=SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
tracer = _tracer()


@dataclass
class Runtime:
    config: LambdaConfig

    @cached_property
    def s3(self) -> Any:
        return make_s3_client()

    @cached_property
    def backend(self) -> Backend:
        return open_backend(self.config.workspace, s3_client=self.s3)

    @cached_property
    def host(self) -> ProcessorHost:
        """The processor host, kept for the life of the execution environment so a warm start reuses it."""
        # The input policy goes with it: whatever the index names, a processor reads no local file and no other bucket.
        return ProcessorHost(self.config.processor, self.config.workspace, input_policy=self.config.input_policy)

    def close(self) -> None:
        if "host" in self.__dict__:
            self.host.close()

    @cached_property
    def stepfunctions(self) -> Any:
        import boto3

        return boto3.client("stepfunctions")

    @property
    def workspace_bucket_and_prefix(self) -> tuple[str, str] | None:
        backend = self.backend
        return (backend.bucket, backend.prefix) if isinstance(backend, S3Backend) else None


@lru_cache(maxsize=1)
def runtime() -> Runtime:
    """The cold-start wiring; a bad setting fails here, naming the variable."""
    return Runtime(config=LambdaConfig.from_env(dict(os.environ)))


def reset_runtime() -> None:
    """Forget the wiring (the next call of ``runtime`` is a cold start), stopping its processor host."""
    if runtime.cache_info().currsize:
        runtime().close()
    runtime.cache_clear()


class PowertoolsObserver(WorkerObserver):
    """Logs each group with its context and records the worker's EMF metrics."""

    def __init__(self, worker_id: str):
        self.worker_id = worker_id

    def group_started(self, group: Group, claim: Claim) -> None:
        logger.append_keys(group_hash=group.hash, attempt=claim.attempt, worker_id=self.worker_id)
        logger.info("group claimed", extra={"paths": len(group.paths), "reclaimed": claim.reclaimed})

    def group_finished(self, group: Group, claim: Claim, outcome: str, seconds: float) -> None:
        # Named explicitly, not through the appended keys: a group is often
        # finished on a helper thread while the next one has started.
        logger.info(
            "group finished", extra={"group_hash": group.hash, "attempt": claim.attempt, "outcome": outcome, "seconds": round(seconds, 3)}
        )
        if outcome == "done":
            metrics.add_metric(name="GroupsProcessed", unit=MetricUnit.Count, value=1)
            metrics.add_metric(name="GroupDuration", unit=MetricUnit.Milliseconds, value=round(seconds * 1000, 1))
        elif outcome == "failed":
            metrics.add_metric(name="GroupsFailed", unit=MetricUnit.Count, value=1)

    def conflict(self, hash_: str) -> None:
        metrics.add_metric(name="ClaimConflicts", unit=MetricUnit.Count, value=1)


def remaining_seconds(context: Any) -> float:
    """What the invocation has left, from the Lambda context (or a generous budget without one)."""
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        return context.get_remaining_time_in_millis() / 1000.0
    return float(runtime().config.lease)
