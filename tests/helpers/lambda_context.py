"""A stand-in for the Lambda context object: the attributes Powertools reads, and a deadline that really passes."""

from __future__ import annotations

import time
import uuid


class LambdaContext:
    """``get_remaining_time_in_millis`` counts down from ``budget_seconds`` by the monotonic clock, as Lambda's does."""

    def __init__(self, budget_seconds: float, *, function_name: str = "s3wq-test", memory_limit_in_mb: int = 1024):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_limit_in_mb
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "2026/01/01/[$LATEST]0123456789abcdef"
        self._deadline = time.monotonic() + budget_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))
