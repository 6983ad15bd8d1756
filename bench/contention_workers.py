"""How one worker of each queue drains a contention run, as a process of its own or as one of many threads of one process.

Each reports what bench/contention.py sums up: its own report, when it
finished, its CPU seconds and its client's S3 requests.
"""

from __future__ import annotations

import os
import threading
import time

import bench_processor
import olmocr_queue
from common import WORKSPACE_PREFIX

from s3wq import Worker, WorkerSettings
from s3wq.host.runners import HostRunner
from s3wq.host.sandbox import ProcessorHost
from s3wq.store import S3Backend, counting_requests, make_s3_client, request_counts

S3WQ, UNINDEXED, OLMOCR = "s3wq", "s3wq-unindexed", "olmocr"
QUEUES = (S3WQ, UNINDEXED, OLMOCR)
# Far longer than any run: no lock goes stale, in any queue.
LEASE_SECONDS = 600.0
PROCESSOR = "bench_processor:mark"


def client_for(queue_name: str):
    """Each queue's own S3 client: s3wq's, and for olmocr the default boto3 client its pipeline makes."""
    if queue_name == OLMOCR:
        import boto3

        return counting_requests(boto3.client("s3"))
    return make_s3_client()


def make_runner(queue_name: str, bucket: str) -> HostRunner | None:
    """s3wq's processor runs in a processor host, as under ``s3wq work`` (started before the clock)."""
    if queue_name == OLMOCR:
        return None
    host = ProcessorHost(PROCESSOR, f"s3://{bucket}/{WORKSPACE_PREFIX}")
    host.start()
    return HostRunner(host)


def drain(queue_name: str, client, bucket: str, index: int, workers: int, runner: HostRunner | None) -> dict:
    """One worker of ``queue_name`` until the queue is empty; its report."""
    if queue_name == OLMOCR:
        # olmocr's pipeline runs its processing in the worker itself.
        return olmocr_queue.run_worker(client, f"s3://{bucket}/{WORKSPACE_PREFIX}", bench_processor.mark)
    backend = S3Backend(s3_client=client, bucket=bucket, prefix=WORKSPACE_PREFIX)
    position = index / workers if queue_name == S3WQ else None
    try:
        worker = Worker(backend, None, WorkerSettings(time_limit=LEASE_SECONDS), runner=runner, worker_id=f"w{index}", position=position)
        return worker.run().to_dict()
    finally:
        runner.host.close()


def processes_worker(queue_name: str, endpoint: str, bucket: str, index: int, workers: int, start, results) -> None:
    try:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        if queue_name == OLMOCR:
            olmocr_queue.work_queue_module()  # imported before the clock starts, as s3wq's modules are
        client = client_for(queue_name)  # after the fork: every worker has its own connections
        runner = make_runner(queue_name, bucket)
        start.wait()
        cpu = time.process_time()
        report = drain(queue_name, client, bucket, index, workers, runner)
        results.put(
            {**report, "finished_at": time.monotonic(), "cpu_seconds": time.process_time() - cpu, "s3_requests": request_counts(client)}
        )
    except BaseException as exc:  # reported to the parent, which fails the run
        start.abort()
        results.put({"error": f"worker {index}: {type(exc).__name__}: {exc}"})
        raise


def threads_worker(queue_name: str, endpoint: str, bucket: str, workers: int, start, results) -> None:
    """All of a run's workers as threads of this one process (for W in the hundreds)."""
    try:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        if queue_name == OLMOCR:
            olmocr_queue.work_queue_module()
        clients = [client_for(queue_name) for _ in range(workers)]
        runners = [make_runner(queue_name, bucket) for _ in range(workers)]
        reports: list[dict] = [{} for _ in range(workers)]

        def one(i: int) -> None:
            try:
                reports[i] = {**drain(queue_name, clients[i], bucket, i, workers, runners[i]), "finished_at": time.monotonic()}
            except BaseException as exc:  # noqa: BLE001 -- reported with the others
                reports[i] = {"error": f"worker {i}: {type(exc).__name__}: {exc}"}

        threads = [threading.Thread(target=one, args=(i,)) for i in range(workers)]
        start.wait()
        cpu = time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        spent = time.process_time() - cpu
        for i, report in enumerate(reports):
            # The process's CPU, shared out evenly: threads have no CPU clock of their own worth summing.
            results.put({**report, "cpu_seconds": spent / workers, "s3_requests": request_counts(clients[i])})
    except BaseException as exc:
        start.abort()
        results.put({"error": f"{type(exc).__name__}: {exc}"})
        raise
