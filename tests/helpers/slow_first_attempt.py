"""A processor for the local cloud's timeout test: a group whose path says "slow" outlives the first
invocation that runs it; every later run completes like the others.

The first run is told apart by a marker object it creates in the workspace
(If-None-Match: only one run can create it), not by the attempt number: a
run stopped at its deadline may or may not use up an attempt.
"""

import time

from s3wq.errors import ObjectExists


def process(group, ctx):
    if any("slow" in path for path in group.paths):
        try:
            ctx.backend.create(f"test-markers/slow-{group.hash}", b"")
            time.sleep(ctx.remaining_seconds() + 30)  # past the invocation's deadline: the worker stops it first
        except ObjectExists:
            pass
    ctx.write_result([{"source": path, "attempt": ctx.attempt, "text": ctx.read_input(path).decode()} for path in group.paths])
