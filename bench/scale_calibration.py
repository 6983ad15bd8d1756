"""bench/scale.py's calibration: collisions and client CPU from a contention.py run (or built-in), populate's CPU timed here."""

from __future__ import annotations

import hashlib
import time

from common import peak_rss_mb
from scale_worker import UNCONTENDED, Calibration, worker_start_requests

from s3wq.index import encode_groups, make_groups, prefix_length

# contention.py on this project's machine, 2026-11-30, commit 5824687: the
# s3wq queue on the latency endpoint, no processing time. W=8, 320 groups:
# 9 groups found finished after their lock was won, 0 held locks, and 1 PUT,
# HEAD, DELETE and LIST more than the uncontended 4 per group and the 5
# start-up requests per worker, for each; W=1, 40 groups: 3.221 s,
# 13.7 ms client CPU per group, 4.0 marginal requests per group, 5.0 start-up.
BUILT_IN = Calibration(
    source="built-in defaults: contention.py, 2026-11-30, commit 5824687, latency endpoint, W=8 and W=1, no processing time",
    collisions_per_worker=9 / 8,
    groups_per_worker=320 / 8,
    requests_per_collision={"DeleteObject": 1.0, "HeadObject": 1.0, "ListObjectsV2": 1.0, "PutObject": 1.0},
    client_cpu_seconds_per_group=0.0137,
    measured_seconds_per_group_one_worker=3.221 / 40,
    measured_marginal_requests_per_group=4.0,
    measured_start_up_requests=5.0,
    measured_groups_one_worker=40,
)


def calibration_from_contention(doc: dict, path: str) -> Calibration:
    """Collisions and client CPU from contention.py's ``s3wq`` runs on the latency endpoint (largest W; W=1 for the checks)."""
    rows = [r for r in doc.get("runs", []) if r.get("endpoint") == "latency" and "s3wq" in r]
    if not rows:
        raise SystemExit(f"{path}: no s3wq run on the latency endpoint")
    quickest = min(r["work_ms"] for r in rows)
    rows = [r for r in rows if r["work_ms"] == quickest]
    widest = max(rows, key=lambda r: r["workers"])
    one = next((r for r in rows if r["workers"] == 1), None)
    run, workers, groups = widest["s3wq"], widest["workers"], widest["s3wq"]["groups"]
    measured = {op: round(n * groups) for op, n in run["requests_per_group_by_operation"].items()}
    start_up = worker_start_requests(groups)
    extra = {}
    for op, n in measured.items():
        expected = UNCONTENDED.get(op, 0) * groups + start_up.get(op, 0) * workers
        extra[op] = max(0, n - expected)
    found = run.get("already_finished", 0) + run.get("conflicts", 0)
    per_collision = {op: round(n / found, 3) for op, n in extra.items() if n} if found else {}
    cpu_run = one["s3wq"] if one else run
    return Calibration(
        source=f"{path}: contention.py, {doc.get('date', '?')}, commit {doc.get('commit', '?')}, latency endpoint, W={workers}"
        + (" and W=1" if one else "")
        + f", work {quickest:g} ms",
        collisions_per_worker=found / workers,
        groups_per_worker=groups / workers,
        requests_per_collision=per_collision,
        client_cpu_seconds_per_group=cpu_run["client_cpu_ms_per_group"] / 1000,
        measured_seconds_per_group_one_worker=one["s3wq"]["wall_seconds"] / one["s3wq"]["groups"] if one else None,
        measured_marginal_requests_per_group=one["s3wq"].get("marginal_requests_per_group") if one else None,
        measured_start_up_requests=one["s3wq"].get("start_up_requests") if one else None,
        measured_groups_one_worker=one["s3wq"]["groups"] if one else None,
    )


def synthetic_paths(count: int) -> list[str]:
    return [f"s3://bench-inputs/pdfs/batch-{n // 1000:05d}/doc-{n:08d}.pdf" for n in range(count)]


def calibrate_populate(paths_count: int, group_size: int) -> dict:
    """CPU, compressed bytes and memory per path of populate's in-process work, timed on synthetic paths.

    The steps WorkIndex.populate takes for a fresh workspace: dedupe and sort
    the paths, keep those not indexed, make_groups, sort the groups by hash,
    split them by hash prefix (prefix_length), encode_groups each and take its
    SHA-1 (its key). Run before anything else in this process, so that the
    peak RSS growth is this work's (the paths included, as populate holds them).
    """
    rss_before = peak_rss_mb()
    paths = synthetic_paths(paths_count)
    began = time.process_time()
    unique = set(paths)
    wanted = sorted(unique)
    indexed: set[str] = set()  # a fresh workspace
    fresh = [p for p in wanted if p not in indexed]
    groups = make_groups(fresh, group_size)
    digits = prefix_length(len(groups))
    by_prefix: dict[str, list] = {}
    for group in sorted(groups, key=lambda g: g.hash):
        by_prefix.setdefault(group.hash[:digits], []).append(group)
    compressed = 0
    for _, members in sorted(by_prefix.items()):
        body = encode_groups(members)
        hashlib.sha1(body).hexdigest()
        compressed += len(body)
    cpu = time.process_time() - began
    rss_growth = round(max(0.0, peak_rss_mb() - rss_before), 1)
    return {
        "paths": paths_count,
        "path_chars": round(sum(map(len, paths)) / len(paths), 1),
        "group_size": group_size,
        "cpu_seconds": round(cpu, 3),
        "cpu_us_per_path": round(1e6 * cpu / paths_count, 3),
        "compressed_bytes_per_path": round(compressed / paths_count, 2),
        "peak_rss_growth_mb": rss_growth,
        "memory_bytes_per_path": round(rss_growth * 2**20 / paths_count, 1),
    }
