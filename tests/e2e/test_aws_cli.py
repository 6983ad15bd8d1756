"""The local cloud driven by the real AWS CLI (``awscli``, pinned in requirements-dev.txt) and by boto3, as they drive AWS.

The CLI runs as a user runs it: the ``aws`` executable of this venv, in a child
process, pointed at the cloud by the environment that ``s3wq local up``
prints (test credentials, region, ``AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from support import REPO_ROOT

from s3wq.dev.localcloud.cloud import LocalCloud
from s3wq.dev.samples import make_pdf, sample_text

AWS = Path(sys.executable).with_name("aws")
PASS_MACHINE = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})


def aws(cloud: LocalCloud, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``aws ARGS`` in a shell set up with the exports ``s3wq local up`` prints; no config or credentials file of this machine."""
    env = {**os.environ, **cloud.env(), "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_PAGER": ""}
    return subprocess.run([str(AWS), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def aws_json(cloud: LocalCloud, *args: str) -> dict:
    result = aws(cloud, *args, "--output", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_until_ended(sfn, execution_arns: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(sfn.describe_execution(executionArn=arn)["status"] != "RUNNING" for arn in execution_arns):
            return
        time.sleep(0.3)
    pytest.fail(f"executions still running after {timeout:.0f}s: {execution_arns}")


def documented_start_execution() -> list[str]:
    """docs/deploy.md's ``aws stepfunctions start-execution`` (no ``--name``), as a list of arguments after ``aws``."""
    text = (REPO_ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    [line] = re.findall(r"aws stepfunctions start-execution [^\n]*", text)
    return shlex.split(line)[1:]


def test_the_aws_cli_uploads_a_manifest_starts_executions_without_a_name_follows_them_and_downloads_the_results(tmp_path):
    with LocalCloud(log_dir=tmp_path / "cloud") as cloud:
        cloud.deploy({"defaultWorkers": 2, "groupSize": 2, "processor": "text"})
        drive_with_the_aws_cli(cloud, tmp_path)


def drive_with_the_aws_cli(cloud: LocalCloud, tmp_path: Path) -> None:
    stack, sfn = cloud.stack, cloud.client("stepfunctions")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    expected = {}
    for number in range(5):
        (inputs / f"doc {number}.txt").write_text(sample_text(number), encoding="utf-8")
        expected[f"s3://{stack.bucket}/inputs/cli/doc {number}.txt"] = sample_text(number).splitlines()
    (inputs / "scan 5.pdf").write_bytes(make_pdf([sample_text(5).splitlines()]))
    expected[f"s3://{stack.bucket}/inputs/cli/scan 5.pdf"] = sample_text(5).splitlines()
    uploaded = aws(cloud, "s3", "cp", "--recursive", "--only-show-errors", str(inputs), f"s3://{stack.bucket}/inputs/cli/")
    assert uploaded.returncode == 0, uploaded.stderr

    # The manifest upload is what starts the job: populate indexes it and starts an execution.
    (tmp_path / "run1.txt").write_text(f"s3://{stack.bucket}/inputs/cli/*.txt\ns3://{stack.bucket}/inputs/cli/*.pdf\n", encoding="utf-8")
    copied = aws(cloud, "s3", "cp", "--only-show-errors", "run1.txt", f"{stack.outputs['ManifestPrefix']}run1.txt", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    deadline = time.monotonic() + 60
    while not (executions := sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]):
        assert time.monotonic() < deadline, "the manifest upload started no execution"
        time.sleep(0.3)
    [by_manifest] = executions
    assert by_manifest["name"].startswith("manifest-")
    wait_until_ended(sfn, [by_manifest["executionArn"]])

    # As docs/deploy.md shows it, without --name, twice: AWS names each execution with a new UUID.
    arguments = documented_start_execution()
    arguments[arguments.index("ARN")] = stack.state_machine_arn
    arguments[arguments.index("--input") + 1] = json.dumps({"workers": 1})  # not the 200 of the docs, on one machine
    started = [aws_json(cloud, *arguments) for _ in range(2)]
    arns = [s["executionArn"] for s in started]
    names = [arn.rsplit(":", 1)[1] for arn in arns]
    assert len(set(names)) == 2 and all(str(uuid.UUID(name)) == name for name in names), arns
    wait_until_ended(sfn, arns)

    for arn, name in zip(arns, names):
        described = aws_json(cloud, "stepfunctions", "describe-execution", "--execution-arn", arn)
        assert (described["name"], described["status"], json.loads(described["input"])) == (name, "SUCCEEDED", {"workers": 1}), described
        events = [event["type"] for event in aws_json(cloud, "stepfunctions", "get-execution-history", "--execution-arn", arn)["events"]]
        assert events[0] == "ExecutionStarted" and events[-1] == "ExecutionSucceeded", events
    described = aws_json(cloud, "stepfunctions", "describe-execution", "--execution-arn", by_manifest["executionArn"])
    assert described["status"] == "SUCCEEDED", described
    output = json.loads(described["output"])
    assert (output["groups"], output["done"], output["remaining"]) == (3, 3, 0), output
    map_runs = aws_json(cloud, "stepfunctions", "list-map-runs", "--execution-arn", by_manifest["executionArn"])["mapRuns"]
    assert map_runs and all(run["executionArn"] == by_manifest["executionArn"] for run in map_runs), map_runs

    # Every execution is listed with its name, by the CLI and by boto3 (whose dict had no "name" for a nameless one).
    listed = aws_json(cloud, "stepfunctions", "list-executions", "--state-machine-arn", stack.state_machine_arn)["executions"]
    assert sorted(e["name"] for e in listed) == sorted([by_manifest["name"], *names])
    listed = sfn.list_executions(stateMachineArn=stack.state_machine_arn)["executions"]
    assert sorted(e["name"] for e in listed) == sorted([by_manifest["name"], *names])

    results = tmp_path / "results"
    downloaded = aws(cloud, "s3", "cp", "--recursive", "--only-show-errors", f"{stack.workspace}/results/", str(results))
    assert downloaded.returncode == 0, downloaded.stderr
    records = [json.loads(line) for path in sorted(results.glob("*.jsonl")) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(list(results.glob("*.jsonl"))) == 3
    extracted = {r["source"]: [line.strip() for line in r["text"].splitlines() if line.strip()] for r in records if not r.get("error")}
    assert extracted == expected


MISSING_EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:pass:never-started"
# What AWS answers, by the codes of the Step Functions API reference (and of the service model the SDKs are built from).
BAD_INPUT = [
    ("start_execution", {"input": "{not json"}, "InvalidExecutionInput"),
    ("start_execution", {"name": "two words"}, "InvalidName"),
    ("start_execution", {"name": "run/1"}, "InvalidName"),
    ("start_execution", {"name": "x" * 81}, "ValidationException"),  # the name's 1-80 length constraint
    ("start_execution", {"stateMachineArn": "not-an-arn"}, "InvalidArn"),
    ("start_execution", {"stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:absent"}, "StateMachineDoesNotExist"),
    ("describe_execution", {"executionArn": MISSING_EXECUTION}, "ExecutionDoesNotExist"),
    ("describe_execution", {"executionArn": "not-an-arn"}, "InvalidArn"),
    ("get_execution_history", {"executionArn": MISSING_EXECUTION}, "ExecutionDoesNotExist"),
    ("list_map_runs", {"executionArn": MISSING_EXECUTION}, "ExecutionDoesNotExist"),
    ("describe_map_run", {"mapRunArn": "arn:aws:states:us-east-1:123456789012:mapRun:pass/never:started"}, "ResourceNotFound"),
]


@pytest.fixture
def pass_machine(tmp_path):
    """A local cloud without the stack, and a one-state machine: it starts no Lambda, and such a cloud starts in a second or two."""
    with LocalCloud(log_dir=tmp_path / "cloud") as cloud:
        sfn = cloud.client("stepfunctions")
        yield (
            cloud,
            sfn.create_state_machine(name="pass", definition=PASS_MACHINE, roleArn="arn:aws:iam::123456789012:role/pass")[
                "stateMachineArn"
            ],
        )


def test_any_number_of_executions_started_without_a_name_each_get_a_new_uuid_as_on_aws(pass_machine):
    cloud, machine = pass_machine
    sfn = cloud.client("stepfunctions")
    arns = [sfn.start_execution(stateMachineArn=machine)["executionArn"] for _ in range(12)]
    names = [arn.rsplit(":", 1)[1] for arn in arns]
    assert len(set(names)) == 12 and all(str(uuid.UUID(name)) == name for name in names), arns
    wait_until_ended(sfn, arns)
    listed = sfn.list_executions(stateMachineArn=machine)["executions"]
    assert sorted((e["executionArn"], e["name"], e["status"]) for e in listed) == sorted((a, n, "SUCCEEDED") for a, n in zip(arns, names))
    assert [sfn.describe_execution(executionArn=arn)["name"] for arn in arns] == names


def test_bad_input_is_answered_with_the_error_code_aws_documents_and_starts_nothing(pass_machine):
    cloud, machine = pass_machine
    sfn = cloud.client("stepfunctions")
    answered, expected = [], []
    for operation, arguments, code in BAD_INPUT:
        case = f"{operation}({arguments})"
        model = sfn.meta.service_model.operation_model(sfn.meta.method_to_api_mapping[operation])
        assert code in [shape.name for shape in model.error_shapes], f"{case}: {code} is not an error of {model.name}"
        expected.append((case, code, 400))
        if operation == "start_execution":
            arguments = {"stateMachineArn": machine, **arguments}
        try:
            getattr(sfn, operation)(**arguments)
            answered.append((case, "no error", 200))
        except ClientError as exc:
            error = exc.response
            answered.append((case, error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]))
            assert error["Error"]["Message"], case
    assert answered == expected

    # The AWS CLI shows the code too.
    refused = aws(cloud, "stepfunctions", "start-execution", "--state-machine-arn", machine, "--input", "{not json")
    assert refused.returncode != 0
    assert "An error occurred (InvalidExecutionInput) when calling the StartExecution operation" in refused.stderr, refused.stderr
    assert sfn.list_executions(stateMachineArn=machine)["executions"] == []  # none started
