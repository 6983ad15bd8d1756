"""The Lambda handlers, called as Lambda calls them, against S3 and Step Functions over HTTP (moto server).

Each test sets the handlers' environment and clears the cached runtime, so
every call is a cold start with exactly the configuration the test names.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import boto3
import pytest
from helpers.lambda_context import LambdaContext
from support import run_cli

from s3wq.config import (
    BACKLOG_METRIC,
    ENV_AUTO_START,
    ENV_GROUP_SIZE,
    ENV_GROUP_TIMEOUT,
    ENV_LEASE,
    ENV_MAX_ATTEMPTS,
    ENV_PROCESSOR,
    ENV_STATE_MACHINE_ARN,
    ENV_WORKERS,
    ENV_WORKSPACE,
    WORKSPACE_DIMENSION,
)
from s3wq.dev.samples import sample_text
from s3wq.errors import BadInput, BucketNotFound, ConfigError, S3wqError, StorageError
from s3wq.handlers import populate, status, worker
from s3wq.index import WorkIndex
from s3wq.model import LockState
from s3wq.ops.problems import workspace_problems
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import ClaimProtocol
from s3wq.store import layout

from .workers import recorded_calls

# Powertools warns when an invocation adds no metric (an ignored event, say); that is expected here.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

EVENTS_DIR = Path(__file__).resolve().parent.parent / "events"
EVENT_BUCKET = "s3wq-test-bucket"
MANIFEST_KEY = "ws/manifests/batch 1, scans.txt"  # what the sample event's URL-encoded key decodes to
REPORT_KEYS = {"worker_id", "processed", "failed", "conflicts", "reclaimed", "stopped_reason"}


def load_event(name: str, bucket: str) -> dict:
    return json.loads((EVENTS_DIR / name).read_text().replace(EVENT_BUCKET, bucket))


def manifest_event(bucket: str, event_key: str | None = None) -> dict:
    """The sample S3 Put event for ``bucket``; ``event_key`` (as S3 would encode it) replaces the sample's key."""
    event = load_event("s3-put-manifest.json", bucket)
    if event_key is not None:
        event["Records"][0]["s3"]["object"]["key"] = event_key
    return event


@pytest.fixture
def state_machine(s3_server):
    sfn = boto3.client("stepfunctions")
    definition = {"StartAt": "Drain", "States": {"Drain": {"Type": "Pass", "End": True}}}
    arn = sfn.create_state_machine(
        name=f"s3wq-{uuid.uuid4().hex[:12]}", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/x"
    )["stateMachineArn"]
    yield arn
    sfn.delete_state_machine(stateMachineArn=arn)


def executions(state_machine_arn: str) -> list[dict]:
    return boto3.client("stepfunctions").list_executions(stateMachineArn=state_machine_arn)["executions"]


def objects(s3_client, bucket: str, prefix: str = "") -> dict[str, str]:
    """Key -> ETag of everything under ``prefix``."""
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {item["Key"]: item["ETag"] for page in pages for item in page.get("Contents", [])}


def indexed_paths(s3_backend) -> set[str]:
    return {path for group in WorkIndex(s3_backend).iter_groups() for path in group.paths}


def put_manifest(s3_client, bucket: str, key: str, lines: list[str], *, inputs_exist: bool = True) -> None:
    """Upload a manifest; with ``inputs_exist``, first the objects its plain s3:// lines name in ``bucket`` (populate checks them)."""
    if inputs_exist:
        for line in lines:
            if line.startswith(f"s3://{bucket}/") and not any(c in line for c in "*?["):
                s3_client.put_object(Bucket=bucket, Key=line.split("/", 3)[3], Body=b"%PDF-")
    s3_client.put_object(Bucket=bucket, Key=key, Body="\n".join(lines).encode("utf-8") + b"\n")


def put_text_inputs(s3_client, bucket: str, count: int) -> dict[str, str]:
    """Upload ``count`` text documents; return path -> text."""
    docs = {f"s3://{bucket}/inputs/doc-{n:02d}.txt": sample_text(n) for n in range(count)}
    for path, body in docs.items():
        s3_client.put_object(Bucket=bucket, Key=path.split("/", 3)[3], Body=body.encode("utf-8"))
    return docs


# --- populate -----------------------------------------------------------------------------------------------


