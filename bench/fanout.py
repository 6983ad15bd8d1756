"""Fan-out benchmark: one execution of the synthesized state machine with many workers, on the local cloud.

The stack is deployed with ``maxWorkers`` = W and a quick processor (``noop``);
G groups are populated, and one execution is started with W workers. The
Distributed Map's items come from the status function (States.ArrayRange
stops at 1,000), so W may be up to 10,000.

Printed (JSON): how many worker invocations ran (one per Map child, counted
from the worker function's log), how many groups each round finished, the
execution's status and its wall time. The local cloud runs at most
``--concurrency`` invocations at once (a process each; the rest wait for a
slot, where Lambda would throttle them and Step Functions retry), so the
time measures this machine's CPU, not Lambda's scaling (1,000 environments
per 10 s per function).

    .venv/bin/python bench/fanout.py --workers 1500 --groups 300
    .venv/bin/python bench/fanout.py --workers 20 --groups 10 --concurrency 8    # what the smoke test runs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from dataclasses import asdict

from common import emit, machine

from s3wq import WorkIndex
from s3wq.dev.localcloud.cloud import LocalCloud
from s3wq.dev.localcloud.runner import CONCURRENCY_ENV
from s3wq.store import S3Backend


def worker_invocations(cloud: LocalCloud) -> tuple[int, int]:
    """Invocations of the worker function, and how many distinct Map items (worker indexes) they ran."""
    text = "".join(path.read_text(errors="replace") for path in (cloud.log_dir / "lambda").glob("*Worker*.log"))
    indexes = set(re.findall(r'"worker_id":\s*"w(\d+)-', text))
    return text.count("--- invocation "), len(indexes)


def run(workers: int, groups: int, concurrency: int, timeout: float, keep_logs: bool = False) -> dict:
    os.environ[CONCURRENCY_ENV] = str(concurrency)  # read by the cloud's server process
    with LocalCloud(keep_logs=keep_logs) as cloud:
        stack = cloud.deploy({"maxWorkers": workers, "defaultWorkers": 1, "processor": "noop", "groupSize": 1})
        s3, sfn = cloud.client("s3"), cloud.client("stepfunctions")
        keys = [f"inputs/doc-{n:05d}.txt" for n in range(groups)]
        for key in keys:
            s3.put_object(Bucket=stack.bucket, Key=key, Body=b"x")
        # Populated by the library, not the populate function: that would start an execution of its own.
        backend = S3Backend(s3_client=s3, bucket=stack.bucket, prefix=stack.workspace.split("/", 3)[3])
        populated = asdict(WorkIndex(backend).populate([f"s3://{stack.bucket}/{key}" for key in keys], 1))
        started = time.monotonic()
        arn = sfn.start_execution(stateMachineArn=stack.state_machine_arn, input=json.dumps({"workers": workers}))["executionArn"]
        while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING":
            if time.monotonic() - started > timeout:
                raise SystemExit(f"the execution ran past {timeout:.0f} s")
            time.sleep(1.0)
        seconds = time.monotonic() - started
        output = json.loads(described.get("output") or "null")
        invocations, indexes = worker_invocations(cloud)
        return {
            "workers_requested": workers,
            "groups": groups,
            "populated": populated.get("added_groups"),
            "local_lambda_concurrency": concurrency,
            "execution_status": described["status"],
            "error": described.get("error"),
            "output": output,
            "worker_invocations": invocations,
            "distinct_worker_indexes": indexes,
            "execution_seconds": round(seconds, 1),
            **({"logs": str(cloud.log_dir)} if keep_logs else {}),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1500)
    parser.add_argument("--groups", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=2 * (os.cpu_count() or 2))
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--keep-logs", action="store_true", help="keep the local cloud's logs and print where")
    options = parser.parse_args()
    emit(
        {
            "benchmark": "fanout",
            "machine": machine(),
            "result": run(options.workers, options.groups, options.concurrency, options.timeout, options.keep_logs),
        }
    )


if __name__ == "__main__":
    main()
