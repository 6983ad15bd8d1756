"""A processor with a module-level ThreadPoolExecutor that fills lazily (``reliability.lazy_pool_processor:process``).

No thread exists at import: the first runs that submit work start the
pool's threads, which then wait idle between runs. An idle pool worker is
no run's leftover, so one processor host runs every group. Each host
records its start in ``S3WQ_TEST_HOST_DIR``, one file per process.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .escaping_processor import HOST_DIR_ENV
from .heartbeat_processor import process as beat

Path(os.environ[HOST_DIR_ENV], str(os.getpid())).touch()

_POOL = ThreadPoolExecutor(4, thread_name_prefix="lazy")


def process(group, ctx) -> None:
    list(_POOL.map(time.sleep, [0.02] * 4))  # up to four threads, started by the first runs
    beat(group, ctx)
