"""Drain benchmark: W worker processes x G groups against a local S3 endpoint.

Prints one JSON object: wall time, groups/s, S3 requests per group by
operation, claim conflicts and duplicate processing (groups whose processor
ran more than once, counted from markers the processor writes).

    .venv/bin/python bench/drain.py --workers 8 --groups 200
    .venv/bin/python bench/drain.py --workers 1 --groups 200          # uncontended
    .venv/bin/python bench/drain.py --workers 8 --groups 200 --work-ms 50
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from s3wq import WorkerSettings, WorkIndex, Worker
from s3wq.backends import S3Backend, make_s3_client, request_counts
from s3wq.local_s3 import LocalS3

MARKER_DIR_ENV = "S3WQ_BENCH_MARKERS"
WORK_MS_ENV = "S3WQ_BENCH_WORK_MS"


def marking_processor(group, ctx) -> None:
    time.sleep(float(os.environ.get(WORK_MS_ENV, "0")) / 1000)
    Path(os.environ[MARKER_DIR_ENV], f"{group.hash}.{uuid.uuid4().hex}").touch()


def _worker(bucket: str, index: int, workers: int, start, results) -> None:
    client = make_s3_client()
    backend = S3Backend(s3_client=client, bucket=bucket, prefix="ws")
    start.wait()
    report = Worker(backend, marking_processor, WorkerSettings(time_limit=600), worker_id=f"b{index}", position=index / workers).run()
    results.put({**report.to_dict(), "s3_requests": request_counts(client)})


def run(workers: int, groups: int, work_ms: float) -> dict:
    with LocalS3() as server, tempfile.TemporaryDirectory() as markers:
        os.environ.update(server.env())
        os.environ[MARKER_DIR_ENV] = markers
        os.environ[WORK_MS_ENV] = str(work_ms)
        client = server.client()
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=bucket)
        WorkIndex(S3Backend(s3_client=client, bucket=bucket, prefix="ws")).populate([f"s3://in/doc-{n:06d}.pdf" for n in range(groups)], 1)
        ctx = mp.get_context("spawn")
        start, results = ctx.Barrier(workers + 1), ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(bucket, i, workers, start, results)) for i in range(workers)]
        for p in procs:
            p.start()
        start.wait()
        began = time.perf_counter()
        reports = [results.get() for _ in procs]
        wall = time.perf_counter() - began
        for p in procs:
            p.join()
        runs = Counter(name.split(".")[0] for name in os.listdir(markers))
    requests: Counter = Counter()
    for r in reports:
        requests.update(r["s3_requests"])
    total = sum(requests.values())
    return {
        "workers": workers,
        "groups": groups,
        "work_ms": work_ms,
        "wall_seconds": round(wall, 3),
        "groups_per_second": round(groups / wall, 1),
        "requests_per_group": round(total / groups, 3),
        "requests_per_group_by_operation": {op: round(n / groups, 3) for op, n in sorted(requests.items())},
        "conflicts": sum(r["conflicts"] for r in reports),
        "groups_processed": len(runs),
        "duplicate_processing": sum(1 for n in runs.values() if n > 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--work-ms", type=float, default=0.0, help="simulated processing time per group")
    args = parser.parse_args()
    print(json.dumps(run(args.workers, args.groups, args.work_ms)))


if __name__ == "__main__":
    main()
