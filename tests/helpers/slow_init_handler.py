"""A Lambda handler whose init (its module's import) is slow, for the local runner's clock.

S3WQ_TEST_INIT_SECONDS: how long the import takes. The handler runs until its
context says 0.3 s are left, then answers with what it saw: a handler that
trusts its context must never be killed.
"""

import os
import time

time.sleep(float(os.environ.get("S3WQ_TEST_INIT_SECONDS", "0")))


def handler(event, context):
    first = context.get_remaining_time_in_millis()
    while context.get_remaining_time_in_millis() > 300:
        time.sleep(0.05)
    return {"remaining_at_start_ms": first}


def overrun(event, context):
    """Runs past its deadline: the runner must end it."""
    time.sleep(context.get_remaining_time_in_millis() / 1000 + 30)
    return {"should not": "return"}


def broken_init(event, context):
    raise AssertionError("never called: the module is imported with S3WQ_TEST_BREAK_INIT set")


if os.environ.get("S3WQ_TEST_BREAK_INIT"):
    raise ImportError("this init fails on purpose")
