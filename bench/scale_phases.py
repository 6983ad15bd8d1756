"""bench/scale.py's phases, each a count of requests and their rates: populate, the workers' start, the drain, ``status``, the
state machine's rounds (the drain loop), and what the whole job costs."""

from __future__ import annotations

import math

from cost import (
    MAX_ROUNDS,
    PRICES,
    SFN_PER_EXECUTION,
    SFN_PER_INVOCATION,
    SFN_PER_ROUND,
    STATUS_MEMORY_MB,
    WORKER_MEMORY_MB,
    WORKER_TIMEOUT_SECONDS,
    s3_dollars,
)
from scale_s3 import CATALOG, DONE, FAILED, LEGACY, LOCKS, SEGMENTS, SLOWDOWN_NOTE, Latency, add_to, by_operation, merged, phase, scaled
from scale_worker import (
    USABLE_SECONDS,
    Calibration,
    Segments,
    collision_tally,
    collisions,
    cycle_seconds,
    groups_per_invocation,
    per_group,
    segment_load,
    segments_for,
    worker_start,
    worker_start_seconds,
)

from s3wq.index import PARALLEL_SEGMENT_WRITES
from s3wq.ops.status import partition_digits
from s3wq.store import MAX_PARALLEL_REQUESTS, SMALL_BODY_BYTES
from s3wq.store.base import LIST_PAGE_KEYS

# Lambda: "for each function, your concurrency scaling rate is 1,000 execution
# environment instances every 10 seconds" (AWS Lambda Developer Guide, Lambda
# scaling behavior).
LAMBDA_SCALING_ENVIRONMENTS, LAMBDA_SCALING_SECONDS = 1000, 10.0
# However few workers, a Map and its cold starts spread their starts over about this long.
MIN_START_WINDOW_SECONDS = 1.0
# The stack's populate and status functions (infra/settings.py, infra/functions.py).
POPULATE_MEMORY_MB = 3008
POPULATE_TIMEOUT_SECONDS = WORKER_TIMEOUT_SECONDS
STATUS_TIMEOUT_SECONDS = 300
# WorkIndex.populate encodes its segments on one thread and PUTs them side by side.
POPULATE_SEGMENT_WRITES_IN_FLIGHT = PARALLEL_SEGMENT_WRITES
# A status call during a drain finds about two unflagged locks a worker: the
# group it runs and the one it claimed ahead (Worker._attempt).
LOCKS_PER_LIVE_WORKER = 2
MILLION = 1_000_000


def model_populate(paths: int, groups: int, seg: Segments, lat: Latency, populate_cal: dict) -> dict:
    """One populate of ``paths`` fresh paths (WorkIndex.populate on an empty workspace).

    Reads: the catalog (a 404), olmocr's index (a ranged GET, a 404), no
    segment yet. Writes: every segment (create, If-None-Match),
    POPULATE_SEGMENT_WRITES_IN_FLIGHT at a time while the next ones are
    encoded, then the catalog (create). A segment body above SMALL_BODY_BYTES
    waits for S3's 100-continue first: one more round trip. Not counted: the
    input itself (one manifest GET; a glob source would list its objects,
    1,000 a page).
    """
    tally: dict = {}
    add_to(tally, "GetObject", CATALOG, 1)
    add_to(tally, "GetObject", LEGACY, 1)
    add_to(tally, "PutObject", SEGMENTS, seg.count)
    add_to(tally, "PutObject", CATALOG, 1)
    segment_bytes = populate_cal["compressed_bytes_per_path"] * paths / seg.count
    put_seconds = lat.request * (2 if segment_bytes > SMALL_BODY_BYTES else 1)
    writing = seg.count * put_seconds / POPULATE_SEGMENT_WRITES_IN_FLIGHT
    cpu = populate_cal["cpu_us_per_path"] * paths / 1e6
    wall = 3 * lat.request + max(cpu, writing)  # the two GETs first, the catalog's PUT last; encoding overlaps the writes
    memory_mb = populate_cal["memory_bytes_per_path"] * paths / 2**20
    return phase(
        wall,
        tally,
        writing,
        cpu_seconds=round(cpu, 1),
        segment_writes_seconds=round(writing, 1),
        segments=seg.count,
        segment_bytes=round(segment_bytes),
        memory_mb=round(memory_mb),
        memory_limit_mb=POPULATE_MEMORY_MB,
        fits_memory=memory_mb < POPULATE_MEMORY_MB,
        fits_timeout=wall < POPULATE_TIMEOUT_SECONDS,
    )


