"""Worker start benchmark: what it costs workers to be ready on a big, half-finished workspace.

Setup (not measured), for each size G: G groups of 10 paths populated on the
local S3 endpoint, and a done flag for every other group.

Measured, for each G:

* ``one_worker``: a lone worker in a fresh process; S3 requests by operation
  and seconds from ``Worker.run()`` to its first claim (the moment its
  processor is called: lock won, done flag checked), and its peak RSS;
* ``workers``: N worker processes told their index (as Map items are) start
  together at a barrier and stop after their first group: the requests all
  of them sent until each was ready, until they stopped, and the spread of
  their ready times. The groups they finish are put back afterwards.
* ``olmocr``: the published olmocr queue's start for comparison (see
  olmocr_queue.py): GET the one index object, list every done flag, then
  claim. One worker is measured; its N-worker total is N times that, because
  every olmocr worker makes the same listing (marked "computed").

The 2x2 grid of sizes and worker counts shows how the total grows: if it is
O(workers + groups/1000), the interaction term T(G2,N2) - T(G1,N2) - T(G2,N1)
+ T(G1,N1) is about zero; for O(workers x groups/1000) it is not.
The local server's LIST reads every key of the bucket, so seconds are
pessimistic for listings; request counts are exact.

    .venv/bin/python bench/start.py                                   # G = 50,000 and 100,000; N = 50 and 100
    .venv/bin/python bench/start.py --groups 2000 --workers 4 --no-olmocr
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import boto3
import olmocr_queue
from common import WORKSPACE_PREFIX, emit, machine, peak_rss_mb, positive_ints, reset_server, target

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.dev.local_s3 import LocalS3
from s3wq.index import encode_groups
from s3wq.store import S3Backend, counting_requests, layout, make_s3_client, request_counts
from s3wq.worker import WorkerObserver

GROUP_SIZE = 10
LAMBDA_MEMORY_MB = 1769  # the worker function's memory (one full vCPU)
# "Well under" a Lambda's memory, read as a quarter of it.
TARGET_PEAK_RSS_MB = LAMBDA_MEMORY_MB / 4
RUN_TIMEOUT_SECONDS = 900.0
SEED_THREADS = 16
BUCKET_PREFIX = "bench-start"


class FirstClaim(WorkerObserver):
    """Records when and after how many requests the worker got its first group.

    For s3wq it is the worker's observer, told when a group starts -- before
    the worker begins claiming the next one ahead; for olmocr, its processor.
    """

    def __init__(self, client):
        self.client = client
        self.ready_at: float | None = None
        self.requests: dict[str, int] = {}
        self.hash: str | None = None

    def group_started(self, group, claim=None) -> None:
        if self.ready_at is None:
            self.ready_at = time.monotonic()
            self.requests = request_counts(self.client)
            self.hash = group.hash

    def __call__(self, group, _ctx=None) -> None:
        self.group_started(group)

    def remaining_time(self) -> float:
        # After the first group the worker sees no time left and stops.
        return 0.0 if self.ready_at is not None else RUN_TIMEOUT_SECONDS


def _start_one(mode: str, bucket: str, index: int, workers: int, start, results) -> None:
    try:
        client = make_s3_client() if mode == "s3wq" else counting_requests(boto3.client("s3"))  # olmocr's own default client
        first = FirstClaim(client)
        rss_before = peak_rss_mb()
        if start is not None:
            start.wait()
        began = time.monotonic()
        if mode == "s3wq":
            backend = S3Backend(s3_client=client, bucket=bucket, prefix=WORKSPACE_PREFIX)
            settings = WorkerSettings(time_limit=RUN_TIMEOUT_SECONDS)
            Worker(
                backend,
                lambda group, ctx: None,
                settings,
                worker_id=f"w{index}",
                position=index / workers,
                remaining_time=first.remaining_time,
                observer=first,
            ).run()
        else:
            olmocr_queue.run_worker(client, f"s3://{bucket}/{WORKSPACE_PREFIX}", first, max_groups=1)
        results.put({
            "began": began,
            "ready_seconds": None if first.ready_at is None else first.ready_at - began,
            "requests_until_ready": first.requests,
            "requests_until_stopped": request_counts(client),
            "claimed": first.hash,
            "rss_before_run_mb": rss_before,
            "peak_rss_mb": peak_rss_mb(),
        })  # fmt: skip
    except BaseException as exc:
        if start is not None:
            start.abort()
        results.put({"error": f"worker {index}: {type(exc).__name__}: {exc}"})
        raise


def _collect(procs, results) -> list[dict]:
    try:
        reports = [results.get(timeout=RUN_TIMEOUT_SECONDS) for _ in procs]
        for p in procs:
            p.join(timeout=60)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        raise SystemExit(f"a worker failed: {errors[0]}")
    missing = [r for r in reports if r["claimed"] is None]
    if missing:
        raise SystemExit(f"{len(missing)} workers never claimed a group")
    return reports


def lone_worker(mode: str, bucket: str) -> dict:
    # spawn: a fresh interpreter, so its peak RSS is one worker's alone.
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    proc = ctx.Process(target=_start_one, args=(mode, bucket, 0, 1, None, results))
    proc.start()
    report = _collect([proc], results)[0]
    requests = report["requests_until_ready"]
    return {
        "ready_seconds": round(report["ready_seconds"], 3),
        "requests_until_ready": sum(requests.values()),
        "requests_until_ready_by_operation": requests,
        "rss_before_run_mb": report["rss_before_run_mb"],
        "peak_rss_mb": report["peak_rss_mb"],
        # What the run itself added to the interpreter, boto3 and the client.
        "run_rss_increase_mb": round(report["peak_rss_mb"] - report["rss_before_run_mb"], 1),
        "claimed": report["claimed"],
    }


def many_workers(bucket: str, workers: int) -> tuple[dict, list[str]]:
    ctx = mp.get_context("fork")  # start-up is not measured; fork only makes the benchmark quicker
    start, results = ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=_start_one, args=("s3wq", bucket, i, workers, start, results)) for i in range(workers)]
    for p in procs:
        p.start()
    try:
        start.wait(timeout=RUN_TIMEOUT_SECONDS)
    except threading.BrokenBarrierError:
        pass  # _collect reports the worker's error
    reports = _collect(procs, results)
    ready = [r["ready_seconds"] for r in reports]
    until_ready: Counter = Counter()
    until_stopped: Counter = Counter()
    for r in reports:
        until_ready.update(r["requests_until_ready"])
        until_stopped.update(r["requests_until_stopped"])
    claimed = [r["claimed"] for r in reports]
    return {
        "workers": workers,
        "requests_until_ready": sum(until_ready.values()),
        "requests_until_ready_by_operation": dict(sorted(until_ready.items())),
        "requests_per_worker_until_ready": round(sum(until_ready.values()) / workers, 2),
        "requests_until_stopped": sum(until_stopped.values()),
        "ready_seconds_median": round(statistics.median(ready), 3),
        "ready_seconds_max": round(max(ready), 3),
        "distinct_groups_claimed": len(set(claimed)),
    }, claimed


def put_back(client, bucket: str, hashes: list[str]) -> None:
    """Undo the workers' first groups, so every run starts from the same half-done state."""
    for hash_ in set(hashes):
        client.delete_object(Bucket=bucket, Key=f"{WORKSPACE_PREFIX}/{layout.done_key(hash_)}")


