"""Contention benchmark: W worker processes drain G groups on the local S3 endpoint.

For each W, two lock modes run one after the other on the same local S3
server (emptied between runs), from the same starting state:

* ``s3wq``: this library's Worker and its claim protocol (conditional
  writes); worker i of W is told its index, as a Map item is.
* ``check-then-put``: the seed's algorithm, re-implemented here from its
  description. Each worker GETs the one index object, lists every done flag,
  shuffles what is left and walks it: HEAD the done flag (skipped for hashes
  in its done cache, which is empty at first and re-listed in full whenever
  the worker meets a third finished group since its last claim or listing),
  HEAD the lock (live unless older than the lock timeout by the worker's own
  clock; a live lock drops the group for the rest of the run), PUT the lock
  unconditionally, process, PUT the done flag, DELETE the lock.

The processor does no work (unless --work-ms): it only leaves a marker file
per run of a group, so a group processed twice is counted, not guessed.
Requests are counted by the workers' own boto3 clients (retries included),
start-up included: each s3wq worker reads the catalog and a segment and lists
that segment's flags once, so requests per group at large W and small G
include a few per worker. With one worker the run is repeated at half the
size; the difference is the per-group cost alone ("marginal").

The local S3 server runs each PUT and DELETE alone (that is what makes moto's
conditional writes atomic, as S3's are); both modes pay that cost. A LIST
page is far dearer here than on S3: the server builds it in Python on the
same two cores (about 70 ms of CPU for 400 keys, against about 3 ms for a
PUT), so the seed's groups/s, bound by its listings, is lower here than it
would be on S3. Requests per group do not depend on the endpoint.

    .venv/bin/python bench/contention.py                               # W = 1, 8, 16, 32; both modes
    .venv/bin/python bench/contention.py --workers 8 --groups 400 --lock-mode s3wq
    .venv/bin/python bench/contention.py --workers 4 --groups 20 > contention.json
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from botocore.exceptions import ClientError

from common import WORKSPACE_PREFIX, emit, machine, positive_ints, reset_server, target
from s3wq import WorkerSettings, WorkIndex, Worker, layout
from s3wq.backends import S3Backend, make_s3_client, request_counts
from s3wq.index import decode_groups, encode_groups, make_groups
from s3wq.local_s3 import LocalS3

S3WQ = "s3wq"
CHECK_THEN_PUT = "check-then-put"
MODES = (S3WQ, CHECK_THEN_PUT)
# Far longer than any run: no lock goes stale, in either mode.
LOCK_TIMEOUT_SECONDS = 600.0
# The seed re-lists every done flag when it meets this many finished groups since its last claim or listing.
SEED_RELIST_AFTER = 3
TARGET_REQUESTS_PER_GROUP = 4.0
TARGET_SPEEDUP = 1.3


class Marker:
    """The processor: sleeps ``work_ms``, then leaves one marker file per run of a group."""

    def __init__(self, directory: str, work_ms: float):
        self.directory = directory
        self.work_ms = work_ms

    def __call__(self, group, _ctx=None) -> None:
        if self.work_ms:
            time.sleep(self.work_ms / 1000)
        Path(self.directory, f"{group.hash}.{uuid.uuid4().hex}").touch()


class CheckThenPutWorker:
    """The seed's queue (see the module docstring); its counters mirror WorkerReport's."""

    def __init__(self, client, bucket: str, prefix: str, processor, *, lock_timeout: float, seed: str, max_groups: int | None = None):
        self.s3 = client
        self.bucket = bucket
        self.prefix = prefix
        self.processor = processor
        self.lock_timeout = lock_timeout
        self.max_groups = max_groups  # stop after this many (start.py stops after its first)
        self.rng = random.Random(seed)
        self.report = {"processed": 0, "conflicts": 0, "already_finished": 0, "listings": 0}

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def _exists(self, key: str) -> dict | None:
        try:
            return self.s3.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def _done_hashes(self) -> set[str]:
        self.report["listings"] += 1
        found = set()
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(layout.DONE_PREFIX))
        strip = len(self._key(""))
        for page in pages:
            for item in page.get("Contents", []):
                hash_ = layout.hash_from_key(item["Key"][strip:], layout.DONE_PREFIX, layout.DONE_SUFFIX)
                if hash_:
                    found.add(hash_)
        return found

    def _lock_is_live(self, hash_: str) -> bool:
        head = self._exists(layout.lock_key(hash_))
        if head is None:
            return False
        # The worker's clock against S3's Last-Modified: the seed's staleness test.
        return (datetime.now(timezone.utc) - head["LastModified"]).total_seconds() <= self.lock_timeout

    def run(self) -> dict:
        body = self.s3.get_object(Bucket=self.bucket, Key=self._key(layout.LEGACY_INDEX_KEY))["Body"].read()
        groups = decode_groups(body, layout.LEGACY_INDEX_KEY)
        finished_at_start = self._done_hashes()
        todo = [g for g in groups if g.hash not in finished_at_start]
        self.rng.shuffle(todo)
        cache: set[str] = set()
        finished_since_claim = 0
        for group in todo:
            if group.hash in cache or self._exists(layout.done_key(group.hash)) is not None:
                self.report["already_finished"] += 1
                finished_since_claim += 1
                if finished_since_claim >= SEED_RELIST_AFTER:
                    cache = self._done_hashes()
                    finished_since_claim = 0
                continue
            if self._lock_is_live(group.hash):
                self.report["conflicts"] += 1
                continue
            self.s3.put_object(Bucket=self.bucket, Key=self._key(layout.lock_key(group.hash)), Body=b"")
            finished_since_claim = 0
            self.processor(group)
            self.s3.put_object(Bucket=self.bucket, Key=self._key(layout.done_key(group.hash)), Body=b"")
            self.s3.delete_object(Bucket=self.bucket, Key=self._key(layout.lock_key(group.hash)))
            self.report["processed"] += 1
            if self.max_groups is not None and self.report["processed"] >= self.max_groups:
                self.report["stopped_reason"] = "max_groups"
                return self.report
        self.report["stopped_reason"] = "queue_empty"
        return self.report


def _worker_process(mode: str, bucket: str, index: int, workers: int, processor: Marker, start, results) -> None:
    try:
        client = make_s3_client()  # after the fork: every worker has its own connections
        start.wait()
        if mode == S3WQ:
            backend = S3Backend(s3_client=client, bucket=bucket, prefix=WORKSPACE_PREFIX)
            settings = WorkerSettings(time_limit=LOCK_TIMEOUT_SECONDS)
            report = Worker(backend, processor, settings, worker_id=f"w{index}", position=index / workers).run().to_dict()
        else:
            report = CheckThenPutWorker(
                client, bucket, WORKSPACE_PREFIX, processor, lock_timeout=LOCK_TIMEOUT_SECONDS, seed=f"w{index}"
            ).run()
        results.put({**report, "finished_at": time.monotonic(), "s3_requests": request_counts(client)})
    except BaseException as exc:  # reported to the parent, which fails the run
        start.abort()  # a parent still waiting at the barrier stops waiting
        results.put({"error": f"worker {index}: {type(exc).__name__}: {exc}"})
        raise


def prepare(server: LocalS3, mode: str, groups: int) -> str:
    """A fresh bucket holding ``groups`` one-path groups, in the layout each mode reads."""
    reset_server(server.endpoint)
    client = server.client()
    bucket = "bench-contention"
    client.create_bucket(Bucket=bucket)
    backend = S3Backend(s3_client=client, bucket=bucket, prefix=WORKSPACE_PREFIX)
    paths = [f"s3://bench-inputs/doc-{n:07d}.pdf" for n in range(groups)]
    if mode == S3WQ:
        WorkIndex(backend).populate(paths, 1)
    else:
        # The seed reads one index object; s3wq's index rows are in its format.
        backend.write(layout.LEGACY_INDEX_KEY, encode_groups(make_groups(paths, 1)))
    return bucket


def run_mode(server: LocalS3, mode: str, workers: int, groups: int, work_ms: float, timeout: float) -> dict:
    bucket = prepare(server, mode, groups)
    ctx = mp.get_context("fork")  # start-up is not measured; fork only makes the benchmark quicker
    with tempfile.TemporaryDirectory(prefix="s3wq-bench-") as markers:
        processor = Marker(markers, work_ms)
        start, results = ctx.Barrier(workers + 1), ctx.Queue()
        procs = [ctx.Process(target=_worker_process, args=(mode, bucket, i, workers, processor, start, results)) for i in range(workers)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        try:
            try:
                start.wait(timeout=timeout)
            except threading.BrokenBarrierError:
                raise SystemExit(f"{mode} run failed: {results.get(timeout=10).get('error', 'a worker did not start')}") from None
            began = time.monotonic()
            try:
                reports = [results.get(timeout=max(0.0, deadline - time.monotonic())) for _ in procs]
            except queue.Empty:
                raise SystemExit(f"{mode} run with {workers} workers and {groups} groups took over {timeout:g} s (--timeout)") from None
            for p in procs:
                p.join(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
        errors = [r["error"] for r in reports if "error" in r]
        if errors:
            raise SystemExit(f"{mode} run failed: {errors[0]}")
        runs = Counter(name.split(".")[0] for name in os.listdir(markers))
    done = sum(1 for _ in S3Backend(s3_client=server.client(), bucket=bucket, prefix=WORKSPACE_PREFIX).list_keys(layout.DONE_PREFIX))
    wall = max(r["finished_at"] for r in reports) - began
    requests: Counter = Counter()
    for r in reports:
        requests.update(r["s3_requests"])
    total = sum(requests.values())
    duplicates = sum(1 for n in runs.values() if n > 1)
    return {
        "wall_seconds": round(wall, 3),
        "groups_per_second": round(groups / wall, 1),
        "requests_total": total,
        "requests_per_group": round(total / groups, 3),
        "requests_per_group_by_operation": {op: round(n / groups, 3) for op, n in sorted(requests.items())},
        "requests_by_operation": dict(sorted(requests.items())),
        # s3wq: a lock held by a live peer; check-then-put: a HEAD that found a live lock.
        "claim_conflicts": sum(r["conflicts"] for r in reports),
        # Groups found finished after all (s3wq: with the lock won; check-then-put: by HEAD or cache).
        "already_finished": sum(r["already_finished"] for r in reports),
        "listings": sum(r["listings"] for r in reports),
        "groups_processed": len(runs),
        "groups_done": done,
        "duplicate_processing": duplicates,
        "duplicate_fraction": round(duplicates / groups, 4),
        "extra_runs": sum(n - 1 for n in runs.values()),
    }


def run(workers_list: list[int], groups: int, modes: list[str], work_ms: float, timeout: float) -> dict:
    rows = []
    with LocalS3() as server:
        # Worker processes inherit the endpoint and the fake credentials.
        os.environ.update(server.env())
        for n, workers in enumerate(workers_list):
            row: dict = {"workers": workers, "groups": groups}
            # Alternate which mode goes first, so neither always meets a warmer server.
            for mode in modes if n % 2 == 0 else list(reversed(modes)):
                row[mode] = run_mode(server, mode, workers, groups, work_ms, timeout)
                r = row[mode]
                print(
                    f"W={workers} G={groups} {mode}: {r['wall_seconds']} s, {r['requests_per_group']} requests/group, "
                    f"{r['duplicate_processing']} duplicates",
                    file=sys.stderr,
                )
            if workers == 1:
                # Repeated at half the size: the difference is the per-group
                # cost alone, without the fixed start-up requests.
                for mode in modes:
                    half = run_mode(server, mode, 1, groups // 2, work_ms, timeout)
                    marginal = (row[mode]["requests_total"] - half["requests_total"]) / (groups - groups // 2)
                    row[mode]["marginal_requests_per_group"] = round(marginal, 3)
                    row[mode]["fixed_requests"] = round(row[mode]["requests_total"] - marginal * groups, 1)
            if all(m in row for m in MODES):
                ours, seed = row[S3WQ], row[CHECK_THEN_PUT]
                row["ratio"] = {
                    "groups_per_second": round(ours["groups_per_second"] / seed["groups_per_second"], 2),
                    "requests_per_group": round(ours["requests_per_group"] / seed["requests_per_group"], 3),
                }
            rows.append(row)
    return {
        "benchmark": "contention",
        **machine(),
        "endpoint": "local S3 (moto server; each PUT and DELETE runs alone)",
        "processor": f"marker{f' + {work_ms:g} ms sleep' if work_ms else ''}",
        "group_size": 1,
        "lock_modes": modes,
        "runs": rows,
        "targets": targets(rows),
    }


def targets(rows: list[dict]) -> list[dict]:
    found = []
    ours = [r[S3WQ] for r in rows if S3WQ in r]
    contended = [r for r in rows if r["workers"] > 1]
    if ours:
        found.append(target("duplicate processing, s3wq, every W", max(o["duplicate_processing"] for o in ours), 0))
    single = [r[S3WQ] for r in rows if r["workers"] == 1 and S3WQ in r]
    if single:
        found.append(target("S3 requests per group, uncontended (1 worker)", single[0]["requests_per_group"], TARGET_REQUESTS_PER_GROUP))
        if "marginal_requests_per_group" in single[0]:
            marginal = single[0]["marginal_requests_per_group"]
            found.append(target("S3 requests per group, uncontended, start-up excluded", marginal, TARGET_REQUESTS_PER_GROUP))
    ratios = [r["ratio"]["groups_per_second"] for r in contended if "ratio" in r]
    if ratios:
        found.append(target("groups/s over check-then-put, lowest contended W", min(ratios), TARGET_SPEEDUP, at_most=False, unit="x"))
    return found


def table(result: dict) -> list[list]:
    lines = []
    for row in result["runs"]:
        for mode in result["lock_modes"]:
            r = row[mode]
            lines.append([
                row["workers"], row["groups"], mode, r["wall_seconds"], r["groups_per_second"], r["requests_per_group"],
                r.get("marginal_requests_per_group", ""), r["claim_conflicts"], r["duplicate_processing"],
                row.get("ratio", {}).get("groups_per_second", "") if mode == S3WQ else "",
            ])  # fmt: skip
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=positive_ints, default=[1, 8, 16, 32], help="comma-separated worker counts (default 1,8,16,32)")
    parser.add_argument("--groups", type=int, default=400, help="groups per run (default 400)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds any one run may take before it is stopped (default 900)")
    parser.add_argument("--lock-mode", choices=[*MODES, "both"], default="both")
    parser.add_argument("--work-ms", type=float, default=0.0, help="simulated processing time per group (default 0)")
    args = parser.parse_args()
    if args.groups < 2:
        parser.error("--groups must be at least 2")
    modes = list(MODES) if args.lock_mode == "both" else [args.lock_mode]
    result = run(args.workers, args.groups, modes, args.work_ms, args.timeout)
    header = ["W", "G", "mode", "wall s", "groups/s", "req/group", "marginal", "conflicts", "duplicates", "x baseline"]
    emit(result, table(result), header)


if __name__ == "__main__":
    main()