# The sample event as AWS sends it (URL-encoded key), and the same event for a key that needs no decoding.
SAMPLE_KEY = pytest.param(None, MANIFEST_KEY, id="sample-event-encoded-key")
PLAIN_KEY = pytest.param("ws/manifests/batch-1.txt", "ws/manifests/batch-1.txt", id="plain-key")


@pytest.mark.parametrize("event_key, manifest_key", [SAMPLE_KEY, PLAIN_KEY])
def test_populate_indexes_the_manifest_named_by_an_s3_event_and_starts_one_execution(
    lambda_env, s3_client, bucket, s3_backend, state_machine, event_key, manifest_key
):
    lambda_env(**{ENV_STATE_MACHINE_ARN: state_machine, ENV_AUTO_START: "true", ENV_GROUP_SIZE: 2, ENV_WORKERS: 4})
    inputs = [f"s3://{bucket}/inputs/scan-01.pdf", f"s3://{bucket}/inputs/scan-02.pdf", f"s3://{bucket}/inputs/scan 03, final.pdf"]
    put_manifest(s3_client, bucket, manifest_key, ["# batch 1, from the scanner", inputs[0], inputs[1], "", inputs[2], "ftp://nope/x"])
    manifest_uri = f"s3://{bucket}/{manifest_key}"

    result = populate.handler(manifest_event(bucket, event_key), LambdaContext(30))

    [entry] = result["manifests"]
    assert entry.get("error") is None
    execution_arn = entry.pop("execution_arn")
    [bad_line] = entry.pop("bad_lines")
    assert entry.pop("bad_lines_recorded_in").startswith(f"s3://{bucket}/ws/manifest_errors/")
    assert entry == {
        "manifest": manifest_uri,
        "added_paths": 3,
        "added_groups": 2,
        "already_indexed": 0,
        "bad_line_count": 1,
        "execution_started": True,
    }
    assert (bad_line["manifest"], bad_line["line"]) == (manifest_uri, 6)
    assert "ftp" in bad_line["reason"]
    assert indexed_paths(s3_backend) == set(inputs)
    [execution] = executions(state_machine)
    assert execution["executionArn"] == execution_arn
    started_with = boto3.client("stepfunctions").describe_execution(executionArn=execution_arn)["input"]
    assert json.loads(started_with) == {"workers": 4}


def test_populate_records_a_manifests_bad_lines_where_status_shows_them_and_clears_them_on_a_fixed_upload(
    lambda_env, s3_client, bucket, s3_backend, s3_workspace
):
    lambda_env(**{ENV_AUTO_START: "false", ENV_GROUP_SIZE: 2})
    present = f"s3://{bucket}/inputs/doc-1.txt"
    s3_client.put_object(Bucket=bucket, Key="inputs/doc-1.txt", Body=b"one")
    key = "ws/manifests/nightly/batch-7.txt"
    put_manifest(s3_client, bucket, key, [present, "ftp://nope/x", f"s3://{bucket}/inputs/never-uploaded.txt"], inputs_exist=False)

    entry = populate.handler(manifest_event(bucket, key), LambdaContext(30))["manifests"][0]

    record_key = "ws/manifest_errors/nightly/batch-7.txt.json"
    assert entry["added_paths"] == 1
    assert entry["bad_lines_recorded_in"] == f"s3://{bucket}/{record_key}"
    record = json.loads(s3_client.get_object(Bucket=bucket, Key=record_key)["Body"].read())
    assert record["manifest"] == f"s3://{bucket}/{key}" and record["bad_line_count"] == 2
    assert [(b["line"], "ftp" in b["reason"] or "never-uploaded" in b["reason"]) for b in record["bad_lines"]] == [(2, True), (3, True)]
    shown = run_cli("status", s3_workspace)
    assert shown.returncode == 0, shown.stderr
    assert f"manifest s3://{bucket}/{key}: 2 bad lines skipped, listed in s3://{bucket}/{record_key}" in shown.stdout

    # The manifest fixed and uploaded again: its record goes.
    put_manifest(s3_client, bucket, key, [present])
    populate.handler(manifest_event(bucket, key), LambdaContext(30))
    assert "Contents" not in s3_client.list_objects_v2(Bucket=bucket, Prefix="ws/manifest_errors/")
    assert "bad line" not in run_cli("status", s3_workspace).stdout


