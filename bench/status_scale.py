"""Status at scale: ``status`` and ``failures`` on a big workspace behind S3-like latency, and a model of them at 1M and 10M groups.

The workspace: N groups of one path (default 100,000), indexed by
``WorkIndex.populate`` over HTTP; 60 % done, 1 % failed (a failed flag and
its lock marked failed, as a worker leaves them), N/1000 more locks (held,
released, marked failed without a flag, olmocr's empty ones) and a few
foreign keys. The flags and locks are put into the local S3 server's store
before it serves, and its listings are answered as S3 answers them
(``prefilled_s3.py``). The counts read back are checked against the fill; a
mismatch fails the run.

``status`` and ``failures`` then run each in a fresh process (so that the
peak RSS is theirs alone), through ``latency_proxy.py`` (lognormal, median
20 ms, p99 60 ms), with a client from ``make_s3_client`` counting requests
by operation; the CPU of the client, the server and the proxy is measured
too (on a machine of two cores they share it). The cost of each kind of
request is measured one request at a time through the proxy: the latency and
client CPU of a LIST page of 1,000 done flags, of an empty LIST, of a GET of
a lock; the CPU a listed key costs is the difference between the first two.

Extrapolation, stated as a model: P partitions (``status.partition_digits``)
each list ``pages(done) + pages(failed) + pages(locks)`` pages one after
another; one GET per lock with neither flag; T threads
(``MAX_PARALLEL_REQUESTS``) kept busy; and the client's CPU, on one GIL::

    seconds = max(latency: (LIST pages x page latency + GETs x GET latency) / T,
                  chain:   the longest partition's pages x page latency + a GET,
                  cpu:     LISTs x CPU a LIST + keys listed x CPU a key + GETs x CPU a GET)

The model is set beside the measurement at N, and given for 1M and 10M
groups with the same fractions and costs; the design before (every index
segment read, then every flag listed, one page after another) beside it.

    .venv/bin/python bench/status_scale.py                        # 100,000 groups
    .venv/bin/python bench/status_scale.py --groups 2000          # seconds, for a smoke test
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from common import WORKSPACE_PREFIX, emit, machine, peak_rss_mb, target
from latency_proxy import LatencyProxy
from prefilled_s3 import PrefilledS3

from s3wq import WorkIndex
from s3wq.index import SEGMENT_TARGET_GROUPS, make_groups
from s3wq.model import LockState
from s3wq.ops.status import partition_digits
from s3wq.protocol.bodies import LockBody
from s3wq.store import MAX_PARALLEL_REQUESTS, S3Backend, layout
from s3wq.store.base import LIST_PAGE_KEYS

BUCKET = "bench-status"
DONE_FRACTION, FAILED_FRACTION, LOCKS_PER_THOUSAND = 0.60, 0.01, 1.0
LEASE_SECONDS = 900.0
TARGET_SECONDS_AT_1M = 5.0
EXTRAPOLATE_TO = (1_000_000, 10_000_000)
CHILD_TIMEOUT_SECONDS = 600.0
SAMPLES = 30  # requests of each kind timed one at a time
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The kinds of the N/1000 extra locks, in turn: two held, one released, one marked failed (its flag deleted), one olmocr's.
LOCK_KINDS = ("held", "held", "released", "failed-lock-only", "olmocr")
FOREIGN_KEYS = (
    "done_flags/done_not-a-hash.flag",
    "done_flags/notes.txt",
    "worker_locks/worker_" + "A" * 40 + ".lock",
    "failed_flags/x.json",
)


def input_paths(count: int) -> list[str]:
    return [f"s3://bench-inputs/pdfs/batch-{n // 1000:05d}/doc-{n:08d}.pdf" for n in range(count)]


def workspace_objects(paths: list[str], seed: int) -> tuple[dict[str, str], dict]:
    """Every flag and lock of the workspace (key -> body), and the counts ``status`` and ``failures`` must find."""
    groups = make_groups(paths, 1)
    order = list(groups)
    random.Random(seed).shuffle(order)
    n_done = round(len(groups) * DONE_FRACTION)
    n_failed = round(len(groups) * FAILED_FRACTION)
    n_locks = max(1, round(len(groups) * LOCKS_PER_THOUSAND / 1000))
    done, failed, locked = order[:n_done], order[n_done : n_done + n_failed], order[n_done + n_failed : n_done + n_failed + n_locks]
    objects: dict[str, str] = {}
    for group in done:
        objects[layout.done_key(group.hash)] = json.dumps({"worker_id": "w1", "attempt": 1, "owner": f"w1:{group.hash[:8]}"})
    for group in failed:
        doc = {
            "hash": group.hash,
            "paths": list(group.paths),
            "attempts": 3,
            "kind": "error",
            "error": "RuntimeError: bad scan",
            "worker_id": "w2",
        }
        objects[layout.failed_key(group.hash)] = json.dumps(doc)
        objects[layout.lock_key(group.hash)] = lock_body(group.hash, LockState.FAILED)
    kinds = dict.fromkeys(LOCK_KINDS, 0)
    for n, group in enumerate(locked):
        kind = LOCK_KINDS[n % len(LOCK_KINDS)]
        kinds[kind] += 1
        state = {"held": LockState.HELD, "released": LockState.RELEASED, "failed-lock-only": LockState.FAILED}.get(kind)
        objects[layout.lock_key(group.hash)] = "" if kind == "olmocr" else lock_body(group.hash, state)
    objects.update(dict.fromkeys(FOREIGN_KEYS, "{}"))
    failed_total = n_failed + kinds["failed-lock-only"]
    live = kinds["held"] + kinds["olmocr"]
    expected = {
        "groups": len(groups),
        "paths": len(paths),
        "done": n_done,
        "failed": failed_total,
        "locked": live,
        "pending": len(groups) - n_done - failed_total - live,
        "released": kinds["released"],
        "failures_listed": n_failed,
        "lock_keys": n_failed + n_locks,
        "unflagged_locks": n_locks,
    }
    return objects, expected


def lock_body(hash_: str, state: str) -> str:
    return LockBody(owner=f"w3:{hash_[:8]}", worker_id="w3", attempt=3, lease_seconds=LEASE_SECONDS, state=state).encode().decode("utf-8")


# --- measuring ------------------------------------------------------------------------------------------


def _measure_child(endpoint: str, operation: str, results) -> None:
    try:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        from s3wq.ops.inspection import list_failures
        from s3wq.ops.status import queue_status
        from s3wq.store import make_s3_client, request_counts

        client = make_s3_client()
        backend = S3Backend(s3_client=client, bucket=BUCKET, prefix=WORKSPACE_PREFIX)
        rss_before = peak_rss_mb()
        began, cpu = time.perf_counter(), time.process_time()
        answer = queue_status(backend) if operation == "status" else list_failures(backend)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
        report = {
            "seconds": round(seconds, 3),
            "client_cpu_seconds": round(cpu, 3),
            "s3_requests": request_counts(client),
            "peak_rss_mb": peak_rss_mb(),
            "rss_before_mb": rss_before,
        }
        if operation == "status":
            report["status"] = answer
        else:
            report["failures"] = len(answer)
            report["in_hash_order"] = [f["hash"] for f in answer] == sorted(f["hash"] for f in answer)
            report["with_paths"] = sum(1 for f in answer if f["paths"])
        results.put(report)
    except BaseException as exc:
        results.put({"error": f"{type(exc).__name__}: {exc}"})
        raise


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def measure(endpoint: str, operation: str, server_pid: int, proxy_pid: int) -> dict:
    ctx = mp.get_context("spawn")  # spawn, not fork: the child's peak RSS is its own
    results = ctx.Queue()
    child = ctx.Process(target=_measure_child, args=(endpoint, operation, results))
    child.start()
    try:
        # Started before the child is: the child's imports cost the server nothing.
        server_cpu, proxy_cpu = cpu_seconds(server_pid), cpu_seconds(proxy_pid)
        report = results.get(timeout=CHILD_TIMEOUT_SECONDS)
        report["server_cpu_seconds"] = round(cpu_seconds(server_pid) - server_cpu, 3)
        report["proxy_cpu_seconds"] = round(cpu_seconds(proxy_pid) - proxy_cpu, 3)
        child.join(timeout=60)
    finally:
        if child.is_alive():
            child.kill()
    if "error" in report:
        raise SystemExit(f"{operation} failed: {report['error']}")
    return report


def timed(requests) -> tuple[float, float, int]:
    """Wall and client CPU seconds of running the requests one after another, and how many there were."""
    began, cpu, count = time.perf_counter(), time.process_time(), 0
    for _ in requests:
        count += 1
    return time.perf_counter() - began, time.process_time() - cpu, count


def request_costs(backend: S3Backend, lock_keys: list[str]) -> dict:
    """Latency and client CPU of each kind of request, one at a time through the proxy."""

    def full_pages():
        for listed, _ in enumerate(backend.list_keys(layout.DONE_PREFIX), start=1):
            if listed % LIST_PAGE_KEYS == 0:
                yield listed
                if listed == SAMPLES * LIST_PAGE_KEYS:
                    return

    list(backend.list_keys("nothing-here/"))  # the first request of a client loads its models: not a request's cost
    backend.read(lock_keys[0])
    page_wall, page_cpu, pages = timed(full_pages())
    empty_wall, empty_cpu, empties = timed(list(backend.list_keys("nothing-here/")) for _ in range(SAMPLES))
    get_wall, get_cpu, gets = timed(backend.read(key) for key in lock_keys[:SAMPLES])
    return {
        "list_page_seconds": round(page_wall / pages, 4),
        "get_seconds": round(get_wall / gets, 4),
        "empty_list_seconds": round(empty_wall / empties, 4),
        "cpu_per_list": round(empty_cpu / empties, 5),
        "cpu_per_key_listed": round(max(0.0, page_cpu - pages * empty_cpu / empties) / (pages * LIST_PAGE_KEYS), 7),
        "cpu_per_get": round(get_cpu / gets, 5),
        "timed": {"full_pages": pages, "empty_lists": empties, "gets": gets},
    }


# --- the model -----------------------------------------------------------------------------------------


def pages(keys: float) -> int:
    return max(1, math.ceil(keys / LIST_PAGE_KEYS))


def bounded(groups: int, lists: int, chain_pages: int, keys: float, gets: int, costs: dict, **extra) -> dict:
    bounds = {
        "latency": (lists * costs["list_page_seconds"] + gets * costs["get_seconds"]) / MAX_PARALLEL_REQUESTS,
        "chain": chain_pages * costs["list_page_seconds"] + costs["get_seconds"],
        "cpu": lists * costs["cpu_per_list"] + keys * costs["cpu_per_key_listed"] + gets * costs["cpu_per_get"],
    }
    return {
        "groups": groups,
        **extra,
        "list_requests": lists,
        "get_requests": gets,
        "seconds": round(max(bounds.values()), 2),
        "bound_by": max(bounds, key=bounds.get),
        "bounds_seconds": {k: round(v, 2) for k, v in bounds.items()},
    }


def model_status(groups: int, costs: dict) -> dict:
    partitions = 16 ** partition_digits(groups)
    done, failed, extra_locks = groups * DONE_FRACTION, groups * FAILED_FRACTION, groups * LOCKS_PER_THOUSAND / 1000
    per_partition = pages(done / partitions) + pages(failed / partitions) + pages((failed + extra_locks) / partitions)
    # GETs: the catalog (before the flags and again after them), the look for olmocr's index, every lock with neither flag.
    gets = 3 + round(extra_locks)
    return bounded(groups, partitions * per_partition, per_partition, done + 2 * failed + extra_locks, gets, costs, partitions=partitions)


def model_failures(groups: int, costs: dict) -> dict:
    partitions = 16 ** partition_digits(groups)
    failed = groups * FAILED_FRACTION
    return bounded(
        groups, partitions * pages(failed / partitions), pages(failed / partitions), failed, 1 + round(failed), costs, partitions=partitions
    )


def model_previous_status(groups: int, costs: dict) -> dict:
    """The design before: the catalog and every segment read, every flag listed, one request after another; then the locks 16 at a time."""
    failed, extra_locks = groups * FAILED_FRACTION, groups * LOCKS_PER_THOUSAND / 1000
    segments = math.ceil(groups / SEGMENT_TARGET_GROUPS)
    lists = pages(groups * DONE_FRACTION) + pages(failed) + pages(failed + extra_locks)
    sequential = (
        (1 + segments) * costs["get_seconds"] + lists * costs["list_page_seconds"] + math.ceil(extra_locks / 16) * costs["get_seconds"]
    )
    return {"groups": groups, "list_requests": lists, "get_requests": 1 + segments + round(extra_locks), "seconds": round(sequential, 2)}


# --- the run -------------------------------------------------------------------------------------------


def check(expected: dict, status_run: dict, failures_run: dict) -> None:
    status = status_run["status"]
    fields = ("groups", "paths", "done", "failed", "locked", "pending", "released")
    wrong = {k: (status[k], expected[k]) for k in fields if status[k] != expected[k]}
    if wrong:
        raise SystemExit(f"status counted {wrong} (counted, filled)")
    listed = (failures_run["failures"], failures_run["with_paths"], failures_run["in_hash_order"])
    if listed != (expected["failures_listed"], expected["failures_listed"], True):
        raise SystemExit(f"failures listed {listed} (failures, with paths, in hash order), expected {expected['failures_listed']} in order")


def proxy_client(endpoint: str):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint)  # the fake credentials and region are in the environment


def run(groups: int, seed: int) -> dict:
    paths = input_paths(groups)
    objects, expected = workspace_objects(paths, seed)
    with tempfile.TemporaryDirectory(prefix="s3wq-status-scale-") as scratch:
        objects_file = Path(scratch) / "objects.jsonl"
        with open(objects_file, "w", encoding="utf-8") as out:
            for key, body in objects.items():
                out.write(json.dumps([f"{WORKSPACE_PREFIX}/{key}", body]) + "\n")
        began = time.perf_counter()
        with PrefilledS3(BUCKET, objects_file) as server:
            filled_seconds = time.perf_counter() - began
            os.environ.update(server.env())  # the fake credentials; each child sets its endpoint
            began = time.perf_counter()
            WorkIndex(S3Backend(s3_client=server.client(), bucket=BUCKET, prefix=WORKSPACE_PREFIX)).populate(paths, 1)
            populated_seconds = time.perf_counter() - began
            print(
                f"filled {len(objects):,} objects in {filled_seconds:.1f} s, indexed {groups:,} groups in {populated_seconds:.1f} s",
                file=sys.stderr,
            )
            del objects, paths
            with LatencyProxy(server.endpoint) as proxy:
                one_at_a_time = S3Backend(s3_client=proxy_client(proxy.endpoint), bucket=BUCKET, prefix=WORKSPACE_PREFIX)
                costs = request_costs(one_at_a_time, list(one_at_a_time.list_keys(layout.LOCKS_PREFIX))[: SAMPLES * 2])
                status_run = measure(proxy.endpoint, "status", server.process.pid, proxy.process.pid)
                failures_run = measure(proxy.endpoint, "failures", server.process.pid, proxy.process.pid)
    check(expected, status_run, failures_run)
    extrapolated = [
        {"status": model_status(g, costs), "failures": model_failures(g, costs), "previous_status": model_previous_status(g, costs)}
        for g in EXTRAPOLATE_TO
    ]
    at_1m = next(e["status"] for e in extrapolated if e["status"]["groups"] == 1_000_000)
    waiting_at_1m = max(at_1m["bounds_seconds"]["latency"], at_1m["bounds_seconds"]["chain"])
    return {
        "benchmark": "status_scale",
        **machine(),
        "endpoint": "local S3 (moto server, listings from a sorted index) behind latency_proxy.py: lognormal, median 20 ms, p99 60 ms",
        "workspace": {
            "groups": groups,
            "done_fraction": DONE_FRACTION,
            "failed_fraction": FAILED_FRACTION,
            "unflagged_locks": expected["unflagged_locks"],
            "lock_keys": expected["lock_keys"],
            "fill_seconds": round(filled_seconds, 1),
            "populate_seconds": round(populated_seconds, 1),
        },
        "threads": MAX_PARALLEL_REQUESTS,
        "partitions": 16 ** partition_digits(groups),
        # Under this name bench/scale.py reads list_page_seconds and get_seconds.
        "latency": costs,
        "status": status_run,
        "failures": failures_run,
        "model": {
            "seconds": "max(latency, chain, cpu): see the module docstring",
            "at_measured_size": {"status": model_status(groups, costs), "failures": model_failures(groups, costs)},
            "extrapolated": extrapolated,
        },
        "targets": [
            target(
                "status at 1,000,000 groups, latency endpoint, waiting on S3 (modelled)", waiting_at_1m, TARGET_SECONDS_AT_1M, unit=" s"
            ),
            target(
                "status at 1,000,000 groups, latency endpoint, with this machine's client CPU (modelled)",
                at_1m["seconds"],
                TARGET_SECONDS_AT_1M,
                unit=" s",
            ),
        ],
    }


def table(result: dict) -> list[list]:
    rows = []
    for operation in ("status", "failures"):
        measured = result[operation]
        requests = measured["s3_requests"]
        modelled = result["model"]["at_measured_size"][operation]
        rows.append([
            f"{operation} (measured)", result["workspace"]["groups"], result["partitions"], requests.get("ListObjectsV2", 0),
            requests.get("GetObject", 0), measured["seconds"], measured["client_cpu_seconds"], measured["peak_rss_mb"],
        ])  # fmt: skip
        rows.append([
            f"{operation} (model)", modelled["groups"], modelled["partitions"], modelled["list_requests"], modelled["get_requests"],
            modelled["seconds"], modelled["bounds_seconds"]["cpu"], "",
        ])  # fmt: skip
    for row in result["model"]["extrapolated"]:
        for name in ("status", "failures", "previous_status"):
            m = row[name]
            cpu = m["bounds_seconds"]["cpu"] if "bounds_seconds" in m else ""
            rows.append(
                [f"{name} (model)", m["groups"], m.get("partitions", ""), m["list_requests"], m["get_requests"], m["seconds"], cpu, ""]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=100_000, help="groups in the workspace, one path each (default 100,000)")
    parser.add_argument("--seed", type=int, default=1, help="which groups are done, failed and locked")
    args = parser.parse_args()
    if args.groups < 100:
        parser.error("--groups must be at least 100")
    result = run(args.groups, args.seed)
    emit(result, table(result), ["what", "groups", "partitions", "LIST", "GET", "seconds", "client CPU s", "peak RSS MB"])


if __name__ == "__main__":
    main()
