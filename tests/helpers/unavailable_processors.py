"""Processors whose service is down: each raises ServiceUnavailable (or a subclass of its own), another works.

Every run is recorded as a file in ``$S3WQ_TEST_RECORD_DIR`` (``<hash>-<attempt>-<n>``), so a test can tell
which groups ran, and how often. A run that finds the service down first waits (up to WAIT_SECONDS) until a
second lock is in the workspace: the worker's claim made ahead of this run, which it must give back unrun.
"""

from __future__ import annotations

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from s3wq.errors import ServiceUnavailable

MESSAGE = "model endpoint http://127.0.0.1:9/v1: circuit open after 5 failed requests"
WAIT_SECONDS = 20.0


class EndpointDown(ServiceUnavailable):
    """A processor's own kind of outage, as a vlm client might define it."""


def _record(group, ctx) -> None:
    folder = os.environ["S3WQ_TEST_RECORD_DIR"]
    with open(os.path.join(folder, f"{group.hash}-{ctx.attempt}-{uuid.uuid4().hex[:8]}"), "w") as f:
        f.write(ctx.worker_id)


def _claimed_ahead(ctx) -> None:
    """Wait until the worker has claimed the next group ahead of this run (a second lock), or WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while len(list(ctx.backend.list_keys("worker_locks/"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)


def raises(group, ctx):
    _record(group, ctx)
    _claimed_ahead(ctx)
    raise ServiceUnavailable(MESSAGE)


def raises_its_own(group, ctx):
    _record(group, ctx)
    _claimed_ahead(ctx)
    raise EndpointDown(MESSAGE)


def raises_from_a_pool(group, ctx):
    """The request goes out on a worker thread of the processor's pool; future.result() raises its error here."""
    _record(group, ctx)

    def request(page: int) -> str:
        _claimed_ahead(ctx)
        raise ServiceUnavailable(MESSAGE)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(request, page) for page in range(2)]
        return [future.result() for future in futures]


def works(group, ctx):
    _record(group, ctx)
    ctx.write_result([{"source": path, "attempt": ctx.attempt} for path in group.paths])


def raises_at_once(group, ctx):
    """The service is down for every group, and says so at once (the local cloud's drain loop test)."""
    raise ServiceUnavailable(MESSAGE)
