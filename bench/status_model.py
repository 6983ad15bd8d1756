"""bench/status_scale.py's model of ``status`` and ``failures`` at any size (the formula is in its docstring)."""

from __future__ import annotations

import math

from status_workspace import DONE_FRACTION, FAILED_FRACTION, LOCKS_PER_THOUSAND

from s3wq.index import SEGMENT_TARGET_GROUPS
from s3wq.ops.status import partition_digits
from s3wq.store import MAX_PARALLEL_REQUESTS
from s3wq.store.base import LIST_PAGE_KEYS


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
