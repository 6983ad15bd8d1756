"""A processor for the local cloud's timeout test: a group whose path says "slow" outlives its
first invocation; on a later attempt it completes like the others."""

import time


def process(group, ctx):
    if ctx.attempt == 1 and any("slow" in path for path in group.paths):
        time.sleep(ctx.remaining_seconds() + 30)  # past the function's timeout: the runner kills it
    ctx.write_result([{"source": path, "attempt": ctx.attempt, "text": ctx.read_input(path).decode()} for path in group.paths])
