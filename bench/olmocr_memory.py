"""Memory of a worker on a workspace olmocr populated: peak RSS of a real ``s3wq work`` process against the index's size.

olmocr keeps its whole queue in one object, ``work_index_list.csv.zstd``.
For each size this benchmark writes such an index of N paths in groups of
``--group-size`` (with s3wq's ``encode_groups``, whose rows olmocr's reader
accepts; see tests/unit/test_index_encoding.py) into a fresh workspace on the
local S3 server, then starts ``python -m s3wq work`` on it with the ``noop``
processor, as a user would, entering the index at ``--position`` (half way by
default, so that the worker first reads past half the index). The worker is
stopped with SIGTERM, as an operator would stop it, once it has finished
``--max-groups`` groups.

While it runs, ``/proc/<pid>/status`` of the worker and of each process under
it (the processor host's warden and runner) is read every few milliseconds;
``VmHWM``, each process's own peak resident set, is reported for the worker
alone and summed over the worker and its processor host (an upper bound of
what they held at once: the runner is forked, and shares pages it has not
written with the warden). Also reported: the
seconds from the start of the process until its first lock appears on the
store (start-up and reading the index), the index's compressed and text
sizes, and the worker's own report.

    .venv/bin/python bench/olmocr_memory.py                                  # 1,000,000 paths
    .venv/bin/python bench/olmocr_memory.py --paths 1000000,10000000         # and 10,000,000 (a few minutes)
    .venv/bin/python bench/olmocr_memory.py --paths 2000 --max-groups 5      # a smoke run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import zstandard
from common import WORKSPACE_PREFIX, emit, machine, positive_ints, reset_server, target

from s3wq.dev.local_s3 import LocalS3
from s3wq.index import encode_groups
from s3wq.model import Group
from s3wq.store import layout

TARGET_WORKER_PEAK_RSS_MB = 300.0
BUCKET = "bench-olmocr-memory"
SAMPLE_SECONDS = 0.01
POLL_SECONDS = 0.05
# The worker stops on SIGTERM; one that does not within this is killed and the run fails.
STOP_GRACE_SECONDS = 60.0


def olmocr_paths(count: int) -> Iterator[str]:
    """Paths in sorted order, each with a random-looking name, so the index compresses as a real archive's does."""
    for n in range(count):
        tag = hashlib.sha1(str(n).encode()).hexdigest()[:16]
        yield f"s3://bench-archive/pdfs/doc-{n:09d}-{tag}.pdf"


def olmocr_groups(count: int, group_size: int) -> Iterator[Group]:
    """Consecutive chunks of the sorted paths, each named by its olmocr hash, as olmocr's populate makes them."""
    chunk: list[str] = []
    for path in olmocr_paths(count):
        chunk.append(path)
        if len(chunk) == group_size:
            yield Group(layout.group_hash(chunk), tuple(chunk))
            chunk = []
    if chunk:
        yield Group(layout.group_hash(chunk), tuple(chunk))


def write_index(client, count: int, group_size: int) -> dict:
    began = time.perf_counter()
    body = encode_groups(olmocr_groups(count, group_size))
    client.put_object(Bucket=BUCKET, Key=f"{WORKSPACE_PREFIX}/{layout.LEGACY_INDEX_KEY}", Body=body)
    # One-shot compression records the text's size in the frame header, as olmocr's reader requires.
    text_bytes = zstandard.frame_content_size(body)
    return {"index_bytes": len(body), "index_text_bytes": text_bytes, "write_seconds": round(time.perf_counter() - began, 2)}


def _proc_status(pid: int) -> dict[str, int]:
    """The ``Vm*`` lines of a process's status, in kB; empty once it has exited."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in lines) if k.startswith("Vm") and v.strip()}


def _descendants(pid: int) -> list[int]:
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found += [child, *_descendants(child)]
    return found


class PeakSampler(threading.Thread):
    """Reads the peak resident set (VmHWM) of a process and of every process under it until the process ends."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid = pid
        self.peaks_kb: dict[int, int] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            for pid in [self.pid, *_descendants(self.pid)]:
                peak = _proc_status(pid).get("VmHWM")
                if peak is not None:
                    self.peaks_kb[pid] = max(peak, self.peaks_kb.get(pid, 0))
            time.sleep(SAMPLE_SECONDS)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def worker_mb(self) -> float:
        return round(self.peaks_kb.get(self.pid, 0) / 1024, 1)

    def host_mb(self) -> float:
        return round(sum(kb for pid, kb in self.peaks_kb.items() if pid != self.pid) / 1024, 1)