def prepare(server: LocalS3, groups: int) -> tuple[str, list]:
    """Populate ``groups`` groups and mark every other one done; not measured."""
    client = server.client()
    bucket = f"{BUCKET_PREFIX}-{groups}"
    client.create_bucket(Bucket=bucket)
    backend = S3Backend(s3_client=client, bucket=bucket, prefix=WORKSPACE_PREFIX)
    index = WorkIndex(backend)
    index.populate([f"s3://bench-inputs/pdfs/doc-{n:08d}.pdf" for n in range(groups * GROUP_SIZE)], GROUP_SIZE)
    all_groups = list(index.iter_groups())
    began = time.monotonic()
    with ThreadPoolExecutor(SEED_THREADS) as pool:
        list(pool.map(lambda g: backend.write(layout.done_key(g.hash), b""), all_groups[::2]))
    print(f"  {len(all_groups[::2]):,} done flags written in {time.monotonic() - began:.0f} s", file=sys.stderr)
    return bucket, all_groups


def olmocr_start(server: LocalS3, bucket: str, all_groups: list) -> dict:
    """olmocr's start on the same state: its one index object (s3wq's rows are olmocr's format) is written for it and removed after."""
    backend = S3Backend(s3_client=server.client(), bucket=bucket, prefix=WORKSPACE_PREFIX)
    backend.write(layout.LEGACY_INDEX_KEY, encode_groups(all_groups))
    try:
        one = lone_worker("olmocr", bucket)
    finally:
        backend.delete(layout.LEGACY_INDEX_KEY)
    put_back(server.client(), bucket, [one["claimed"]])
    return one


def interaction(totals: dict[tuple[int, int], float], sizes: list[int], counts: list[int]) -> float | None:
    if len(sizes) < 2 or len(counts) < 2:
        return None
    (g1, g2), (n1, n2) = (sizes[0], sizes[-1]), (counts[0], counts[-1])
    return totals[g2, n2] - totals[g1, n2] - totals[g2, n1] + totals[g1, n1]