@pytest.mark.parametrize("event_key, manifest_key", [SAMPLE_KEY, PLAIN_KEY])
def test_a_redelivered_s3_event_adds_nothing_and_starts_nothing(
    lambda_env, s3_client, bucket, s3_backend, state_machine, event_key, manifest_key
):
    lambda_env(**{ENV_STATE_MACHINE_ARN: state_machine, ENV_GROUP_SIZE: 2})
    inputs = [f"s3://{bucket}/inputs/scan-{n:02d}.pdf" for n in range(5)]
    put_manifest(s3_client, bucket, manifest_key, inputs)
    event = manifest_event(bucket, event_key)
    first = populate.handler(event, LambdaContext(30))["manifests"][0]
    workspace_before = objects(s3_client, bucket, "ws/")

    lambda_env(**{ENV_STATE_MACHINE_ARN: state_machine, ENV_GROUP_SIZE: 2})  # a new execution environment, too
    again = populate.handler(event, LambdaContext(30))["manifests"][0]

    assert (first.get("added_paths"), first.get("added_groups")) == (5, 3)
    assert (again["added_paths"], again["added_groups"], again["already_indexed"]) == (0, 0, 5)
    assert again["execution_arn"] == first["execution_arn"]
    assert objects(s3_client, bucket, "ws/") == workspace_before
    assert [e["executionArn"] for e in executions(state_machine)] == [first["execution_arn"]]


def test_a_redelivered_s3_event_reports_that_no_execution_was_started(lambda_env, s3_client, bucket, state_machine):
    lambda_env(**{ENV_STATE_MACHINE_ARN: state_machine})
    put_manifest(s3_client, bucket, "ws/manifests/batch-1.txt", [f"s3://{bucket}/inputs/scan-01.pdf"])
    event = manifest_event(bucket, "ws/manifests/batch-1.txt")
    populate.handler(event, LambdaContext(30))

    again = populate.handler(event, LambdaContext(30))["manifests"][0]

    assert (again["added_paths"], len(executions(state_machine))) == (0, 1)
    assert again["execution_started"] is False


def test_auto_start_off_indexes_without_starting(lambda_env, s3_client, bucket, s3_backend, state_machine):
    lambda_env(**{ENV_STATE_MACHINE_ARN: state_machine, ENV_AUTO_START: "false"})
    put_manifest(s3_client, bucket, "ws/manifests/batch-1.txt", [f"s3://{bucket}/inputs/scan-01.pdf"])

    [entry] = populate.handler(manifest_event(bucket, "ws/manifests/batch-1.txt"), LambdaContext(30))["manifests"]

    assert (entry["added_paths"], entry["execution_arn"], entry["execution_started"]) == (1, None, False)
    assert indexed_paths(s3_backend) == {f"s3://{bucket}/inputs/scan-01.pdf"}
    assert executions(state_machine) == []


def test_every_record_of_an_event_is_indexed(lambda_env, s3_client, bucket, s3_backend):
    first = [f"s3://{bucket}/inputs/a-{n}.pdf" for n in range(3)]
    second = [f"s3://{bucket}/inputs/b-{n}.pdf" for n in range(4)]
    put_manifest(s3_client, bucket, "ws/manifests/first.txt", first)
    put_manifest(s3_client, bucket, "ws/manifests/second.txt", second)
    event = manifest_event(bucket, "ws/manifests/first.txt")
    record = json.loads(json.dumps(event["Records"][0]))
    record["s3"]["object"]["key"] = "ws/manifests/second.txt"
    event["Records"].append(record)

    result = populate.handler(event, LambdaContext(30))

    assert [(m["manifest"], m.get("added_paths")) for m in result["manifests"]] == [
        (f"s3://{bucket}/ws/manifests/first.txt", 3),
        (f"s3://{bucket}/ws/manifests/second.txt", 4),
    ]
    assert all(m["execution_arn"] is None for m in result["manifests"])  # no state machine configured
    assert indexed_paths(s3_backend) == set(first + second)


def test_the_s3_test_event_is_ignored(lambda_env, s3_client, bucket):
    result = populate.handler(load_event("s3-test-event.json", bucket), LambdaContext(30))

    assert result == {"ignored": "s3:TestEvent"}
    assert objects(s3_client, bucket) == {}