def start_window(workers: int) -> float:
    return max(MIN_START_WINDOW_SECONDS, LAMBDA_SCALING_SECONDS * workers / LAMBDA_SCALING_ENVIRONMENTS)


def model_worker_start(workers: int, seg: Segments, lat: Latency) -> dict:
    """N invocations start over Lambda's scaling window; each reads the index and makes its first claim."""
    tally = scaled(merged(worker_start(seg), per_group(seg)), workers)
    # The first claim's done flag and release come later, in the drain.
    tally.pop(("PutObject", DONE), None)
    tally.pop(("DeleteObject", LOCKS), None)
    window = start_window(workers)
    return phase(
        window + worker_start_seconds(seg, lat),
        tally,
        window,
        start_window_seconds=window,
        per_worker_seconds=round(worker_start_seconds(seg, lat), 3),
    )


def model_drain(groups: int, workers: int, group_seconds: float, seg: Segments, lat: Latency, cal: Calibration) -> dict:
    """The steady state: every worker turning groups over at its cycle."""
    cycle = cycle_seconds(group_seconds, seg, lat, cal)
    rate = workers / cycle
    per_invocation = groups_per_invocation(group_seconds, cycle, worker_start_seconds(seg, lat))
    share = min(per_invocation, math.ceil(groups / workers)) or 1
    one = merged(
        per_group(seg),
        scaled(segment_load(seg), 1 / seg.groups_each),
        collision_tally(collisions(share, cal) / share, cal),
    )
    seconds = groups / rate
    return phase(
        seconds,
        scaled(one, groups),
        seconds,
        cycle_seconds=round(cycle, 4),
        coordination_seconds_per_group=round(cycle - group_seconds, 4),
        groups_per_second=round(rate, 2),
        requests_per_group=by_operation(one),
        uncontended_requests_per_group=by_operation(per_group(seg)),
        collisions_per_worker_invocation=round(collisions(share, cal), 2),
    )


def status_call(groups: int, live_locks: int, lat: Latency) -> tuple[dict, float, dict]:
    """One ``status`` (status.queue_status): requests, seconds, and how they split.

    The catalog GET and a ranged GET of olmocr's index (index_counts), one
    after the other; then, over MAX_PARALLEL_REQUESTS threads, every
    partition (16 ** partition_digits) lists its failed flags, its locks and
    its done flags, and each lock with neither flag is read. Counted at the
    most: every group done, few failed, ``live_locks`` unflagged locks.
    Seconds as status_scale.py models them: the busier of the threads' share
    of all requests and the longest partition's chain.
    """
    partitions = 16 ** partition_digits(groups)
    done_pages = max(1, math.ceil(groups / partitions / LIST_PAGE_KEYS))
    lock_pages = max(1, math.ceil(live_locks / partitions / LIST_PAGE_KEYS))
    tally: dict = {}
    add_to(tally, "GetObject", CATALOG, 2)  # before the flags (the partitions) and after them (the counts)
    add_to(tally, "GetObject", LEGACY, 1)
    add_to(tally, "ListObjectsV2", FAILED, partitions)
    add_to(tally, "ListObjectsV2", LOCKS, partitions * lock_pages)
    add_to(tally, "ListObjectsV2", DONE, partitions * done_pages)
    add_to(tally, "GetObject", LOCKS, live_locks)
    lists = partitions * (1 + lock_pages + done_pages)
    page = lat.listing(min(LIST_PAGE_KEYS, groups / partitions))
    busy = (lists * page + live_locks * lat.status_get) / MAX_PARALLEL_REQUESTS
    chain = (1 + lock_pages + done_pages) * page + (lat.status_get if live_locks else 0.0)
    scan = max(busy, chain)
    return tally, 3 * lat.request + scan, {"partitions": partitions, "list_pages": lists, "lock_reads": live_locks, "scan_seconds": scan}


def model_status(groups: int, workers: int, lat: Latency) -> dict:
    tally, seconds, detail = status_call(groups, LOCKS_PER_LIVE_WORKER * workers, lat)
    return phase(
        seconds,
        tally,
        detail["scan_seconds"],
        **{k: v for k, v in detail.items() if k != "scan_seconds"},
        threads=MAX_PARALLEL_REQUESTS,
        timeout_seconds=STATUS_TIMEOUT_SECONDS,
        fits_timeout=seconds < STATUS_TIMEOUT_SECONDS,
    )


