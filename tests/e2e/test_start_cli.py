"""``s3wq start`` against the deployed stack on the local cloud, found by its CloudFormation stack name.

One local cloud serves the module (a deploy takes seconds). Its worker runs a
processor that fails on inputs whose contents are marked broken, so one test
can fail a run, fix the inputs, requeue and succeed, as an operator would;
every test leaves the workspace with nothing failed and nothing remaining.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
from support import run_cli

from s3wq import WorkIndex
from s3wq.dev.localcloud.cloud import LocalCloud
from s3wq.store import S3Backend, layout

HELPERS = str(Path(__file__).resolve().parents[1] / "helpers")
STACK = "S3wqLocal"
BROKEN = b"BROKEN: the scanner jammed"
MAX_ATTEMPTS = 2
MAX_WORKERS = 3


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    with LocalCloud(log_dir=tmp_path_factory.mktemp("cloud"), extra_pythonpath=(HELPERS,)) as cloud:
        cloud.deploy(
            {
                "defaultWorkers": 2,
                "maxWorkers": MAX_WORKERS,
                "maxAttempts": MAX_ATTEMPTS,
                "processor": "operator_processors:fails_on_broken",
            }
        )
        yield cloud


@pytest.fixture
def cloud_env(cloud, monkeypatch) -> LocalCloud:
    """The CLI's child processes talk to the local cloud, as after `export AWS_ENDPOINT_URL=...`."""
    for name, value in cloud.env().items():
        monkeypatch.setenv(name, value)
    return cloud


def backend_of(cloud: LocalCloud) -> S3Backend:
    bucket, prefix = cloud.stack.workspace.removeprefix("s3://").split("/", 1)
    return S3Backend(s3_client=cloud.client("s3"), bucket=bucket, prefix=prefix)


def upload(cloud: LocalCloud, folder: str, bodies: list[bytes]) -> list[str]:
    s3 = cloud.client("s3")
    keys = [f"inputs/{folder}/doc-{n:02d}.txt" for n in range(len(bodies))]
    for key, body in zip(keys, bodies):
        s3.put_object(Bucket=cloud.stack.bucket, Key=key, Body=body)
    return [f"s3://{cloud.stack.bucket}/{key}" for key in keys]


def populate(cloud: LocalCloud, folder: str, group_size: int) -> dict:
    sources = f"s3://{cloud.stack.bucket}/inputs/{folder}/*.txt"
    result = run_cli("populate", cloud.stack.workspace, sources, "--group-size", str(group_size), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def start_json(*args: str) -> tuple[int, dict]:
    result = run_cli("start", "--stack", STACK, "--wait", "--json", *args)
    assert result.stdout.count("\n") == 1, result.stdout + result.stderr
    return result.returncode, json.loads(result.stdout)


def executions(cloud: LocalCloud) -> list[dict]:
    return cloud.client("stepfunctions").list_executions(stateMachineArn=cloud.stack.state_machine_arn)["executions"]


def emitted(cloud: LocalCloud, metric: str, since: int) -> float:
    """The sum of ``metric`` in the worker's EMF output after byte ``since`` of its log.

    Only in the namespace and with the dimension that the dashboard and the alarm read.
    """
    total = 0.0
    for line in worker_log(cloud).read_bytes()[since:].decode().splitlines():
        if not line.startswith('{"_aws"'):
            continue
        blob = json.loads(line)
        [directive] = blob["_aws"]["CloudWatchMetrics"]
        if directive["Namespace"] == "s3wq" and directive["Dimensions"] == [["service"]] and blob["service"] == "s3wq" and metric in blob:
            total += sum(blob[metric]) if isinstance(blob[metric], list) else blob[metric]
    return total


def worker_log(cloud: LocalCloud) -> Path:
    return next((cloud.log_dir / "lambda").glob("*Worker*.log"))


def worker_log_size(cloud: LocalCloud) -> int:
    """How much the worker function has logged so far (nothing before its first invocation)."""
    logs = list((cloud.log_dir / "lambda").glob("*Worker*.log"))
    return logs[0].stat().st_size if logs else 0


def test_start_wait_runs_the_populated_workspace_to_success(cloud_env):
    paths = upload(cloud_env, "batch-a", [f"page {n}\n".encode() for n in range(12)])
    assert populate(cloud_env, "batch-a", group_size=2)["added_groups"] == 6

    returncode, doc = start_json("--workers", "3")

    assert returncode == 0, doc
    assert (doc["execution_status"], doc["error"]) == ("SUCCEEDED", None)
    status = doc["status"]
    assert status["groups"] >= 6 and status["done"] == status["groups"]
    assert (status["failed"], status["locked"], status["remaining"]) == (0, 0, 0)
    assert (doc["output"]["done"], doc["output"]["failed"], doc["output"]["remaining"]) == (status["groups"], 0, 0)
    execution = cloud_env.client("stepfunctions").describe_execution(executionArn=doc["execution_arn"])
    assert json.loads(execution["input"]) == {"workers": 3, "failureTolerance": 0}
    backend = backend_of(cloud_env)
    ours = [g for g in WorkIndex(backend).iter_groups() if set(g.paths) <= set(paths)]
    assert len(ours) == 6
    for group in ours:
        records = [json.loads(line) for line in backend.read(layout.result_key(group.hash)).body.splitlines()]
        assert [r["source"] for r in records] == list(group.paths)


def test_start_without_wait_returns_the_execution_and_the_workspace_at_once(cloud_env):
    result = run_cli("start", "--stack", STACK, "--workers", "1", "--json")

    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["workspace"] == cloud_env.stack.workspace
    sfn = cloud_env.client("stepfunctions")
    execution = sfn.describe_execution(executionArn=doc["execution_arn"])
    assert execution["stateMachineArn"] == cloud_env.stack.state_machine_arn
    assert json.loads(execution["input"]) == {"workers": 1, "failureTolerance": 0}
    # Let it end, so the next test has the cloud to itself.
    deadline = time.monotonic() + 60
    while execution["status"] == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.3)
        execution = sfn.describe_execution(executionArn=doc["execution_arn"])
    assert execution["status"] == "SUCCEEDED", execution.get("cause")