def _count(client, prefix: str, at_most: int) -> int:
    return client.list_objects_v2(Bucket=BUCKET, Prefix=f"{WORKSPACE_PREFIX}/{prefix}", MaxKeys=at_most).get("KeyCount", 0)


def run_worker(server: LocalS3, position: float, max_groups: int, timeout: float) -> dict:
    """One ``s3wq work`` process until it has finished ``max_groups`` groups; its peaks, timings and report."""
    workers = 1000
    command = [
        sys.executable, "-m", "s3wq", "work", f"s3://{BUCKET}/{WORKSPACE_PREFIX}", "--processor", "noop", "--json",
        "--time-limit", str(int(timeout)), "--worker-index", str(round(position * workers) % workers), "--workers", str(workers),
    ]  # fmt: skip
    client = server.client()
    began = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **server.env()})
    sampler = PeakSampler(proc.pid)
    sampler.start()
    first_claim = None
    try:
        deadline = began + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if first_claim is None and (_count(client, layout.LOCKS_PREFIX, 1) or _count(client, layout.DONE_PREFIX, 1)):
                first_claim = time.monotonic() - began
            if first_claim is not None and _count(client, layout.DONE_PREFIX, max_groups) >= max_groups:
                break
            time.sleep(POLL_SECONDS)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=STOP_GRACE_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        sampler.stop()
    wall = time.monotonic() - began
    if time.monotonic() > began + timeout:
        raise SystemExit(f"the worker took over {timeout:g} s (--timeout)")
    try:
        report = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"the worker printed no report (exit code {proc.returncode}):\n{stderr[-2000:]}") from None
    return {
        "worker_peak_rss_mb": sampler.worker_mb(),
        "host_peak_rss_mb": sampler.host_mb(),
        "total_peak_rss_mb": round(sampler.worker_mb() + sampler.host_mb(), 1),
        "seconds_to_first_claim": None if first_claim is None else round(first_claim, 2),
        "wall_seconds": round(wall, 2),
        "groups_done": _count(client, layout.DONE_PREFIX, 1000),
        "worker_report": {
            k: report.get(k) for k in ("processed", "conflicts", "already_finished", "listings", "stopped_reason", "s3_requests")
        },
    }


def run(sizes: list[int], group_size: int, position: float, max_groups: int, timeout: float) -> dict:
    rows = []
    with LocalS3() as server:
        client = server.client()
        for count in sizes:
            reset_server(server.endpoint)
            client.create_bucket(Bucket=BUCKET)
            written = write_index(client, count, group_size)
            measured = run_worker(server, position, max_groups, timeout)
            row = {"paths": count, "groups": -(-count // group_size), **written, **measured}
            rows.append(row)
            print(
                f"{count:,} paths: worker peak {row['worker_peak_rss_mb']} MB (with its processor host {row['total_peak_rss_mb']} MB), "
                f"first claim after {row['seconds_to_first_claim']} s",
                file=sys.stderr,
            )
    return {
        "benchmark": "olmocr_memory",
        **machine(),
        "group_size": group_size,
        "position": position,
        "max_groups": max_groups,
        "runs": rows,
        "targets": [
            target(f"worker peak RSS, {r['paths']:,} paths", r["worker_peak_rss_mb"], TARGET_WORKER_PEAK_RSS_MB, unit=" MB") for r in rows
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", type=positive_ints, default=[1_000_000], help="comma-separated index sizes in paths (default 1,000,000)")
    parser.add_argument("--group-size", type=int, default=10, help="paths per group (default 10)")
    parser.add_argument("--position", type=float, default=0.5, help="where in [0, 1) of the index the worker starts (default 0.5)")
    parser.add_argument("--max-groups", type=int, default=200, help="groups the worker finishes before it is stopped (default 200)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a worker may take (default 900)")
    args = parser.parse_args()
    if args.group_size < 1 or args.max_groups < 1 or not 0 <= args.position < 1:
        parser.error("--group-size and --max-groups must be positive, --position in [0, 1)")
    result = run(args.paths, args.group_size, args.position, args.max_groups, args.timeout)
    columns = [
        "paths",
        "groups",
        "index_bytes",
        "index_text_bytes",
        "seconds_to_first_claim",
        "worker_peak_rss_mb",
        "host_peak_rss_mb",
        "total_peak_rss_mb",
    ]
    header = ["paths", "groups", "index bytes", "index text bytes", "s to first claim", "worker peak MB", "host peak MB", "sum MB"]
    emit(result, [[r[c] for c in columns] for r in result["runs"]], header)


if __name__ == "__main__":
    main()