def model_loop(groups: int, workers: int, group_seconds: float, seg: Segments, lat: Latency, cal: Calibration) -> tuple[dict, dict]:
    """The state machine's rounds (infra/orchestration.py): CountBefore, then NextRound -> RunWorkers (a Map of N
    worker invocations) -> CountAfter -> MoreRounds while groups remain and the round finished some, at most
    MAX_ROUNDS rounds an execution (then another execution is needed).

    Each invocation: its start, its groups at the cycle, a last release. Every
    round runs all N items; in the last round each worker has the groups left
    divided among them. Worker i enters the index at i/N each round and walks
    its own stretch; each segment it crosses, done or not, is loaded again.
    Returns the loop's figures and its requests (status calls included).
    """
    cycle = cycle_seconds(group_seconds, seg, lat, cal)
    start_seconds = worker_start_seconds(seg, lat)
    per_invocation = groups_per_invocation(group_seconds, cycle, start_seconds)
    if per_invocation == 0:
        return {"finishes": False, "why": f"a group of {group_seconds:g} s does not fit a worker's {USABLE_SECONDS} usable seconds"}, {}
    status_tally, status_seconds, _ = status_call(groups, LOCKS_PER_LIVE_WORKER * workers, lat)
    window = start_window(workers)
    share = groups / workers
    rounds = math.ceil(groups / (workers * per_invocation))
    executions = math.ceil(rounds / MAX_ROUNDS)
    status_calls = rounds + executions  # CountAfter per round, CountBefore per execution
    tally: dict = scaled(status_tally, status_calls)
    worker_seconds = 0.0
    wall = executions * status_seconds
    left = groups
    round_walls = []
    for r in range(1, rounds + 1):
        each = min(per_invocation, math.ceil(left / workers))
        done_here = min(left, each * workers)
        left -= done_here
        walked = min(share, r * per_invocation)
        loads = max(1, math.ceil(walked / seg.groups_each))
        invocation = merged(worker_start(seg), scaled(segment_load(seg), loads - 1), collision_tally(collisions(each, cal), cal))
        tally = merged(tally, scaled(invocation, workers), scaled(per_group(seg), done_here))
        billed = start_seconds + each * cycle + lat.request
        worker_seconds += billed * workers
        round_wall = window + billed + status_seconds
        round_walls.append(round(round_wall, 1))
        wall += round_wall
    invocations = rounds * workers
    return {
        "finishes": True,
        "wall_seconds": round(wall, 1),
        "rounds": rounds,
        "executions": executions,
        "needs_more_executions": executions > 1,
        "groups_per_invocation": per_invocation,
        "invocations": invocations,
        "status_calls": status_calls,
        "status_seconds_each": round(status_seconds, 2),
        "round_wall_seconds": round_walls if len(round_walls) <= 12 else [*round_walls[:6], "...", *round_walls[-3:]],
        # A round's cost beyond its groups: the Map's start window, a worker's start, its last release, CountAfter.
        "round_overhead_seconds": round(window + start_seconds + lat.request + status_seconds, 2),
        "transitions": SFN_PER_EXECUTION * executions + SFN_PER_ROUND * rounds + SFN_PER_INVOCATION * invocations,
        "worker_seconds": round(worker_seconds, 1),
    }, tally


def model_cost(groups: int, group_seconds: float, populate: dict, loop: dict) -> dict:
    """Dollars: the queue's (S3 requests, Step Functions, Lambda requests, coordination, status, populate) and the processing's."""
    s3_ops = dict(loop["requests"])
    for op, n in populate["requests"].items():
        s3_ops[op] = s3_ops.get(op, 0.0) + n
    gb_second = PRICES["lambda_arm64_per_gb_second"]
    processing_gb_s = groups * group_seconds * WORKER_MEMORY_MB / 1024
    worker_gb_s = loop["worker_seconds"] * WORKER_MEMORY_MB / 1024
    status_gb_s = loop["status_calls"] * loop["status_seconds_each"] * STATUS_MEMORY_MB / 1024
    populate_gb_s = populate["wall_seconds"] * POPULATE_MEMORY_MB / 1024
    queue = {
        "s3_requests": s3_dollars(s3_ops),
        "step_functions": loop["transitions"] * PRICES["step_functions_standard_per_1000_transitions"] / 1000,
        "lambda_requests": (loop["invocations"] + loop["status_calls"] + 1) * PRICES["lambda_per_million_requests"] / MILLION,
        "lambda_worker_coordination": max(0.0, worker_gb_s - processing_gb_s) * gb_second,
        "lambda_status": status_gb_s * gb_second,
        "lambda_populate": populate_gb_s * gb_second,
    }
    queue_total = sum(queue.values())
    processing = processing_gb_s * gb_second
    millions = groups / MILLION
    return {
        "queue_usd": {k: round(v, 4) for k, v in queue.items()},
        "queue_usd_total": round(queue_total, 2),
        "processing_usd": round(processing, 2),
        "total_usd": round(queue_total + processing, 2),
        "queue_usd_per_million_groups": round(queue_total / millions, 2),
        "processing_usd_per_million_groups": round(processing / millions, 2),
        "lambda_gb_seconds": {
            "workers_total": round(worker_gb_s),
            "workers_coordination": round(max(0.0, worker_gb_s - processing_gb_s)),
            "status": round(status_gb_s),
            "populate": round(populate_gb_s),
        },
        "s3_requests": {op: round(n) for op, n in sorted(s3_ops.items())},
    }