@pytest.mark.parametrize(
    ("stack", "problem"),
    [("NoSuchStack", "no CloudFormation stack named 'NoSuchStack'"), ("foreign", "has no output StateMachineArn: is it an s3wq stack?")],
)
def test_start_names_a_missing_or_foreign_stack_in_one_line_and_starts_nothing(cloud_env, stack, problem):
    if stack == "foreign":
        stack = f"Foreign{uuid.uuid4().hex[:8]}"
        template = {"Resources": {"Nothing": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}
        cloud_env.client("cloudformation").create_stack(StackName=stack, TemplateBody=json.dumps(template))
    before = len(executions(cloud_env))

    result = run_cli("start", "--stack", stack, "--workers", "1", "--wait")

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("s3wq: error: "), result.stderr
    assert problem in result.stderr
    assert len(executions(cloud_env)) == before


def test_a_run_with_failed_groups_fails_and_succeeds_once_the_inputs_are_fixed_and_requeued(cloud_env):
    bodies = [BROKEN if n in (1, 4) else f"page {n}\n".encode() for n in range(6)]
    paths = upload(cloud_env, "batch-b", bodies)
    broken = {paths[1], paths[4]}
    assert populate(cloud_env, "batch-b", group_size=1)["added_groups"] == 6
    log_offset = worker_log_size(cloud_env)

    failed = run_cli("start", "--stack", STACK, "--workers", "2", "--failure-tolerance", "0", "--wait")

    assert failed.returncode == 1, failed.stderr
    lines = failed.stdout.splitlines()
    state_machine_name = cloud_env.stack.state_machine_arn.rsplit(":", 1)[-1]
    assert lines[0].startswith(f"started arn:aws:states:us-east-1:123456789012:execution:{state_machine_name}:")
    assert lines[-1].startswith("FAILED (TooManyFailedGroups: ")
    assert lines[-1].endswith("failed 2, remaining 0"), lines[-1]
    assert "\x1b" not in failed.stdout  # not a terminal: plain progress lines
    # The worker reported both failures where the failed-groups alarm looks.
    assert emitted(cloud_env, "GroupsFailed", since=log_offset) == 2

    listed = run_cli("failures", cloud_env.stack.workspace, "--json")
    assert listed.returncode == 0, listed.stderr
    failures = json.loads(listed.stdout)["failures"]
    assert sorted(p for f in failures for p in f["paths"]) == sorted(broken)
    for failure in failures:
        assert failure["attempts"] == MAX_ATTEMPTS
        assert failure["error"] == f"operator_processors.UnreadableInput: cannot read {failure['paths'][0]}"

    # The failures are tolerated when the run says so: nothing left to do, two failed, within tolerance.
    returncode, tolerated = start_json("--workers", "1", "--failure-tolerance", "2")
    assert returncode == 0, tolerated
    assert tolerated["execution_status"] == "SUCCEEDED"
    assert (tolerated["status"]["failed"], tolerated["status"]["remaining"]) == (2, 0)

    # Fix the inputs, requeue, start again.
    upload(cloud_env, "batch-b", [f"page {n}\n".encode() for n in range(6)])
    requeued = run_cli("requeue-failed", cloud_env.stack.workspace, "--json")
    assert requeued.returncode == 0, requeued.stderr
    assert sorted(json.loads(requeued.stdout)["requeued"]) == sorted(f["hash"] for f in failures)

    returncode, fixed = start_json("--workers", "2")

    assert returncode == 0, fixed
    assert (fixed["execution_status"], fixed["output"]["failed"], fixed["output"]["remaining"]) == ("SUCCEEDED", 0, 0)
    assert fixed["status"]["done"] == fixed["status"]["groups"]
    backend = backend_of(cloud_env)
    for failure in failures:
        assert json.loads(backend.read(layout.done_key(failure["hash"])).body)["attempt"] == 1
        [record] = [json.loads(line) for line in backend.read(layout.result_key(failure["hash"])).body.splitlines()]
        assert record["text"].startswith("page ")


def test_groups_populated_while_a_round_runs_are_drained_by_the_same_execution(cloud_env):
    """More groups added mid-round than the round finishes: "remaining" goes up, yet the round made progress."""
    first = upload(cloud_env, "mid-round-a", [f"first {n}\n".encode() for n in range(20)])
    later = upload(cloud_env, "mid-round-b", [f"later {n}\n".encode() for n in range(40)])
    backend = backend_of(cloud_env)
    WorkIndex(backend).populate(first, 1)
    first_hashes = [layout.group_hash([p]) for p in first]

    started = run_cli("start", "--stack", STACK, "--workers", "1", "--json")
    assert started.returncode == 0, started.stderr
    execution_arn = json.loads(started.stdout)["execution_arn"]
    # Once the round's worker is under way (it has read the index), index twice as many groups again.
    deadline = time.monotonic() + 60
    while not any(backend.exists(layout.done_key(h)) for h in first_hashes):
        assert time.monotonic() < deadline, "the round never started"
        time.sleep(0.05)
    WorkIndex(backend).populate(later, 1)
    assert not all(backend.exists(layout.done_key(h)) for h in first_hashes), "the round ended before the populate: no race tested"

    sfn = cloud_env.client("stepfunctions")
    while (description := sfn.describe_execution(executionArn=execution_arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline + 120, "the execution did not end"
        time.sleep(0.25)

    assert description["status"] == "SUCCEEDED", description.get("cause")
    output = json.loads(description["output"])
    assert output["remaining"] == 0 and output["rounds"] >= 2
    assert all(backend.exists(layout.done_key(layout.group_hash([p]))) for p in first + later)


@pytest.mark.parametrize(
    "document",
    [
        {"workers": 2.5},
        {"workers": 3.0},
        {"workers": 1e3},
        {"workers": 0},
        {"workers": "4"},
        {"failureTolerance": 0.5},
        {"failureTolerance": -1},
    ],
    ids=["fraction", "whole-but-written-3.0", "exponent", "zero", "a-string", "fractional-tolerance", "negative-tolerance"],
)
def test_an_execution_whose_input_is_not_whole_numbers_ends_in_bad_input_and_runs_no_worker(cloud_env, document):
    sfn = cloud_env.client("stepfunctions")
    arn = sfn.start_execution(
        stateMachineArn=cloud_env.stack.state_machine_arn, name=f"bad-{uuid.uuid4().hex[:8]}", input=json.dumps(document)
    )["executionArn"]
    deadline = time.monotonic() + 60
    while (described := sfn.describe_execution(executionArn=arn))["status"] == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)

    assert (described["status"], described.get("error")) == ("FAILED", "BadInput"), described
    assert "whole number" in described["cause"]
    entered = {
        e["stateEnteredEventDetails"]["name"]
        for e in sfn.get_execution_history(executionArn=arn)["events"]
        if "stateEnteredEventDetails" in e
    }
    assert not entered & {"Init", "RunWorkers", "CountBefore"}, entered


def test_start_with_more_workers_than_the_stack_allows_warns_and_runs_the_cap(cloud_env):
    upload(cloud_env, "batch-cap", [f"page {n}\n".encode() for n in range(4)])
    populate(cloud_env, "batch-cap", group_size=1)

    result = run_cli("start", "--stack", STACK, "--workers", "5", "--wait", "--json")

    assert result.returncode == 0, result.stderr
    assert (
        f"s3wq: warning: --workers 5 is more than the stack's maxWorkers ({MAX_WORKERS}); the execution runs {MAX_WORKERS}" in result.stderr
    )
    arn = json.loads(result.stdout)["execution_arn"]
    events = cloud_env.client("stepfunctions").get_execution_history(executionArn=arn)["events"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
    assert "CapWorkers" in entered


def test_the_concurrency_check_reads_the_accounts_unreserved_concurrency(cloud_env):
    from s3wq.cli.execution import concurrency_warning
    from s3wq.dev.localcloud.server import LOCAL_ACCOUNT_CONCURRENCY

    lambda_client = cloud_env.client("lambda")
    assert concurrency_warning(lambda_client, LOCAL_ACCOUNT_CONCURRENCY) is None
    warning = concurrency_warning(lambda_client, LOCAL_ACCOUNT_CONCURRENCY + 1)
    assert f"more than the account's unreserved Lambda concurrency ({LOCAL_ACCOUNT_CONCURRENCY})" in warning
    assert "workerReservedConcurrency" in warning
