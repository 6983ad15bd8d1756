"""The whole app on the local cloud: the synthesized stack, the S3 upload event, the real handlers.

Each test deploys the template the CDK app synthesizes into a fresh local
cloud, uploads inputs and a manifest, and follows the execution that the
upload event starts, as a user of the deployed stack would.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from s3wq import WorkIndex
from s3wq.dev.localcloud.cloud import LocalCloud
from s3wq.dev.samples import make_pdf, sample_text
from s3wq.ops.status import queue_status
from s3wq.store import S3Backend, layout

HELPERS = str(Path(__file__).resolve().parents[1] / "helpers")
# A space, a comma and a plus: S3 sends this key URL-encoded in the event.
MANIFEST_NAME = "run 1, batch+A.txt"


def upload_manifest(s3, bucket: str, stack, lines: list[str]) -> str:
    key = stack.outputs["ManifestPrefix"].split("/", 3)[3] + MANIFEST_NAME
    s3.put_object(Bucket=bucket, Key=key, Body=("# e2e\n" + "\n".join(lines) + "\n").encode())
    return key


def wait_for_end(sfn, state_machine_arn: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executions = sfn.list_executions(stateMachineArn=state_machine_arn)["executions"]
        if executions and executions[0]["status"] != "RUNNING":
            assert len(executions) == 1
            return sfn.describe_execution(executionArn=executions[0]["executionArn"])
        time.sleep(0.5)
    pytest.fail(f"no execution finished within {timeout}s")


def workspace_backend(s3, stack) -> S3Backend:
    bucket, prefix = stack.workspace.removeprefix("s3://").split("/", 1)
    return S3Backend(s3_client=s3, bucket=bucket, prefix=prefix)


def test_forty_groups_eight_workers_through_the_synthesized_state_machine(tmp_path):
    with LocalCloud(log_dir=tmp_path / "cloud") as cloud:
        stack = cloud.deploy({"defaultWorkers": 8, "groupSize": 1, "processor": "text"})
        s3, sfn = cloud.client("s3"), cloud.client("stepfunctions")
        expected = {}
        # A scan without a text layer: its group is done, with one input error, which the execution's output counts.
        scan = f"s3://{stack.bucket}/inputs/scan 00, no text layer.pdf"
        s3.put_object(Bucket=stack.bucket, Key=scan.split("/", 3)[3], Body=make_pdf([[]]))
        for number in range(1, 40):
            if number % 5 == 0:
                key, lines = f"inputs/scan {number:02d}, page 1.pdf", sample_text(number).splitlines()
                s3.put_object(Bucket=stack.bucket, Key=key, Body=make_pdf([lines]))
                expected[f"s3://{stack.bucket}/{key}"] = lines
            else:
                key = f"inputs/doc {number:02d}.txt"
                s3.put_object(Bucket=stack.bucket, Key=key, Body=sample_text(number).encode())
                expected[f"s3://{stack.bucket}/{key}"] = sample_text(number).splitlines()

        upload_manifest(s3, stack.bucket, stack, [f"s3://{stack.bucket}/inputs/*.txt", f"s3://{stack.bucket}/inputs/*.pdf"])
        execution = wait_for_end(sfn, stack.state_machine_arn, timeout=240)

        assert execution["status"] == "SUCCEEDED", execution.get("cause")
        # Started by populate, which the S3 upload event triggered.
        assert execution["name"].startswith("manifest-")
        assert json.loads(execution["input"]) == {"workers": 8}
        output = json.loads(execution["output"])
        assert (output["groups"], output["done"], output["failed"], output["remaining"]) == (40, 40, 0, 0)
        assert (output["input_error_groups"], output["input_errors"]) == (1, 1)
        backend = workspace_backend(s3, stack)
        assert queue_status(backend) == {
            "groups": 40,
            "paths": 40,
            "done": 40,
            "failed": 0,
            "locked": 0,
            "claimed_ahead": 0,
            "pending": 0,
            "remaining": 0,
            "finished": 40,
            "released": 0,
            "unavailable": 0,
            "wait_seconds": 0,
        }
        groups = {g.hash: g for g in WorkIndex(backend).iter_groups()}
        results = list(backend.list_keys(layout.RESULTS_PREFIX))
        assert results == sorted(layout.result_key(h) for h in groups)
        for hash_, group in groups.items():
            [record] = [json.loads(line) for line in backend.read(layout.result_key(hash_)).body.decode().splitlines()]
            assert record["source"] == group.paths[0]
            if record["source"] == scan:
                assert record["error"].startswith("no text layer"), record
                continue
            assert record.get("error") is None
            assert [line.strip() for line in record["text"].strip().splitlines() if line.strip()] == expected[record["source"]]
        # Eight workers ran as eight Lambda invocations.
        worker_log = next((cloud.log_dir / "lambda").glob("*Worker*.log")).read_text()
        assert worker_log.count("--- invocation ") == 8


def test_a_group_that_outlasts_its_invocation_is_stopped_handed_back_and_finished_in_a_later_round(tmp_path):
    with LocalCloud(log_dir=tmp_path / "cloud", extra_pythonpath=(HELPERS,)) as cloud:
        # The worker's timeout, and so its lease, from CDK context.
        stack = cloud.deploy({"defaultWorkers": 2, "groupSize": 1, "workerTimeoutSeconds": 10, "processor": "slow_first_attempt:process"})
        s3, sfn = cloud.client("s3"), cloud.client("stepfunctions")
        for number in range(6):
            name = "slow" if number == 0 else "quick"
            s3.put_object(Bucket=stack.bucket, Key=f"inputs/{name}-{number}.txt", Body=f"input {number}".encode())

        upload_manifest(s3, stack.bucket, stack, [f"s3://{stack.bucket}/inputs/*.txt"])
        execution = wait_for_end(sfn, stack.state_machine_arn, timeout=240)

        assert execution["status"] == "SUCCEEDED", execution.get("cause")
        output = json.loads(execution["output"])
        assert (output["done"], output["failed"], output["remaining"]) == (6, 0, 0)
        assert output["rounds"] >= 2  # a later round of the drain loop picked the group up
        worker_log = next((cloud.log_dir / "lambda").glob("*Worker*.log")).read_text()
        # The worker stopped the processor before the invocation's deadline and
        # handed the group back: no invocation was killed, no lock left to go stale.
        assert "Task timed out" not in worker_log
        reports = [json.loads(line) for line in worker_log.splitlines() if '"message":"worker stopped"' in line]
        assert sum(r["timed_out"] for r in reports) == 1 and sum(r["processed"] for r in reports) == 6
        backend = workspace_backend(s3, stack)
        slow_hash = layout.group_hash([f"s3://{stack.bucket}/inputs/slow-0.txt"])
        done = json.loads(backend.read(layout.done_key(slow_hash)).body)
        [record] = [json.loads(line) for line in backend.read(layout.result_key(slow_hash)).body.decode().splitlines()]
        assert record == {"source": f"s3://{stack.bucket}/inputs/slow-0.txt", "attempt": done["attempt"], "text": "input 0"}
        assert list(backend.list_keys(layout.LOCKS_PREFIX)) == []


def test_a_round_whose_workers_met_a_dead_service_ends_the_execution_naming_it_with_nothing_failed(tmp_path):
    with LocalCloud(log_dir=tmp_path / "cloud", extra_pythonpath=(HELPERS,)) as cloud:
        stack = cloud.deploy({"defaultWorkers": 2, "groupSize": 1, "processor": "unavailable_processors:raises_at_once"})
        s3, sfn = cloud.client("s3"), cloud.client("stepfunctions")
        for number in range(6):
            s3.put_object(Bucket=stack.bucket, Key=f"inputs/page-{number}.txt", Body=f"input {number}".encode())

        upload_manifest(s3, stack.bucket, stack, [f"s3://{stack.bucket}/inputs/*.txt"])
        execution = wait_for_end(sfn, stack.state_machine_arn, timeout=240)

        # One round: each worker handed its group back and stopped; the loop ran no second round against the service.
        assert (execution["status"], execution.get("error")) == ("FAILED", "ServiceUnavailable"), execution
        worker_log = next((cloud.log_dir / "lambda").glob("*Worker*.log")).read_text()
        assert worker_log.count("--- invocation ") == 2
        reports = [json.loads(line) for line in worker_log.splitlines() if "this worker stopped" in line and line.startswith("{")]
        assert [(r["level"], r["stopped_reason"], r["unavailable"]) for r in reports] == [("ERROR", "service_unavailable", 1)] * 2
        status = queue_status(workspace_backend(s3, stack))
        assert (status.done, status.failed, status.locked, status.pending, status.unavailable) == (0, 0, 0, 6, 2)