@pytest.mark.parametrize(
    "key, reason",
    [
        pytest.param("ws/inputs/list.txt", "not under", id="outside-manifests"),
        pytest.param("other/manifests/list.txt", "not under", id="other-workspace"),
        pytest.param("ws/manifests/", "not under", id="folder-marker"),
    ],
)
def test_a_key_outside_the_manifests_folder_is_ignored(lambda_env, s3_client, bucket, key, reason):
    put_manifest(s3_client, bucket, key, [f"s3://{bucket}/inputs/scan-01.pdf"])
    before = objects(s3_client, bucket)
    event = manifest_event(bucket, key)

    [entry] = populate.handler(event, LambdaContext(30))["manifests"]

    assert entry["manifest"] == f"s3://{bucket}/{key}"
    assert reason in entry["ignored"]
    assert objects(s3_client, bucket) == before


def test_a_manifest_deleted_before_populate_read_it_is_reported_not_raised(lambda_env, s3_client, bucket, state_machine):
    lambda_env(**{ENV_STATE_MACHINE_ARN: state_machine})

    [entry] = populate.handler(manifest_event(bucket, "ws/manifests/gone.txt"), LambdaContext(30))["manifests"]

    assert entry["manifest"] == f"s3://{bucket}/ws/manifests/gone.txt"
    assert "NoSuchKey" in entry["error"]
    assert "added_paths" not in entry
    # Nothing indexed; the error recorded where `s3wq status` shows it.
    assert list(objects(s3_client, bucket)) == ["ws/manifest_errors/gone.txt.json"]
    record = json.loads(s3_client.get_object(Bucket=bucket, Key="ws/manifest_errors/gone.txt.json")["Body"].read())
    assert record["bad_line_count"] == 1 and "NoSuchKey" in record["bad_lines"][0]["reason"]
    assert executions(state_machine) == []


@pytest.mark.parametrize(
    "event",
    [
        pytest.param({"detail-type": "Object Created", "source": "aws.s3", "detail": {}}, id="eventbridge-shape"),
        pytest.param({}, id="empty"),
        pytest.param([{"sources": ["s3://b/x"]}], id="a-list"),
        pytest.param({"sources": []}, id="no-sources"),
        pytest.param({"sources": "s3://b/x.pdf"}, id="sources-not-a-list"),
        pytest.param({"sources": ["s3://b/x.pdf"], "group_size": 0}, id="group-size-zero"),
        pytest.param({"sources": ["s3://b/x.pdf"], "group_size": True}, id="group-size-bool"),
    ],
)
def test_an_unrecognised_populate_event_raises_bad_input_and_writes_nothing(lambda_env, s3_client, bucket, event):
    with pytest.raises(BadInput):
        populate.handler(event, LambdaContext(30))

    assert objects(s3_client, bucket) == {}


def test_a_direct_invocation_indexes_its_sources_with_its_group_size(lambda_env, s3_client, bucket, s3_backend, state_machine):
    lambda_env(**{ENV_STATE_MACHINE_ARN: state_machine, ENV_GROUP_SIZE: 10})
    docs = put_text_inputs(s3_client, bucket, 5)
    s3_client.put_object(Bucket=bucket, Key="inputs/readme.md", Body=b"not matched by the glob")
    s3_client.put_object(Bucket=bucket, Key="elsewhere/extra.pdf", Body=b"%PDF-")
    sources = [f"s3://{bucket}/inputs/doc-*.txt", f"s3://{bucket}/elsewhere/extra.pdf"]

    result = populate.handler({"sources": sources, "group_size": 2}, LambdaContext(30))

    assert (result["added_paths"], result["added_groups"], result["bad_lines"]) == (6, 3, [])
    assert indexed_paths(s3_backend) == set(docs) | {f"s3://{bucket}/elsewhere/extra.pdf"}
    assert sorted(len(g.paths) for g in WorkIndex(s3_backend).iter_groups()) == [2, 2, 2]
    assert [e["executionArn"] for e in executions(state_machine)] == [result["execution_arn"]]


def test_a_direct_invocation_naming_an_object_that_does_not_exist_is_refused_and_writes_nothing(lambda_env, s3_client, bucket):
    with pytest.raises(BadInput, match="no such object"):
        populate.handler({"sources": [f"s3://{bucket}/inputs/never-uploaded.pdf"]}, LambdaContext(30))

    assert objects(s3_client, bucket) == {}


