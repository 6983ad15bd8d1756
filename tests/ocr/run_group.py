"""Run the ocr processor on one group of local inputs, as a worker would, in the OCR venv: ``python run_group.py WORKSPACE PATH...``.

Prints, as JSON, the records it wrote to the workspace, the input errors it
reported, and the seconds the load and the run took. The run's deadline is
``OCR_TEST_RUN_SECONDS`` (default 600) after it starts; ``OCR_TEST_PROCESSOR`` names
the processor (default ``ocr``; ``vlm`` and ``auto`` too).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

from s3wq.errors import S3wqError
from s3wq.model import Group
from s3wq.processors import ProcessorContext, load_processor
from s3wq.store import LocalBackend, layout


def main(workspace: str, paths: list[str]) -> dict:
    started = time.perf_counter()
    processor = load_processor(os.environ.get("OCR_TEST_PROCESSOR", "ocr"))
    loaded = time.perf_counter()
    loaded_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    group = Group(layout.group_hash(paths), tuple(paths))
    backend = LocalBackend(workspace)
    ctx = ProcessorContext(
        worker_id="w-ocr-test",
        attempt=1,
        deadline=time.time() + float(os.environ.get("OCR_TEST_RUN_SECONDS", "600")),
        group=group,
        backend=backend,
    )
    try:
        processor(group, ctx)
    except S3wqError as exc:  # what the worker would see: ServiceUnavailable, say
        return {"raised": type(exc).__name__, "message": str(exc), "keys": sorted(backend.list_keys(""))}
    body = backend.read(layout.result_key(group.hash)).body.decode("utf-8")
    return {
        "records": [json.loads(line) for line in body.splitlines()],
        "input_errors": ctx.input_errors,
        "input_error_count": ctx.input_error_count,
        "load_seconds": round(loaded - started, 2),
        "run_seconds": round(time.perf_counter() - loaded, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "loaded_rss_mb": loaded_rss_mb,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2:])))
