"""Scale: a request-level model of s3wq at 10M paths / 1M groups / 1,000 workers, calibrated from measured runs.

For each phase -- populate, worker start, steady-state drain, ``status``,
and the drain loop (the state machine's rounds) -- the model counts the S3
requests the code sends (read from the code, not guessed: see each function's
docstring), and from them the requests per second on each key prefix against
S3's per-prefix limits, the wall time and the cost. One size is modelled per
``--sizes`` entry (paths:workers); by default 10,000,000:1,000 and, to show
how it scales, 1,000,000:100 (100,000 groups). Each size also gets a sweep of
the processing time per group (``--sweep``).

What is calibrated, and from where:

* requests a collision costs, collisions per worker, and the worker's client
  CPU per group: a contention.py JSON (``--contention FILE``; the ``s3wq`` queue
  on the ``latency`` endpoint at the largest W), or built-in defaults equal to
  the values measured on this project's machine (say so in
  ``calibration.source``);
* populate's CPU, compressed bytes and memory per path: timed here, in
  process, on ``--calibrate-paths`` synthetic paths (make_groups, encode_groups
  and the sorting and splitting around them, as ``WorkIndex.populate`` does),
  and scaled linearly;
* ``status``'s LIST-page and GET latency: a status_scale.py JSON
  (``--status FILE``), or ``--list-page-ms`` and ``--s3-latency-ms``.

Prices, Step Functions transitions and the stack's Lambda settings come from
cost.py. Nothing here talks to S3.

    .venv/bin/python bench/scale.py
    .venv/bin/python bench/scale.py --contention contention.json --status status_scale.json
    .venv/bin/python bench/scale.py --sizes 10000000:1000 --group-seconds 10 --sweep 1,10,60
    .venv/bin/python bench/scale.py --sizes 20000:10 --calibrate-paths 5000     # seconds, for a smoke test
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from common import emit, machine
from cost import DEFAULT_S3_LATENCY_MS, PRICES_AS_OF, WORKER_MEMORY_MB
from scale_calibration import BUILT_IN, calibrate_populate, calibration_from_contention
from scale_phases import (
    LAMBDA_SCALING_ENVIRONMENTS,
    LAMBDA_SCALING_SECONDS,
    LOCKS_PER_LIVE_WORKER,
    MIN_START_WINDOW_SECONDS,
    POPULATE_SEGMENT_WRITES_IN_FLIGHT,
    model_size,
    sweep,
)
from scale_s3 import RATE_LIMITS, Latency, latency_from_args
from scale_worker import UNCONTENDED, USABLE_SECONDS, Calibration, cycle_seconds, segments_for, worker_start_requests

from s3wq.store import MAX_PARALLEL_REQUESTS

DEFAULT_LIST_PAGE_MS = 100.0
DEFAULT_SIZES = "10000000:1000,1000000:100"
DEFAULT_SWEEP = "0.1,1,10,60"
DEFAULT_CALIBRATE_PATHS = 200_000


def run(
    sizes: list[tuple[int, int]],
    group_size: int,
    group_seconds: float,
    seconds_list: list[float],
    lat: Latency,
    cal: Calibration,
    populate_cal: dict,
) -> dict:
    modelled = []
    for paths, workers in sizes:
        size = model_size(paths, group_size, workers, group_seconds, lat, cal, populate_cal)
        size["sweep"] = sweep(paths, group_size, workers, seconds_list, lat, cal, populate_cal)
        modelled.append(size)
    return {
        "benchmark": "scale",
        **machine(),
        "prices_as_of": PRICES_AS_OF,
        "limits": LIMITS,
        "calibration": {
            **{k: v for k, v in asdict(cal).items() if not k.startswith("measured_")},
            "s3_latency": {
                "request_seconds": lat.request,
                "list_page_seconds": lat.list_page,
                "status_get_seconds": lat.status_get,
                "source": lat.source,
            },
            "populate": populate_cal,
            "check": calibration_check(lat, cal),
        },
        "assumptions": ASSUMPTIONS,
        "sizes": modelled,
        "flags": every_flag(modelled, group_seconds),
    }


LIMITS = {
    "per_partitioned_prefix": RATE_LIMITS,
    "source": "AWS, Best practices design patterns: optimizing Amazon S3 performance (S3 User Guide)",
    "list": "LIST is in neither documented list; counted with PUT/COPY/POST/DELETE (its price tier), the cautious reading",
    "partitions": "each of worker_locks/, done_flags/, failed_flags/, index/segments/ counted as one partition until S3 splits it "
    "(partitions needed = ceil(rate / limit)); bucket_partitions_needed: if the whole bucket were one",
}
ASSUMPTIONS = {
    "cycle": "max(processor + 1 round trip (done flag), claim round trips) + client CPU per group",
    "worker_usable_seconds": USABLE_SECONDS,
    "worker_memory_mb": WORKER_MEMORY_MB,
    "start_window": f"max({MIN_START_WINDOW_SECONDS:g} s, {LAMBDA_SCALING_SECONDS:g} s x workers / {LAMBDA_SCALING_ENVIRONMENTS}) "
    "(Lambda's scaling rate); cold-start init time not counted",
    "collisions": "as calibrated per worker, grown with log2(1 + groups a worker does) (an upper bound)",
    "status": f"every group done, {LOCKS_PER_LIVE_WORKER} unflagged locks a worker, {MAX_PARALLEL_REQUESTS} threads",
    "populate": f"one populate of every path, segments encoded on one core as timed here and written {POPULATE_SEGMENT_WRITES_IN_FLIGHT} at a time",
}


def calibration_check(lat: Latency, cal: Calibration) -> dict | None:
    """The model beside the calibration run's one worker, where there is one."""
    one = cal.measured_groups_one_worker
    if not one:
        return None
    seg = segments_for(one)
    return {
        "what": "one worker, no processing time, at the calibration run's size (on this machine the local S3 server's CPU shares its cores)",
        "modelled_seconds_per_group": round(cycle_seconds(0.0, seg, lat, cal), 4),
        "measured_seconds_per_group": round(cal.measured_seconds_per_group_one_worker, 4)
        if cal.measured_seconds_per_group_one_worker
        else None,
        "modelled_marginal_requests_per_group": sum(UNCONTENDED.values()),
        "measured_marginal_requests_per_group": cal.measured_marginal_requests_per_group,
        "modelled_start_up_requests": sum(worker_start_requests(one).values()),
        "measured_start_up_requests": cal.measured_start_up_requests,
    }


