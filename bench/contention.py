"""Contention: W workers drain G groups, s3wq beside the real olmocr queue, in the same run.

Queues (``--queues``):

* ``s3wq``: this library's Worker; worker i of W is told its index, as a
  Map item is (``--worker-index I --workers N``);
* ``s3wq-unindexed``: the same without the index (``s3wq work`` as a user
  starts it by hand: each worker picks a place from its id);
* ``olmocr``: the published ``olmocr`` package's ``WorkQueue`` (see
  ``olmocr_queue.py``), each worker with its own queue object as each
  machine of an olmocr fleet has.

Endpoints (``--endpoints``): ``cpu`` is the local S3 server as it is, whose
CPU is the bottleneck (a LIST page costs it far more than S3 charges in
time); ``latency`` is the same server behind ``latency_proxy.py``, which
makes each request wait as S3's do (lognormal, median 20 ms, p99 60 ms), so
that time goes to waiting on the store, as on AWS.

Every worker is a process of its own started at a barrier, up to
``--threads-from`` workers; from there all of a run's workers are threads of
one process. The processor (``bench_processor.py``) sleeps ``--work-ms`` and
leaves a marker file per run of a group, so duplicate processing is counted,
not guessed; s3wq runs it in a processor host, as ``s3wq work`` does, and
olmocr in the worker, as its pipeline does. Requests
are counted by each worker's own boto3 client, retries included; client CPU
is the workers' process time; server CPU is the S3 server process's.
The server is emptied between runs, and the queue order alternates.

    .venv/bin/python bench/contention.py                                     # the whole matrix (~20 minutes)
    .venv/bin/python bench/contention.py --endpoints latency --workers 8 --work-ms 0
    .venv/bin/python bench/contention.py --workers 1,3 --work-ms 0 --max-groups 12 > contention.json
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import bench_processor
import olmocr_queue
from common import WORKSPACE_PREFIX, emit, machine, positive_ints, reset_server, target
from contention_workers import OLMOCR, QUEUES, S3WQ, UNINDEXED, processes_worker, threads_worker
from latency_proxy import LatencyProxy

from s3wq import WorkIndex
from s3wq.dev.local_s3 import LocalS3
from s3wq.store import S3Backend, layout

CPU, LATENCY = "cpu", "latency"
ENDPOINTS = (CPU, LATENCY)
SECONDS_PER_RUN = 4.0  # aimed at, for one worker on the latency endpoint
MIN_GROUPS_PER_WORKER = 20
TARGET_REQUESTS_PER_GROUP = 4.0
TARGET_LATENCY_SPEEDUP = 2.0
TARGET_CPU_UNINDEXED_SPEEDUP = 1.3
# Pipelining: two workers, a 100 ms processor, on the latency endpoint, reach
# this share of the processor-only bound (workers x 1000 / work ms groups/s).
TARGET_PIPELINED_SHARE = 0.85
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def groups_for(workers: int, work_ms: float, max_groups: int, per_worker: int | None = None) -> int:
    """Enough groups that each worker has about SECONDS_PER_RUN of work (a group costs ~0.1 s of S3 waits)."""
    # At least MIN_GROUPS_PER_WORKER: with fewer, a run measures its start and its tail, not the queue.
    per_worker = per_worker or max(MIN_GROUPS_PER_WORKER, int(SECONDS_PER_RUN / (work_ms / 1000 + 0.1)))
    return max(2, min(max_groups, workers * per_worker))


def server_cpu_seconds(server: LocalS3) -> float:
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def prepare(server: LocalS3, queue_name: str, groups: int) -> str:
    """A fresh bucket holding ``groups`` one-path groups, populated by the queue's own populate."""
    reset_server(server.endpoint)
    client = server.client()
    bucket = "bench-contention"
    client.create_bucket(Bucket=bucket)
    paths = [f"s3://bench-inputs/doc-{n:07d}.pdf" for n in range(groups)]
    if queue_name == OLMOCR:
        olmocr_queue.populate(client, f"s3://{bucket}/{WORKSPACE_PREFIX}", paths, 1)
    else:
        WorkIndex(S3Backend(s3_client=client, bucket=bucket, prefix=WORKSPACE_PREFIX)).populate(paths, 1)
    return bucket


