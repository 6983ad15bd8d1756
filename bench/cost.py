"""Cost per million groups: s3wq beside the real olmocr queue and SQS + Lambda.

What is counted is the queue's own cost, not the processing (which is the
same whichever queue hands out the groups):

* s3wq and olmocr: the workers' S3 requests per group, by operation, as
  contention.py measured them (its runs with no processing time, on the
  latency endpoint where there is one); the status Lambda's listing once per round;
  Step Functions transitions of the state machine (see below); worker Lambda
  requests; and *coordination time*, the Lambda GB-seconds a worker spends
  waiting on those S3 requests (requests x an assumed S3 latency).
* SQS + Lambda: send, receive and delete per message (one group per message),
  and one Lambda request per message (batch size 1); the event source mapping
  polls for the function, so no function time goes to coordination.

Step Functions (the stack's state machine): 9 transitions per execution
(Defaults, ReadInput, CheckInput, Init, CountBefore, AnythingToDo, Summary,
Verdict, Drained), 4 per round (NextRound, RunWorkers, CountAfter,
MoreRounds), and 2 per worker invocation: a Distributed Map is charged one
transition per child execution it starts, and the child enters its one Task
state. A worker invocation drains groups for up to its timeout, so there are
1,000,000 x (group seconds + coordination seconds) / usable seconds
invocations per million groups (--group-seconds is the processing time).

Requests per group come from a contention.py JSON (--contention FILE) or,
without one, from a small contention run started here.

    .venv/bin/python bench/cost.py --contention contention.json
    .venv/bin/python bench/cost.py                                   # runs a small contention.py first
    .venv/bin/python bench/cost.py --contention contention.json --s3-latency-ms 30 --group-seconds 10
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

from common import emit, machine

from s3wq.ops.status import partition_digits
from s3wq.store import MAX_PARALLEL_REQUESTS
from s3wq.store.base import LIST_PAGE_KEYS

# us-east-1 list prices, read on this date; check the pricing pages before quoting them.
PRICES_AS_OF = "2026-11-29"
PRICES = {
    "s3_put_copy_post_list_per_1000": 0.005,
    "s3_get_head_per_1000": 0.0004,
    "s3_delete_per_1000": 0.0,
    "step_functions_standard_per_1000_transitions": 0.025,
    "lambda_arm64_per_gb_second": 0.0000133334,
    "lambda_per_million_requests": 0.20,
    "sqs_standard_per_million_requests": 0.40,
}
S3_TIER = {
    "PutObject": "s3_put_copy_post_list_per_1000",
    "CopyObject": "s3_put_copy_post_list_per_1000",
    "PostObject": "s3_put_copy_post_list_per_1000",
    "ListObjectsV2": "s3_put_copy_post_list_per_1000",
    "ListObjects": "s3_put_copy_post_list_per_1000",
    "GetObject": "s3_get_head_per_1000",
    "HeadObject": "s3_get_head_per_1000",
    "DeleteObject": "s3_delete_per_1000",
}
# "Small requests (less than 512 KB) where median latencies are often in the
# range of tens of milliseconds": AWS whitepaper "Best Practices Design
# Patterns: Optimizing Amazon S3 Performance", Timeouts and Retries.
DEFAULT_S3_LATENCY_MS = 20.0
# The stack's settings (infra/settings.py, infra/functions.py).
WORKER_MEMORY_MB = 1769
WORKER_TIMEOUT_SECONDS = 900
SAFETY_MARGIN_SECONDS = 10  # s3wq.config.default_safety_margin at 900 s
MAX_ROUNDS = 10
STATUS_MEMORY_MB = 1024
# A fleet sized for a million groups (the stack allows up to 1,000; its default of 10 suits small runs).
DEFAULT_WORKERS = 100
SFN_PER_EXECUTION, SFN_PER_ROUND, SFN_PER_INVOCATION = 9, 4, 2
SQS_REQUESTS_PER_MESSAGE = 3  # SendMessage, ReceiveMessage, DeleteMessage
MILLION = 1_000_000
CONTENTION_DEFAULT_ARGS = ["--endpoints", "latency", "--workers", "1,8", "--work-ms", "0", "--max-groups", "200"]


def s3_dollars(requests_by_operation: dict[str, float]) -> float:
    unknown = set(requests_by_operation) - set(S3_TIER)
    if unknown:
        raise SystemExit(f"no price for S3 operations {sorted(unknown)}")
    return sum(n * PRICES[S3_TIER[op]] / 1000 for op, n in requests_by_operation.items())


def status_call(groups: int) -> dict[str, float]:
    """Requests of one status count on ``groups`` groups in one populate, all of them done (its longest listing).

    The catalog (twice: before and after the flags) and the look for
    olmocr's index (no segment is read); for
    each hash-prefix partition (``status.partition_digits``) a LIST of its
    failed flags, of its locks and of its done flags, one more per further
    1,000 done flags. The locks with neither flag, about one per live
    worker, are read too; they are left out here.
    """
    partitions = 16 ** partition_digits(groups)
    done_pages = max(1, math.ceil(groups / partitions / LIST_PAGE_KEYS))
    return {"GetObject": 3, "ListObjectsV2": partitions * (done_pages + 2)}


def s3_queue(requests_per_group: dict[str, float], *, latency_ms: float, group_seconds: float, workers: int) -> dict:
    per_million = {op: n * MILLION for op, n in requests_per_group.items()}
    coordination_seconds = sum(requests_per_group.values()) * latency_ms / 1000
    usable = WORKER_TIMEOUT_SECONDS - SAFETY_MARGIN_SECONDS
    invocations = math.ceil(MILLION * (group_seconds + coordination_seconds) / usable)
    rounds = math.ceil(invocations / workers)
    executions = math.ceil(rounds / MAX_ROUNDS)
    transitions = SFN_PER_EXECUTION * executions + SFN_PER_ROUND * rounds + SFN_PER_INVOCATION * invocations
    status_calls = rounds + executions  # CountAfter per round, CountBefore per execution
    status_requests = {op: n * status_calls for op, n in status_call(MILLION).items()}
    gb_seconds = MILLION * coordination_seconds * WORKER_MEMORY_MB / 1024
    # A count sends MAX_PARALLEL_REQUESTS requests at a time.
    status_gb_seconds = sum(status_requests.values()) / MAX_PARALLEL_REQUESTS * latency_ms / 1000 * STATUS_MEMORY_MB / 1024
    dollars = {
        "s3_requests_workers": s3_dollars(per_million),
        "s3_requests_status": s3_dollars(status_requests),
        "step_functions": transitions * PRICES["step_functions_standard_per_1000_transitions"] / 1000,
        "lambda_coordination_time": (gb_seconds + status_gb_seconds) * PRICES["lambda_arm64_per_gb_second"],
        "lambda_requests": (invocations + status_calls) * PRICES["lambda_per_million_requests"] / MILLION,
    }
    return {
        "requests_per_group": round(sum(requests_per_group.values()), 3),
        "worker_invocations": invocations,
        "rounds": rounds,
        "transitions": transitions,
        "coordination_seconds_per_group": round(coordination_seconds, 4),
        "dollars": {k: round(v, 4) for k, v in dollars.items()},
        "dollars_total": round(sum(dollars.values()), 2),
    }


def sqs_lambda() -> dict:
    dollars = {
        "sqs_requests": SQS_REQUESTS_PER_MESSAGE * PRICES["sqs_standard_per_million_requests"],
        "lambda_requests": PRICES["lambda_per_million_requests"],
    }
    return {"requests_per_group": SQS_REQUESTS_PER_MESSAGE, "dollars": dollars, "dollars_total": round(sum(dollars.values()), 2)}


def load_contention(path: str | None) -> dict:
    if path:
        return json.loads(Path(path).read_text())
    print(f"no --contention file: running contention.py {' '.join(CONTENTION_DEFAULT_ARGS)} ...", file=sys.stderr)
    script = Path(__file__).resolve().parent / "contention.py"
    done = subprocess.run([sys.executable, str(script), *CONTENTION_DEFAULT_ARGS], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"contention.py failed:\n{done.stderr}")
    return json.loads(done.stdout)


def run(contention: dict, latency_ms: float, group_seconds: float, workers: int) -> dict:
    rows = []
    # Requests per group barely depend on the endpoint; where both were measured, S3's latency decides.
    endpoints = {r["endpoint"] for r in contention["runs"]}
    endpoint = "latency" if "latency" in endpoints else min(endpoints)
    for measured in contention["runs"]:
        if measured["endpoint"] != endpoint or measured["work_ms"] != 0:
            continue
        row: dict = {"contention_workers": measured["workers"], "contention_groups": measured["groups"]}
        for mode in [q for q in contention["queues"] if q in measured]:
            by_operation = measured[mode]["requests_per_group_by_operation"]
            row[mode] = s3_queue(by_operation, latency_ms=latency_ms, group_seconds=group_seconds, workers=workers)
        row["sqs_lambda"] = sqs_lambda()
        rows.append(row)
    return {
        "benchmark": "cost",
        **machine(),
        "per": "1,000,000 groups",
        "prices_as_of": PRICES_AS_OF,
        "prices_usd": PRICES,
        "assumptions": {
            "s3_latency_ms": latency_ms,
            "group_seconds": group_seconds,
            "workers_per_round": workers,
            "worker_memory_mb": WORKER_MEMORY_MB,
            "worker_timeout_seconds": WORKER_TIMEOUT_SECONDS,
            "sqs_batch_size": 1,
            "requests_from": f"contention.py, {contention.get('date', '?')}, {endpoint} endpoint, no processing time",
        },
        "runs": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contention", metavar="FILE", help="a contention.py JSON; without it a small contention run is made")
    parser.add_argument(
        "--s3-latency-ms", type=float, default=DEFAULT_S3_LATENCY_MS, help=f"assumed S3 request latency (default {DEFAULT_S3_LATENCY_MS:g})"
    )
    parser.add_argument(
        "--group-seconds", type=float, default=2.0, help="processing time of one group, for invocations per million (default 2)"
    )
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help=f"workers per round (default {DEFAULT_WORKERS})")
    args = parser.parse_args()
    if args.s3_latency_ms < 0 or args.group_seconds < 0 or args.workers < 1:
        parser.error("latency and group seconds must not be negative, workers at least 1")
    result = run(load_contention(args.contention), args.s3_latency_ms, args.group_seconds, args.workers)
    table = []
    for row in result["runs"]:
        for mode in [m for m in row if isinstance(row[m], dict)]:
            d = row[mode]["dollars"]
            table.append([
                row["contention_workers"], mode, row[mode]["requests_per_group"],
                d.get("s3_requests_workers", 0) + d.get("s3_requests_status", 0) + d.get("sqs_requests", 0),
                d.get("step_functions", 0), d.get("lambda_coordination_time", 0), d.get("lambda_requests", 0), row[mode]["dollars_total"],
            ])  # fmt: skip
    emit(result, table, ["W", "queue", "req/group", "$ requests", "$ Step Functions", "$ coordination", "$ Lambda req", "$ total"])


if __name__ == "__main__":
    main()