# --- worker -------------------------------------------------------------------------------------------------


def test_a_worker_drains_the_queue_with_the_text_processor(lambda_env, s3_client, bucket, s3_backend):
    lambda_env(**{ENV_PROCESSOR: "text"})
    docs = put_text_inputs(s3_client, bucket, 7)
    WorkIndex(s3_backend).populate(list(docs), group_size=3)
    groups = list(WorkIndex(s3_backend).iter_groups())

    report = worker.handler(load_event("map-item.json", bucket), LambdaContext(60))

    assert REPORT_KEYS <= set(report)
    assert report["worker_id"].startswith("w2-")
    assert {k: report[k] for k in REPORT_KEYS - {"worker_id"}} == {
        "processed": 3,
        "failed": 0,
        "conflicts": 0,
        "reclaimed": 0,
        "stopped_reason": "queue_empty",
    }
    assert set(objects(s3_client, bucket, "ws/done_flags/")) == {f"ws/{layout.done_key(g.hash)}" for g in groups}
    assert objects(s3_client, bucket, "ws/worker_locks/") == {}
    for group in groups:
        body = s3_backend.read(layout.result_key(group.hash)).body.decode("utf-8")
        records = [json.loads(line) for line in body.splitlines()]
        assert [(r["source"], r["text"]) for r in records] == [(p, docs[p]) for p in group.paths]
        assert {r["metadata"]["processor"]["name"] for r in records} == {"text"}
        # The done flag names the processor that made the group, as a command-line worker's does.
        assert json.loads(s3_backend.read(layout.done_key(group.hash)).body)["processor"] == "text"


def test_a_processor_that_raises_fails_its_group_and_the_invocation_still_returns(
    lambda_env, s3_client, bucket, s3_backend, monkeypatch, record_dir
):
    lambda_env(**{ENV_PROCESSOR: "poison_processor:process", ENV_MAX_ATTEMPTS: 2})
    docs = put_text_inputs(s3_client, bucket, 6)
    WorkIndex(s3_backend).populate(list(docs), group_size=2)
    hashes = {g.hash for g in WorkIndex(s3_backend).iter_groups()}
    poison = min(hashes)
    monkeypatch.setenv("S3WQ_TEST_POISON_HASH", poison)

    report = worker.handler({"worker_index": 0, "workers": 1}, LambdaContext(60))

    assert (report["processed"], report["failed"], report["stopped_reason"]) == (2, 1, "queue_empty")
    assert recorded_calls(record_dir) == {**dict.fromkeys(hashes - {poison}, 1), poison: 2}
    failed_flag = json.loads(s3_backend.read(layout.failed_key(poison)).body)
    assert failed_flag["attempts"] == 2
    assert "RuntimeError: poisoned input" in failed_flag["error"]
    assert set(objects(s3_client, bucket, "ws/done_flags/")) == {f"ws/{layout.done_key(h)}" for h in hashes - {poison}}


def test_the_stacks_group_timeout_stops_a_hung_group_on_each_attempt_and_the_worker_drains_the_rest(
    lambda_env, s3_client, bucket, s3_backend, record_dir
):
    lambda_env(**{ENV_PROCESSOR: "hang_processors:hangs", ENV_GROUP_TIMEOUT: 1, ENV_MAX_ATTEMPTS: 2})
    inputs = {f"inputs/doc-{n}.txt": b"text\n" for n in range(2)} | {"inputs/stuck.txt": b"HANG\n"}
    for key, body in inputs.items():
        s3_client.put_object(Bucket=bucket, Key=key, Body=body)
    WorkIndex(s3_backend).populate([f"s3://{bucket}/{key}" for key in inputs], group_size=1)
    stuck = next(g.hash for g in WorkIndex(s3_backend).iter_groups() if g.paths[0].endswith("stuck.txt"))

    report = worker.handler({"worker_index": 0, "workers": 1}, LambdaContext(60))

    assert (report["processed"], report["failed"], report["timed_out"], report["stopped_reason"]) == (2, 1, 2, "queue_empty")
    assert recorded_calls(record_dir)[stuck] == 2
    flag = json.loads(s3_backend.read(layout.failed_key(stuck)).body)
    assert (flag["kind"], flag["attempts"]) == ("timeout", 2)


