"""The CLI against S3 over HTTP, as a user runs it: globs expanded by listing, bad workspaces refused."""

from __future__ import annotations

import json
import uuid

import pytest
from support import IGNORING_CONDITIONS_BUCKETS, run_cli

from s3wq import WorkIndex
from s3wq.protocol.probe import probe_store
from s3wq.store import S3Backend, make_s3_client, request_counts


def test_populate_expands_an_s3_glob_by_listing(s3_client, bucket, s3_workspace, s3_backend):
    for name in ["a.pdf", "b.pdf", "notes.txt", "sub/c.pdf"]:
        s3_client.put_object(Bucket=bucket, Key=f"inputs/{name}", Body=b"x")

    result = run_cli("populate", s3_workspace, f"s3://{bucket}/inputs/*.pdf", "--group-size", "2", "--json")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added_paths"] == 3
    indexed = {p for g in WorkIndex(s3_backend).iter_groups() for p in g.paths}
    # fnmatch's "*" crosses "/", as S3 keys have no directories.
    assert indexed == {f"s3://{bucket}/inputs/a.pdf", f"s3://{bucket}/inputs/b.pdf", f"s3://{bucket}/inputs/sub/c.pdf"}


@pytest.mark.parametrize("command", [["status"], ["work", "--time-limit", "5"], ["populate", "SOURCE"], ["requeue-failed"]])
def test_a_missing_bucket_is_bad_input_named_in_one_line(s3_server, bucket, command):
    workspace = "s3://s3wq-no-such-bucket-7f3a/ws"
    args = [command[0], workspace, *[f"s3://{bucket}/in/a.pdf" if a == "SOURCE" else a for a in command[1:]]]

    result = run_cli(*args)

    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "s3wq-no-such-bucket-7f3a" in result.stderr and "does not exist" in result.stderr


def test_a_glob_that_matches_nothing_changes_nothing(s3_client, bucket, s3_workspace):
    s3_client.put_object(Bucket=bucket, Key="inputs/a.pdf", Body=b"x")

    result = run_cli("populate", s3_workspace, f"s3://{bucket}/inputs/a.pdf", f"s3://{bucket}/inputs/*.tiff")

    assert result.returncode == 2
    assert "matched no objects" in result.stderr
    assert s3_client.list_objects_v2(Bucket=bucket, Prefix="ws/").get("KeyCount") == 0


# --- s3:// paths that do not exist are refused at populate, as local ones are --------------------------------


def put_inputs(s3_client, bucket: str, names: list[str]) -> list[str]:
    for name in names:
        s3_client.put_object(Bucket=bucket, Key=f"inputs/{name}", Body=b"x")
    return [f"s3://{bucket}/inputs/{name}" for name in names]


def workspace_keys(s3_client, bucket: str) -> list[str]:
    return [item["Key"] for item in s3_client.list_objects_v2(Bucket=bucket, Prefix="ws/").get("Contents", [])]


@pytest.mark.parametrize("present", [1, 12], ids=["checked-by-head", "checked-by-listing-the-folder"])
def test_populate_refuses_an_s3_path_that_does_not_exist_and_changes_nothing(s3_client, bucket, s3_workspace, tmp_path, present):
    paths = put_inputs(s3_client, bucket, [f"doc-{n:02d}.pdf" for n in range(present)])
    missing = f"s3://{bucket}/inputs/doc-05x.pdf"  # sorts among the others: the listing must not skip past it
    manifest = tmp_path / "inputs.txt"
    manifest.write_text("\n".join([*paths, missing]) + "\n")

    result = run_cli("populate", s3_workspace, f"@{manifest}")

    assert result.returncode == 2
    assert result.stderr.strip() == f"s3wq: error: {manifest}:{present + 1}: no such object (or not readable): {missing}"
    assert workspace_keys(s3_client, bucket) == []


