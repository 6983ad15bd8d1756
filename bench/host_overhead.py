"""Host overhead: what a run in the processor host costs beyond the processor, against calling the processor in the worker.

A run of a processor that does nothing, through a processor host as ``s3wq
work`` and the Lambda worker run it: the worker's ``run`` message to the
warden and on to the runner, the call, the runner's leftover-thread check,
the warden's end-of-run scan of ``/proc``, and the reply back. Each shape is
run ``--runs`` times in one host, after a few warm-up runs:

* ``noop``: the processor returns at once (the scan finds nothing);
* ``child``: it starts a child process and waits for it (``true``), so the
  scan finds a zombie-free tree but the run did start a process;
* ``in-process``: the same no-op processor called in the worker's own
  thread (``InProcessRunner``'s way), the floor.

The JSON gives per-run medians and 90th percentiles in milliseconds, and the
host's overhead over the in-process call. A local-directory workspace: no
store request is made.

    .venv/bin/python bench/host_overhead.py
    .venv/bin/python bench/host_overhead.py --runs 2000 > host_overhead.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import emit, machine

from s3wq.host.run_ends import Returned
from s3wq.host.sandbox import ProcessorHost
from s3wq.model import Group
from s3wq.processors import ProcessorContext
from s3wq.processors.builtins import noop
from s3wq.protocol import clock
from s3wq.store import LocalBackend

WARM_UP_RUNS = 20
SHAPES = {"noop": "noop", "child": "bench_host_processors:starts_a_child"}
_HASH = "0" * 40


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _summary(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    return {"median_ms": round(statistics.median(ms), 3), "p90_ms": round(_percentile(ms, 0.9), 3), "runs": len(ms)}


def host_runs(spec: str, workspace: str, runs: int) -> list[float]:
    host = ProcessorHost(spec, workspace)
    try:
        host.start()
        times = []
        for n in range(WARM_UP_RUNS + runs):
            started = time.perf_counter()
            host.run(_HASH, ["a"], worker_id="bench", attempt=1, owner="o", deadline_epoch=time.time() + 600, held_until=clock.now() + 600)
            end = host.wait(60)
            if not isinstance(end, Returned) or end.leftovers:
                raise SystemExit(f"host_overhead: a {spec} run did not return cleanly: {end}")
            if n >= WARM_UP_RUNS:
                times.append(time.perf_counter() - started)
        return times
    finally:
        host.close()


def in_process_runs(workspace: str, runs: int) -> list[float]:
    backend = LocalBackend(workspace)
    times = []
    for n in range(WARM_UP_RUNS + runs):
        started = time.perf_counter()
        group = Group(_HASH, ("a",))
        ctx = ProcessorContext(worker_id="bench", attempt=1, deadline=time.time() + 600, group=group, backend=backend, owner="o")
        noop(group, ctx)
        ctx.end_run()
        if n >= WARM_UP_RUNS:
            times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=500, help="runs per shape, after %d warm-up runs (default 500)" % WARM_UP_RUNS)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_host_processors, for the host (PYTHONPATH from sys.path)
    with tempfile.TemporaryDirectory() as workspace:
        shapes = {name: _summary(host_runs(spec, workspace, args.runs)) for name, spec in SHAPES.items()}
        shapes["in-process"] = _summary(in_process_runs(workspace, args.runs))
    floor = shapes["in-process"]["median_ms"]
    for name in SHAPES:
        shapes[name]["overhead_median_ms"] = round(shapes[name]["median_ms"] - floor, 3)
    rows = [[name, s["median_ms"], s["p90_ms"], s.get("overhead_median_ms", "")] for name, s in shapes.items()]
    emit(
        {"benchmark": "host_overhead", "machine": machine(), "runs": args.runs, "shapes": shapes},
        rows,
        ["shape", "median ms", "p90 ms", "overhead ms"],
    )


if __name__ == "__main__":
    main()