def test_a_group_timeout_longer_than_the_invocation_has_left_is_cut_to_it(lambda_env, s3_client, bucket, s3_backend):
    """The stack checks it against the function's timeout; an invocation's start-up takes a little of that."""
    lambda_env(**{ENV_PROCESSOR: "text", ENV_GROUP_TIMEOUT: 890})
    WorkIndex(s3_backend).populate(list(put_text_inputs(s3_client, bucket, 2)), group_size=1)

    report = worker.handler({"worker_index": 0, "workers": 1}, LambdaContext(30))

    assert (report["processed"], report["stopped_reason"]) == (2, "queue_empty")


def test_a_worker_never_claims_a_group_it_cannot_finish_before_the_deadline(lambda_env, s3_client, bucket, s3_backend, record_dir):
    budget = 2.0
    lambda_env(**{ENV_PROCESSOR: "slow_processor:process", ENV_LEASE: 30})
    WorkIndex(s3_backend).populate([f"s3://{bucket}/inputs/doc-{n}.txt" for n in range(5)], group_size=1)

    report = worker.handler({"worker_index": 0, "workers": 1}, LambdaContext(budget))

    calls = recorded_calls(record_dir)
    assert report["stopped_reason"] == "time_limit"
    # Each group takes 1 s of a 2 s budget: after the first, there is no time for another.
    assert len(calls) <= 1 and set(calls.values()) <= {1}
    locks = objects(s3_client, bucket, "ws/worker_locks/")
    if report["timed_out"]:
        # On a busy machine the start can take the first group's second: it
        # was stopped before the deadline and handed back, not left held.
        assert report["processed"] == 0 and len(locks) == 1
        [key] = locks
        assert LockBody.decode(s3_backend.read(key.removeprefix("ws/")).body).state == LockState.RELEASED
    else:
        assert report["processed"] == len(calls) and locks == {}
    done = {f"ws/{layout.done_key(h)}" for h in calls} if report["processed"] else set()
    assert set(objects(s3_client, bucket, "ws/done_flags/")) == done
    assert status.handler({}, LambdaContext(30))["pending"] == 5 - report["processed"]


@pytest.mark.parametrize("event", [{"worker_index": 8, "workers": 8}, {"worker_index": "two", "workers": 8}, ["not", "an", "object"]])
def test_a_bad_map_item_is_a_config_error_and_claims_nothing(lambda_env, s3_client, bucket, s3_backend, event):
    WorkIndex(s3_backend).populate([f"s3://{bucket}/inputs/doc-1.txt"], group_size=1)

    with pytest.raises(ConfigError):
        worker.handler(event, LambdaContext(60))

    assert objects(s3_client, bucket, "ws/worker_locks/") == {}
    assert objects(s3_client, bucket, "ws/done_flags/") == {}


@pytest.mark.parametrize("handler", [worker.handler, status.handler], ids=["worker", "status"])
def test_a_storage_failure_propagates_out_of_the_handler(lambda_env, s3_client, handler):
    missing = f"s3wq-missing-{uuid.uuid4().hex[:12]}"
    lambda_env(**{ENV_WORKSPACE: f"s3://{missing}/ws"})

    with pytest.raises(S3wqError) as raised:
        handler({"worker_index": 0, "workers": 1}, LambdaContext(60))

    assert isinstance(raised.value, (BucketNotFound, StorageError))
    assert missing not in {b["Name"] for b in s3_client.list_buckets()["Buckets"]}


# --- status -------------------------------------------------------------------------------------------------


def test_status_counts_each_state_of_the_queue(lambda_env, bucket, s3_backend):
    paths = [f"s3://{bucket}/inputs/doc-{n:02d}.txt" for n in range(9)]
    WorkIndex(s3_backend).populate(paths, group_size=2)
    done, failed, locked, *_ = sorted(WorkIndex(s3_backend).iter_groups(), key=lambda g: g.hash)
    protocol = ClaimProtocol(s3_backend, worker_id="w-status", lease_seconds=900)
    claim = protocol.claim(done.hash)
    protocol.mark_done(claim)
    protocol.release(claim)
    protocol.finalize_failed(protocol.claim(failed.hash), failed, "RuntimeError: boom")
    protocol.claim(locked.hash)

    result = status.handler({}, LambdaContext(30))

    # The live lock's 900 s lease, in whole seconds, past S3's clock resolution.
    assert 895 <= result.pop("wait_seconds") <= 904
    assert result == {
        "groups": 5,
        "paths": 9,
        "done": 1,
        "failed": 1,
        "locked": 1,
        "claimed_ahead": 0,
        "pending": 2,
        "remaining": 3,
        "finished": 2,
        "released": 0,
        "unavailable": 0,
    }