def every_flag(modelled: list[dict], group_seconds: float) -> list[dict]:
    """Each size's flags at the headline processing time, then its sweep's at the others."""
    return [{"paths": s["paths"], "workers": s["workers"], "group_seconds": group_seconds, **f} for s in modelled for f in s["flags"]] + [
        {"paths": s["paths"], "workers": s["workers"], "group_seconds": row["group_seconds"], **f}
        for s in modelled
        for row in s["sweep"]
        if row["group_seconds"] != group_seconds
        for f in row["flags"]
    ]


def table(result: dict) -> list[list]:
    rows = []
    for size in result["sizes"]:
        label = f"{size['groups']:,} groups / {size['workers']:,} W"
        for name, ph in size["phases"].items():
            hot = ph.get("hottest") or {}
            rows.append([
                label, name, ph.get("wall_seconds", ""), ph.get("requests_total", ""), hot.get("prefix", ""), hot.get("class", ""),
                hot.get("rate_per_second", ""), hot.get("partitions_needed", ""), "FLAG" if ph.get("exceeds_limit") else "",
            ])  # fmt: skip
        if "cost" in size:
            cost = size["cost"]
            rows.append(
                [label, "cost", "", "", f"queue ${cost['queue_usd_total']:,.2f}", f"processing ${cost['processing_usd']:,.2f}", "", "", ""]
            )
        for row in size["sweep"]:
            hot = row["hottest"]
            rows.append([
                label, f"drain @ {row['group_seconds']:g} s/group", row["loop_wall_seconds"], "",
                hot["prefix"], hot["class"], hot["rate_per_second"], hot["partitions_needed"], "FLAG" if row["exceeds_limit"] else "",
            ])  # fmt: skip
    return rows


def sizes_arg(text: str) -> list[tuple[int, int]]:
    """``"10000000:1000,1000000:100"`` -> [(10000000, 1000), (1000000, 100)], for argparse."""
    sizes = []
    for part in text.split(","):
        paths, _, workers = part.partition(":")
        sizes.append((int(paths), int(workers)))
    if not sizes or min(min(s) for s in sizes) < 1:
        raise ValueError(f"expected paths:workers pairs of positive integers, got {text!r}")
    return sizes


def seconds_arg(text: str) -> list[float]:
    values = [float(part) for part in text.split(",") if part.strip()]
    if not values or min(values) < 0:
        raise ValueError(f"expected seconds separated by commas, got {text!r}")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes", type=sizes_arg, default=DEFAULT_SIZES, help=f"paths:workers to model, the first the headline (default {DEFAULT_SIZES})"
    )
    parser.add_argument("--group-size", type=int, default=10, help="paths per group (default 10)")
    parser.add_argument("--group-seconds", type=float, default=2.0, help="processing time of one group (default 2)")
    parser.add_argument(
        "--sweep", type=seconds_arg, default=DEFAULT_SWEEP, help=f"processing times to sweep at each size (default {DEFAULT_SWEEP})"
    )
    parser.add_argument("--contention", metavar="FILE", help="a contention.py JSON; without it, built-in defaults measured the same way")
    parser.add_argument("--status", metavar="FILE", help="a status_scale.py JSON, for the LIST-page and GET latencies")
    parser.add_argument(
        "--s3-latency-ms", type=float, default=DEFAULT_S3_LATENCY_MS, help=f"a small S3 request (default {DEFAULT_S3_LATENCY_MS:g})"
    )
    parser.add_argument(
        "--list-page-ms",
        type=float,
        default=DEFAULT_LIST_PAGE_MS,
        help=f"a full LIST page of 1,000 keys (default {DEFAULT_LIST_PAGE_MS:g})",
    )
    parser.add_argument(
        "--calibrate-paths",
        type=int,
        default=DEFAULT_CALIBRATE_PATHS,
        help=f"synthetic paths populate's CPU is timed on (default {DEFAULT_CALIBRATE_PATHS:,})",
    )
    args = parser.parse_args()
    if args.group_size < 1 or args.group_seconds < 0 or args.s3_latency_ms <= 0 or args.list_page_ms <= 0 or args.calibrate_paths < 100:
        parser.error("group size at least 1, latencies positive, group seconds not negative, --calibrate-paths at least 100")
    populate_cal = calibrate_populate(args.calibrate_paths, args.group_size)
    cal = (
        BUILT_IN if args.contention is None else calibration_from_contention(json.loads(Path(args.contention).read_text()), args.contention)
    )
    lat = latency_from_args(args.s3_latency_ms, args.list_page_ms, args.status)
    result = run(args.sizes, args.group_size, args.group_seconds, args.sweep, lat, cal, populate_cal)
    emit(result, table(result), ["size", "phase", "wall s", "S3 requests", "hottest prefix", "class", "req/s", "partitions", ""])


if __name__ == "__main__":
    main()