def model_size(paths: int, group_size: int, workers: int, group_seconds: float, lat: Latency, cal: Calibration, populate_cal: dict) -> dict:
    groups = math.ceil(paths / group_size)
    seg = segments_for(groups)
    populate = model_populate(paths, groups, seg, lat, populate_cal)
    loop, loop_requests = model_loop(groups, workers, group_seconds, seg, lat, cal)
    phases = {
        "populate": populate,
        "worker_start": model_worker_start(workers, seg, lat),
        "drain": model_drain(groups, workers, group_seconds, seg, lat, cal),
        "status": model_status(groups, workers, lat),
    }
    result = {
        "paths": paths,
        "groups": groups,
        "workers": workers,
        "group_seconds": group_seconds,
        "index": {
            "prefix_digits": seg.digits,
            "segments": seg.count,
            "groups_per_segment": round(seg.groups_each, 1),
            "flags_listed": seg.listed,
        },
        "phases": phases,
    }
    if loop["finishes"]:
        wall = loop.pop("wall_seconds")
        phases["drain_loop"] = phase(wall, loop_requests, wall, **loop)
        result["cost"] = model_cost(groups, group_seconds, populate, phases["drain_loop"])
        result["job_wall_hours"] = round((populate["wall_seconds"] + wall) / 3600, 2)
    else:
        phases["drain_loop"] = loop
    result["flags"] = flags(result)
    return result


def flags(size: dict) -> list[dict]:
    found = []
    for name, ph in size["phases"].items():
        hot = ph.get("hottest")
        if hot and hot["rate_per_second"] > hot["limit"]:
            found.append({
                "phase": name, "prefix": hot["prefix"], "class": hot["class"], "rate_per_second": hot["rate_per_second"],
                "limit": hot["limit"], "partitions_needed": hot["partitions_needed"],
                "note": ("one key: S3 cannot split it; " if hot["single_key"] else f"S3 must split {hot['prefix']} into {hot['partitions_needed']}; ") + SLOWDOWN_NOTE,
            })  # fmt: skip
        for limit in ("fits_timeout", "fits_memory"):
            if ph.get(limit) is False:
                found.append({"phase": name, "problem": limit.replace("fits_", "exceeds its function's ")})
        if ph.get("needs_more_executions"):
            found.append(
                {
                    "phase": name,
                    "problem": f"{ph['rounds']} rounds: the state machine stops after {MAX_ROUNDS}; {ph['executions']} executions needed",
                }
            )
        if ph.get("finishes") is False:
            found.append({"phase": name, "problem": ph["why"]})
    return found


def sweep(
    paths: int, group_size: int, workers: int, seconds_list: list[float], lat: Latency, cal: Calibration, populate_cal: dict
) -> list[dict]:
    rows = []
    for group_seconds in seconds_list:
        size = model_size(paths, group_size, workers, group_seconds, lat, cal, populate_cal)
        drain, loop = size["phases"]["drain"], size["phases"]["drain_loop"]
        rows.append({
            "group_seconds": group_seconds,
            "groups_per_second": drain["groups_per_second"],
            "hottest": drain["hottest"],
            "exceeds_limit": drain["exceeds_limit"],
            "rounds": loop.get("rounds"),
            "executions": loop.get("executions"),
            "loop_wall_seconds": loop["wall_seconds"] if loop.get("finishes") else None,
            "queue_usd_per_million_groups": size["cost"]["queue_usd_per_million_groups"] if "cost" in size else None,
            "processing_usd_per_million_groups": size["cost"]["processing_usd_per_million_groups"] if "cost" in size else None,
            # Only the drain's depend on the processing time.
            "flags": [f for f in size["flags"] if f["phase"] in ("drain", "drain_loop")],
        })  # fmt: skip
    return rows