def test_status_counts_the_input_errors_when_asked_as_s3wq_status_and_failures_do(lambda_env, bucket, s3_backend):
    """The drain loop's CountInputErrors: the groups done with inputs their processor could not use, and those inputs."""
    WorkIndex(s3_backend).populate([f"s3://{bucket}/inputs/doc-{n}.txt" for n in range(4)], group_size=1)
    clean, two, one, by_hand = sorted(WorkIndex(s3_backend).iter_groups(), key=lambda g: g.hash)
    protocol = ClaimProtocol(s3_backend, worker_id="w-inputs", lease_seconds=900)
    for group, count in ((clean, 0), (two, 2), (one, 1)):
        claim = protocol.claim(group.hash)
        protocol.record_input_errors(claim, count, tuple({"path": p, "error": "unreadable"} for p in group.paths))
        protocol.mark_done(claim, input_errors=count)
        protocol.release(claim)
    # A record that does not hold s3wq's count is counted by the inputs it names.
    s3_backend.write(layout.input_errors_key(by_hand.hash), json.dumps({"input_errors": "many", "inputs": [{}, {}, {}]}).encode())

    counts = status.handler({"input_errors": True}, LambdaContext(30))

    assert counts == {"input_error_groups": 3, "input_errors": 6}
    assert counts["input_error_groups"] == workspace_problems(s3_backend)["input_error_groups"]
    assert status.handler({"input_errors": False}, LambdaContext(30))["done"] == 3  # anything else: the queue's counts


def test_status_of_an_empty_workspace_is_all_zero(lambda_env):
    assert status.handler({}, LambdaContext(30)) == {
        "groups": 0,
        "paths": 0,
        "done": 0,
        "failed": 0,
        "locked": 0,
        "claimed_ahead": 0,
        "pending": 0,
        "remaining": 0,
        "finished": 0,
        "released": 0,
        "unavailable": 0,
        "wait_seconds": 0,
    }


def test_a_count_publishes_the_workspaces_backlog_and_planning_the_map_publishes_nothing(
    lambda_env, bucket, s3_backend, monkeypatch, capsys
):
    """The metric a model endpoint the stack starts scales on (s3wq_cdk.model_endpoint): by name, namespace and dimensions."""
    WorkIndex(s3_backend).populate([f"s3://{bucket}/inputs/doc-{n}.txt" for n in range(3)], group_size=1)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")  # as on Lambda
    capsys.readouterr()

    status.handler({}, LambdaContext(30))
    status.handler({"worker_items": 4}, LambdaContext(30))

    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    [blob] = blobs
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "s3wq" and [sorted(dimensions) for dimensions in directive["Dimensions"]] == [["service", "workspace"]]
    assert [metric["Name"] for metric in directive["Metrics"]] == [BACKLOG_METRIC]
    # EMF carries a metric's values as a list: one count, one value.
    assert (blob[BACKLOG_METRIC], blob[WORKSPACE_DIMENSION], blob["service"]) == ([3.0], f"s3://{bucket}/ws", "s3wq")


@pytest.mark.parametrize("workers", [1, 1500, 10_000])
def test_status_plans_one_map_item_per_worker_beyond_array_ranges_thousand(lambda_env, workers):
    items = status.handler({"worker_items": workers}, LambdaContext(30))

    assert items == list(range(workers))
    assert len(json.dumps(items).encode()) < 256 * 1024  # what a state may hold


@pytest.mark.parametrize("workers", [0, 10_001, 2.5, True, "4", None])
def test_status_refuses_to_plan_anything_but_a_whole_number_of_workers_in_range(lambda_env, workers):
    with pytest.raises(BadInput, match="'worker_items' must be a whole number from 1 to 10000"):
        status.handler({"worker_items": workers}, LambdaContext(30))
