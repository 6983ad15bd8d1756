"""The CLI against S3 over HTTP, as a user runs it: globs expanded by listing, bad workspaces refused."""

from __future__ import annotations

import json

import pytest

from support import run_cli
from s3wq import WorkIndex


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
