"""A processor whose module starts threads at import (``reliability.warm_pool_processor:process``), with heartbeats.

A kept-warm ThreadPoolExecutor, its threads started at import (one of
them at a job of the module's own for good), and a background thread like
an SDK's (sentry_sdk's flusher): the module's own,
never a run's leftovers, so one processor host runs every group. Each host
records its start in ``S3WQ_TEST_HOST_DIR``, one file per process.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .escaping_processor import HOST_DIR_ENV
from .heartbeat_processor import process as beat

Path(os.environ[HOST_DIR_ENV], str(os.getpid())).touch()


def _flush_forever() -> None:
    while True:
        time.sleep(0.05)


threading.Thread(target=_flush_forever, daemon=True, name="sdk-flusher").start()
_POOL = ThreadPoolExecutor(3, thread_name_prefix="warm")
_POOL.submit(_flush_forever)  # a job of the module's own, running in the pool from import on
for _started in [_POOL.submit(time.sleep, 0.01) for _ in range(2)]:
    _started.result()


def process(group, ctx) -> None:
    _POOL.submit(sum, range(100)).result()
    beat(group, ctx)