def run(sizes: list[int], counts: list[int], with_seed: bool) -> dict:
    per_size = []
    totals: dict[tuple[int, int], float] = {}
    seed_totals: dict[tuple[int, int], float] = {}
    with LocalS3() as server:
        os.environ.update(server.env())
        for groups in sizes:
            reset_server(server.endpoint)
            print(f"G={groups:,}: populating and marking half done ...", file=sys.stderr)
            bucket, all_groups = prepare(server, groups)
            entry: dict = {"groups": groups, "done": len(all_groups[::2])}
            entry["one_worker"] = lone_worker("s3wq", bucket)
            put_back(server.client(), bucket, [entry["one_worker"]["claimed"]])
            entry["runs"] = []
            for workers in counts:
                print(f"G={groups:,}: {workers} workers starting together ...", file=sys.stderr)
                measured, claimed = many_workers(bucket, workers)
                put_back(server.client(), bucket, claimed)
                entry["runs"].append(measured)
                totals[groups, workers] = measured["requests_until_ready"]
            if with_seed:
                print(f"G={groups:,}: olmocr's start ...", file=sys.stderr)
                olmocr_queue.work_queue_module()  # installed before the clock starts
                seed = olmocr_start(server, bucket, all_groups)
                seed["computed_requests_until_ready"] = {str(n): n * seed["requests_until_ready"] for n in counts}
                entry["olmocr"] = seed
                for n in counts:
                    seed_totals[groups, n] = n * seed["requests_until_ready"]
            per_size.append(entry)
    result = {
        "benchmark": "start",
        **machine(),
        "endpoint": "local S3 (moto server; each PUT and DELETE runs alone)",
        "group_size": GROUP_SIZE,
        "sizes": per_size,
        "scaling": {
            "totals_until_ready": {f"{g}x{n}": t for (g, n), t in sorted(totals.items())},
            "interaction": interaction(totals, sizes, counts),
            "olmocr_totals_until_ready_computed": {f"{g}x{n}": t for (g, n), t in sorted(seed_totals.items())},
            "olmocr_interaction_computed": interaction(seed_totals, sizes, counts) if with_seed else None,
        },
    }
    result["targets"] = targets(per_size, result["scaling"]["interaction"], sizes)
    return result


def targets(per_size: list[dict], interaction_term: float | None, sizes: list[int]) -> list[dict]:
    largest, smallest = per_size[-1], per_size[0]
    found = [
        target(
            f"one worker's peak RSS at {largest['groups']:,} groups (well under {LAMBDA_MEMORY_MB} MB)",
            largest["one_worker"]["peak_rss_mb"],
            TARGET_PEAK_RSS_MB,
            unit=" MB",
        )
    ]
    if len(per_size) > 1:
        ratio = largest["one_worker"]["requests_until_ready"] / smallest["one_worker"]["requests_until_ready"]
        found.append(target("one worker's start requests, largest / smallest size (independent of groups)", round(ratio, 2), 1.0))
    if interaction_term is not None:
        # O(workers + groups/1000) allows an additive groups/1000 term but no
        # product: the interaction must stay within the groups/1000 difference.
        allowance = (sizes[-1] - sizes[0]) / 1000
        name = "interaction term of the 2x2 grid, requests (about 0 without a workers x groups term)"
        found.append(target(name, abs(interaction_term), allowance))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=positive_ints, default=[50_000, 100_000], help="comma-separated sizes (default 50000,100000)")
    parser.add_argument("--workers", type=positive_ints, default=[50, 100], help="comma-separated worker counts (default 50,100)")
    parser.add_argument("--no-olmocr", dest="olmocr", action="store_false", help="skip olmocr's start")
    args = parser.parse_args()
    result = run(sorted(args.groups), sorted(args.workers), args.olmocr)
    rows = []
    for entry in result["sizes"]:
        g, one = entry["groups"], entry["one_worker"]
        ready = one["requests_until_ready"]
        rows.append([g, 1, "s3wq", ready, ready, one["ready_seconds"], one["peak_rss_mb"]])
        for r in entry["runs"]:
            per_worker = r["requests_per_worker_until_ready"]
            rows.append([g, r["workers"], "s3wq", r["requests_until_ready"], per_worker, r["ready_seconds_max"], ""])
        if "olmocr" in entry:
            seed = entry["olmocr"]
            ready = seed["requests_until_ready"]
            rows.append([g, 1, "olmocr", ready, ready, seed["ready_seconds"], seed["peak_rss_mb"]])
            for n, total in seed["computed_requests_until_ready"].items():
                rows.append([g, int(n), "olmocr (computed)", total, ready, "", ""])
    emit(result, rows, ["groups", "workers", "mode", "requests to ready", "per worker", "ready s (max)", "peak RSS MB"])


if __name__ == "__main__":
    main()
