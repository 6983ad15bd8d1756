"""Status Lambda: counts for the configured workspace; the state machine's drain loop reads ``remaining``.

Returns ``{groups, paths, done, failed, locked, pending, remaining}``.
"""

from __future__ import annotations

from typing import Any

from s3wq.status import queue_status

from .runtime import logger, runtime, tracer


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
def handler(event: Any, context: Any) -> dict:
    status = queue_status(runtime().backend)
    logger.info("status", extra=status)
    return status
