"""Populate benchmark: N paths into groups on a local directory and on the local S3 endpoint.

Three populates on each backend, each in a fresh child process so that its
peak RSS (``ru_maxrss``) is that populate's alone:

* ``first``: N paths into an empty workspace;
* ``again``: the same N paths (idempotent: nothing is added);
* ``grown``: the N paths and 10 % new ones (only the new ones are added).

Reported for each: seconds spent in ``WorkIndex.populate`` (the input list is
built before the clock starts, as the CLI builds it from a manifest), peak
RSS and the RSS already taken by the input list, index bytes afterwards
(catalog and segments), what was added, and on S3 the requests by operation.
``--profile`` adds cProfile's heaviest functions of each populate.

    .venv/bin/python bench/populate.py                          # 1,000,000 paths, groups of 10, both backends
    .venv/bin/python bench/populate.py --paths 20000 --backend local
    .venv/bin/python bench/populate.py --profile 2> profile.txt
"""

from __future__ import annotations

import argparse
import cProfile
import io
import multiprocessing as mp
import os
import pstats
import sys
import tempfile
import time
from dataclasses import asdict

from common import WORKSPACE_PREFIX, emit, machine, peak_rss_mb, target

from s3wq import WorkIndex, open_backend
from s3wq.dev.local_s3 import LocalS3
from s3wq.store import layout, request_counts

TARGET_SECONDS = 15.0
TARGET_PEAK_RSS_MB = 1024.0
CHILD_TIMEOUT_SECONDS = 600.0
PHASES = (("first", 1.0), ("again", 1.0), ("grown", 1.1))
PROFILE_TOP = 15


def input_paths(count: int) -> list[str]:
    """Paths shaped like a real archive's: a thousand documents per folder."""
    return [f"s3://bench-inputs/pdfs/batch-{n // 1000:04d}/doc-{n:07d}.pdf" for n in range(count)]


def _profile_summary(profile: cProfile.Profile) -> list[dict]:
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    for (filename, line, name), (_, calls, own, cumulative, _) in stats.stats.items():
        function = f"{os.path.basename(filename)}:{line}({name})"
        rows.append({"function": function, "calls": calls, "own_s": round(own, 3), "cumulative_s": round(cumulative, 3)})
    return sorted(rows, key=lambda r: -r["own_s"])[:PROFILE_TOP]


def _populate_child(workspace: str, count: int, group_size: int, profile: bool, results) -> None:
    try:
        paths = input_paths(count)
        rss_input = peak_rss_mb()
        backend = open_backend(workspace)
        index = WorkIndex(backend)
        profiler = cProfile.Profile() if profile else None
        began = time.perf_counter()
        if profiler:
            profiler.enable()
        result = index.populate(paths, group_size)
        if profiler:
            profiler.disable()
        seconds = time.perf_counter() - began
        report = {
            "seconds": round(seconds, 3),
            "peak_rss_mb": peak_rss_mb(),
            "rss_after_input_mb": rss_input,
            **asdict(result),
        }
        if hasattr(backend, "s3"):
            report["s3_requests"] = request_counts(backend.s3)
        if profiler:
            report["profile_by_own_time"] = _profile_summary(profiler)
        results.put(report)
    except BaseException as exc:
        results.put({"error": f"{type(exc).__name__}: {exc}"})
        raise


def index_bytes(workspace: str) -> dict:
    backend = open_backend(workspace)
    keys = list(backend.list_keys("index/"))
    sizes = [len(backend.read(key).body) for key in keys]
    segments = sum(1 for k in keys if k.startswith(layout.INDEX_SEGMENTS_PREFIX))
    return {"index_bytes": sum(sizes), "index_objects": len(keys), "segments": segments}


def measure(workspace: str, count: int, group_size: int, profile: bool) -> dict:
    # spawn, not fork: the child's peak RSS must not include this process's memory.
    ctx = mp.get_context("spawn")
    phases = {}
    for name, factor in PHASES:
        results = ctx.Queue()
        child = ctx.Process(target=_populate_child, args=(workspace, round(count * factor), group_size, profile, results))
        child.start()
        try:
            report = results.get(timeout=CHILD_TIMEOUT_SECONDS)
            child.join(timeout=60)
        finally:
            if child.is_alive():
                child.kill()
        if "error" in report:
            raise SystemExit(f"populate {name} on {workspace} failed: {report['error']}")
        phases[name] = {"paths": round(count * factor), **report, **index_bytes(workspace)}
        print(f"  {name}: {report['seconds']} s, peak RSS {report['peak_rss_mb']} MB", file=sys.stderr)
    return phases


def run(count: int, group_size: int, backends: list[str], profile: bool) -> dict:
    result: dict = {"benchmark": "populate", **machine(), "paths": count, "group_size": group_size, "backends": {}}
    if "local" in backends:
        with tempfile.TemporaryDirectory(prefix="s3wq-bench-") as root:
            print("local directory ...", file=sys.stderr)
            result["backends"]["local"] = measure(os.path.join(root, WORKSPACE_PREFIX), count, group_size, profile)
    if "s3" in backends:
        with LocalS3() as server:
            os.environ.update(server.env())  # the children reach the endpoint through AWS_ENDPOINT_URL
            server.client().create_bucket(Bucket="bench-populate")
            print("local S3 endpoint ...", file=sys.stderr)
            result["backends"]["s3"] = measure(f"s3://bench-populate/{WORKSPACE_PREFIX}", count, group_size, profile)
    result["targets"] = []
    for name, phases in result["backends"].items():
        peak = max(p["peak_rss_mb"] for p in phases.values())
        seconds = phases["first"]["seconds"]
        result["targets"].append(target(f"populate {count:,} paths on {name}, seconds", seconds, TARGET_SECONDS, unit=" s"))
        result["targets"].append(target(f"populate on {name}, peak RSS of any phase", peak, TARGET_PEAK_RSS_MB, unit=" MB"))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", type=int, default=1_000_000, help="paths in the first populate (default 1,000,000)")
    parser.add_argument("--group-size", type=int, default=10, help="paths per group (default 10)")
    parser.add_argument("--backend", choices=["local", "s3", "both"], default="both")
    parser.add_argument("--profile", action="store_true", help="add cProfile's heaviest functions (by own time) of each populate")
    args = parser.parse_args()
    if args.paths < 1 or args.group_size < 1:
        parser.error("--paths and --group-size must be positive")
    backends = ["local", "s3"] if args.backend == "both" else [args.backend]
    result = run(args.paths, args.group_size, backends, args.profile)
    columns = ["paths", "added_groups", "seconds", "peak_rss_mb", "rss_after_input_mb", "index_bytes", "segments"]
    rows = [[name, phase, *(p[c] for c in columns)] for name, phases in result["backends"].items() for phase, p in phases.items()]
    emit(result, rows, ["backend", "phase", "paths", "groups added", "seconds", "peak RSS MB", "input RSS MB", "index bytes", "segments"])
    if args.profile:
        for name, phases in result["backends"].items():
            for phase, p in phases.items():
                print(f"\n{name} {phase}: heaviest functions by own time", file=sys.stderr)
                for row in p["profile_by_own_time"]:
                    own, cumulative, calls = row["own_s"], row["cumulative_s"], row["calls"]
                    print(f"  {own:8.3f} s own {cumulative:8.3f} s cum {calls:>9} calls  {row['function']}", file=sys.stderr)


if __name__ == "__main__":
    main()