def run_queue(
    server: LocalS3, endpoint: str, queue_name: str, workers: int, groups: int, work_ms: float, *, threads: bool, timeout: float
) -> dict:
    bucket = prepare(server, queue_name, groups)
    with tempfile.TemporaryDirectory(prefix="s3wq-bench-") as markers:
        os.environ.update({bench_processor.MARK_DIR_ENV: markers, bench_processor.WORK_MS_ENV: str(work_ms)})
        reports, began, server_cpu = drain_by_workers(
            server, endpoint, queue_name, bucket, workers, groups, threads=threads, timeout=timeout
        )
        runs = Counter(name.split(".")[0] for name in os.listdir(markers))
    done = sum(1 for _ in S3Backend(s3_client=server.client(), bucket=bucket, prefix=WORKSPACE_PREFIX).list_keys(layout.DONE_PREFIX))
    return summary(groups, reports, began, server_cpu, runs, done)


def drain_by_workers(
    server: LocalS3, endpoint: str, queue_name: str, bucket: str, workers: int, groups: int, *, threads: bool, timeout: float
) -> tuple[list[dict], float, float]:
    """The workers' reports, when they started (after the barrier) and the S3 server's CPU seconds while they ran."""
    ctx = mp.get_context("fork")  # start-up is not measured; fork only makes the benchmark quicker
    results = ctx.Queue()
    if threads:
        start = ctx.Barrier(2)
        procs = [ctx.Process(target=threads_worker, args=(queue_name, endpoint, bucket, workers, start, results))]
    else:
        start = ctx.Barrier(workers + 1)
        procs = [
            ctx.Process(target=processes_worker, args=(queue_name, endpoint, bucket, i, workers, start, results)) for i in range(workers)
        ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    try:
        try:
            start.wait(timeout=timeout)
        except threading.BrokenBarrierError:
            raise SystemExit(f"{queue_name} run failed: {results.get(timeout=10).get('error', 'a worker did not start')}") from None
        began, server_cpu = time.monotonic(), server_cpu_seconds(server)
        try:
            reports = [results.get(timeout=max(0.0, deadline - time.monotonic())) for _ in range(workers)]
        except queue.Empty:
            raise SystemExit(f"{queue_name} run with {workers} workers and {groups} groups took over {timeout:g} s (--timeout)") from None
        server_cpu = server_cpu_seconds(server) - server_cpu
        for p in procs:
            p.join(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        raise SystemExit(f"{queue_name} run failed: {errors[0]}")
    return reports, began, server_cpu


def summary(groups: int, reports: list[dict], began: float, server_cpu: float, runs: Counter, done: int) -> dict:
    """One run's figures: its speed and requests per group, and how many groups were processed, done, and run twice."""
    wall = max(r["finished_at"] for r in reports) - began
    requests: Counter = Counter()
    for r in reports:
        requests.update(r["s3_requests"])
    total = sum(requests.values())
    return {
        "groups": groups,
        "wall_seconds": round(wall, 3),
        "groups_per_second": round(groups / wall, 2),
        "requests_total": total,
        "requests_per_group": round(total / groups, 3),
        "requests_per_group_by_operation": {op: round(n / groups, 3) for op, n in sorted(requests.items())},
        "client_cpu_ms_per_group": round(1000 * sum(r["cpu_seconds"] for r in reports) / groups, 2),
        "server_cpu_ms_per_group": round(1000 * server_cpu / groups, 2),
        # s3wq: a lock held by a live peer / a lock won on a group a peer had finished / LISTs of done flags.
        "conflicts": sum(r.get("conflicts", 0) for r in reports),
        "already_finished": sum(r.get("already_finished", 0) for r in reports),
        "listings": sum(r.get("listings", 0) for r in reports),
        # s3wq: time spent on the store by the helper threads (finishing the
        # last group, claiming the next) while a processor ran.
        "overlapped_ms_per_group": round(1000 * sum(r.get("overlapped_seconds", 0.0) for r in reports) / groups, 1),
        "groups_processed": len(runs),
        "groups_done": done,
        "duplicate_processing": sum(1 for n in runs.values() if n > 1),
        "extra_runs": sum(n - 1 for n in runs.values()),
    }


def run(
    endpoints: list[str],
    workers_list: list[int],
    work_list: list[float],
    queues: list[str],
    *,
    max_groups: int,
    per_worker: int | None,
    threads_from: int,
    timeout: float,
) -> dict:
    rows = []
    flip = False
    with LocalS3() as server:
        os.environ.update(server.env())  # the fake credentials; the endpoint is set per run
        proxy = LatencyProxy(server.endpoint) if LATENCY in endpoints else None
        try:
            if proxy is not None:
                proxy.__enter__()
            for endpoint_name in endpoints:
                url = server.endpoint if endpoint_name == CPU else proxy.endpoint
                for workers in workers_list:
                    for work_ms in work_list:
                        groups = groups_for(workers, work_ms, max_groups, per_worker)
                        flip = not flip
                        order = queues if flip else list(reversed(queues))
                        threads = workers >= threads_from
                        rows.append(measure_row(server, url, endpoint_name, workers, work_ms, queues, order, groups, threads, timeout))
        finally:
            if proxy is not None:
                proxy.__exit__(None, None, None)
    return {
        "benchmark": "contention",
        **machine(),
        "olmocr": olmocr_queue.OLMOCR_VERSION,
        "endpoints": {
            CPU: "local S3 (moto server; each PUT and DELETE runs alone)",
            LATENCY: "the same behind latency_proxy.py: lognormal, median 20 ms, p99 60 ms",
        },
        "group_size": 1,
        "queues": queues,
        "runs": rows,
        "targets": targets(rows),
    }


def measure_row(
    server: LocalS3,
    url: str,
    endpoint_name: str,
    workers: int,
    work_ms: float,
    queues: list[str],
    order: list[str],
    groups: int,
    threads: bool,
    timeout: float,
) -> dict:
    """One endpoint, worker count and processing time: each queue in ``order`` (it alternates); at one worker, each again at half the size."""
    row: dict = {"endpoint": endpoint_name, "workers": workers, "work_ms": work_ms, "groups": groups}
    for name in order:
        if name == UNINDEXED and workers == 1:
            continue  # one worker starts at the top either way
        row[name] = run_queue(server, url, name, workers, groups, work_ms, threads=threads, timeout=timeout)
        r = row[name]
        print(
            f"{endpoint_name} W={workers} work={work_ms:g} ms G={groups} {name}: {r['groups_per_second']} groups/s, "
            f"{r['requests_per_group']} requests/group, {r['duplicate_processing']} duplicates",
            file=sys.stderr,
        )
    if workers == 1:
        # Again at half the size: the difference is the per-group cost alone, without start-up.
        for name in [q for q in queues if q in row]:
            half = run_queue(server, url, name, 1, max(1, groups // 2), work_ms, threads=False, timeout=timeout)
            full_total = row[name]["requests_total"]
            marginal = (full_total - half["requests_total"]) / (groups - half["groups"])
            row[name]["marginal_requests_per_group"] = round(marginal, 3)
            row[name]["start_up_requests"] = round(full_total - marginal * groups, 1)
    if OLMOCR in row:
        row["ratio"] = {q: round(row[q]["groups_per_second"] / row[OLMOCR]["groups_per_second"], 2) for q in (S3WQ, UNINDEXED) if q in row}
    return row


def _find(rows: list[dict], endpoint: str, workers: int, work_ms: float) -> dict | None:
    return next((r for r in rows if (r["endpoint"], r["workers"], r["work_ms"]) == (endpoint, workers, work_ms)), None)


def targets(rows: list[dict]) -> list[dict]:
    found = []
    ours = [r[q] for r in rows for q in (S3WQ, UNINDEXED) if q in r]
    if ours:
        found.append(target("duplicate processing, s3wq, every run", max(o["duplicate_processing"] for o in ours), 0))
    single = [r[S3WQ] for r in rows if r["workers"] == 1 and S3WQ in r and "marginal_requests_per_group" in r[S3WQ]]
    if single:
        name = "S3 requests per group, one worker, start-up excluded"
        found.append(target(name, max(s["marginal_requests_per_group"] for s in single), TARGET_REQUESTS_PER_GROUP))
    latency = _find(rows, LATENCY, 8, 0.0)
    if latency and "ratio" in latency and S3WQ in latency["ratio"]:
        found.append(
            target(
                "groups/s over olmocr, latency endpoint, W=8, told their index",
                latency["ratio"][S3WQ],
                TARGET_LATENCY_SPEEDUP,
                at_most=False,
                unit="x",
            )
        )
    for row in rows:
        if row["endpoint"] == LATENCY and row["workers"] == 2 and row["work_ms"] == 100.0 and S3WQ in row:
            bound = row["workers"] * 1000 / row["work_ms"]
            name = "share of the processor-only bound, latency endpoint, W=2, 100 ms processor"
            found.append(target(name, round(row[S3WQ]["groups_per_second"] / bound, 3), TARGET_PIPELINED_SHARE, at_most=False))
    cpu = _find(rows, CPU, 8, 0.0)
    if cpu and "ratio" in cpu and UNINDEXED in cpu["ratio"]:
        found.append(
            target(
                "groups/s over olmocr, CPU-bound endpoint, W=8, not told their index",
                cpu["ratio"][UNINDEXED],
                TARGET_CPU_UNINDEXED_SPEEDUP,
                at_most=False,
                unit="x",
            )
        )
    return found


def table(result: dict) -> list[list]:
    lines = []
    for row in result["runs"]:
        for name in result["queues"]:
            if name not in row:
                continue
            r = row[name]
            lines.append([
                row["endpoint"], row["workers"], row["work_ms"], row["groups"], name, r["groups_per_second"], r["requests_per_group"],
                r["client_cpu_ms_per_group"], r["server_cpu_ms_per_group"], r["duplicate_processing"],
                row.get("ratio", {}).get(name, ""),
            ])  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoints", default=",".join(ENDPOINTS), help="cpu, latency or both (default both)")
    parser.add_argument("--workers", type=positive_ints, default=[1, 8, 32, 100], help="comma-separated worker counts (default 1,8,32,100)")
    parser.add_argument("--work-ms", default="0,50,500", help="comma-separated processing times per group in ms (default 0,50,500)")
    parser.add_argument("--queues", default=",".join(QUEUES), help=f"comma-separated, of {', '.join(QUEUES)} (default all)")
    parser.add_argument("--max-groups", type=int, default=1000, help="most groups per run (default 1000)")
    parser.add_argument("--groups-per-worker", type=int, help="groups per worker (default: about 4 s of work for each, and at least 20)")
    parser.add_argument(
        "--threads-from", type=int, default=64, help="from this many workers, run them as threads of one process (default 64)"
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds any one run may take before it is stopped (default 900)")
    args = parser.parse_args()
    endpoints = [e for e in args.endpoints.split(",") if e]
    queues = [q for q in args.queues.split(",") if q]
    if not set(endpoints) <= set(ENDPOINTS) or not set(queues) <= set(QUEUES):
        parser.error(f"--endpoints takes {', '.join(ENDPOINTS)}; --queues takes {', '.join(QUEUES)}")
    work = [float(w) for w in args.work_ms.split(",") if w]
    result = run(
        endpoints,
        args.workers,
        work,
        queues,
        max_groups=args.max_groups,
        per_worker=args.groups_per_worker,
        threads_from=args.threads_from,
        timeout=args.timeout,
    )
    header = [
        "endpoint",
        "W",
        "work ms",
        "G",
        "queue",
        "groups/s",
        "req/group",
        "client CPU ms/group",
        "server CPU ms/group",
        "duplicates",
        "x olmocr",
    ]
    emit(result, table(result), header)


if __name__ == "__main__":
    main()