def test_populate_names_how_many_s3_paths_are_missing_and_how_to_skip_the_check(s3_client, bucket, s3_workspace):
    [present] = put_inputs(s3_client, bucket, ["a.pdf"])

    result = run_cli("populate", s3_workspace, present, f"s3://{bucket}/inputs/x.pdf", f"s3://{bucket}/other/y.pdf")

    assert result.returncode == 2
    assert "(and 1 more; --no-check skips this check)" in result.stderr and result.stderr.count("\n") == 1


def test_populate_no_check_indexes_s3_paths_without_looking_them_up(s3_client, bucket, s3_workspace, s3_backend):
    [present] = put_inputs(s3_client, bucket, ["a.pdf"])

    result = run_cli("populate", s3_workspace, present, f"s3://{bucket}/inputs/later.pdf", "--no-check", "--json")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added_paths"] == 2
    assert json.loads(result.stdout)["s3_requests"].get("HeadObject", 0) == 0


def test_work_reset_and_requeue_on_a_store_without_conditional_delete(s3_client, s3_workspace_without_conditional_delete):
    workspace = s3_workspace_without_conditional_delete
    bucket = workspace.removeprefix("s3://").split("/", 1)[0]
    for n in range(3):
        s3_client.put_object(Bucket=bucket, Key=f"inputs/doc-{n}.txt", Body=f"doc {n}\n".encode())
    assert run_cli("populate", workspace, f"s3://{bucket}/inputs/*.txt", "--group-size", "1").returncode == 0
    assert run_cli("work", workspace, "--processor", "noop").returncode == 0

    reset = run_cli("reset", workspace, "--all", "--yes", "--json")
    assert reset.returncode == 0, reset.stderr
    assert len(json.loads(reset.stdout)["reset"]) == 3
    counts = json.loads(run_cli("status", workspace, "--json").stdout)
    assert (counts["done"], counts["pending"]) == (0, 3)

    work = run_cli("work", workspace, "--json")
    assert work.returncode == 0, work.stderr
    assert json.loads(work.stdout)["processed"] == 3
    assert json.loads(run_cli("status", workspace, "--json").stdout)["done"] == 3


# --- what the store's conditional writes do, learnt at a worker's start --------------------------------------


def test_the_probe_finds_conditional_delete_on_s3_and_leaves_nothing(s3_backend, s3_client, bucket):
    assert probe_store(s3_backend) is True
    assert s3_client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_backend_probes_its_store_once_however_many_workers_use_it(bucket):
    # A Lambda execution environment keeps its backend across warm invocations.
    backend = S3Backend(s3_client=make_s3_client(), bucket=bucket, prefix="ws")

    assert probe_store(backend) is True
    first = request_counts(backend.s3)
    assert probe_store(backend) is True

    assert request_counts(backend.s3) == first == {"DeleteObject": 2, "PutObject": 3}


def test_the_probe_finds_a_store_without_conditional_delete(s3_client, s3_workspace_without_conditional_delete):
    bucket = s3_workspace_without_conditional_delete.removeprefix("s3://").split("/", 1)[0]
    assert probe_store(S3Backend(s3_client=s3_client, bucket=bucket, prefix="ws")) is False
    assert s3_client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_worker_refuses_a_store_that_ignores_conditional_writes_in_one_line_and_claims_nothing(s3_client):
    bucket = f"{IGNORING_CONDITIONS_BUCKETS}{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=bucket)
    s3_client.put_object(Bucket=bucket, Key="inputs/a.txt", Body=b"a")
    workspace = f"s3://{bucket}/ws"
    assert run_cli("populate", workspace, f"s3://{bucket}/inputs/a.txt").returncode == 0
    before = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket)["Contents"])

    work = run_cli("work", workspace)

    assert work.returncode == 2, work.stderr
    assert work.stderr.strip().count("\n") == 0
    assert "ignores If-None-Match on PUT" in work.stderr and "s3wq's claims need conditional writes" in work.stderr
    assert sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket)["Contents"]) == before
