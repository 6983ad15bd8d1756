"""Edges of the input policy, on S3 over HTTP and through the real command line.

Whoever may write a workspace's index (olmocr writes the same layout) must
not make a worker on this machine read its local files, or another bucket
when the worker was told where its inputs are; one malformed URI must be
that line's or that input's error, not the whole invocation's; and text
from the workspace must never reach a terminal as escape sequences.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from helpers.lambda_context import LambdaContext
from support import run_cli

from s3wq.config import ENV_AUTO_START, ENV_CHECK_INPUTS, ENV_INPUT_LOCATIONS, ENV_STATE_MACHINE_ARN, ENV_WORKSPACE
from s3wq.handlers import populate
from s3wq.handlers.runtime import reset_runtime
from s3wq.index import WorkIndex, encode_groups
from s3wq.model import Group
from s3wq.store import layout, open_backend

EVENTS_DIR = Path(__file__).resolve().parent.parent / "events"
SECRET = b"the other bucket's secret: 51c0e7d2\n"
# ESC sequences (clear the screen, set the window title), BEL, and C1's CSI (U+009B), as a hand-written index may hold them.
ESCAPES = "\x1b[2J\x1b]0;pwned\x07evil\x9b31m"


def hand_made_index(s3_backend, paths: list[str]) -> dict[str, str]:
    """An index written by hand, one path a group; path -> its group's hash."""
    groups = [Group(layout.group_hash([path]), (path,)) for path in paths]
    s3_backend.write(layout.LEGACY_INDEX_KEY, encode_groups(groups))
    return {path: group.hash for path, group in zip(paths, groups)}


def result_row(s3_backend, hash_: str) -> dict:
    [row] = [json.loads(line) for line in s3_backend.read(layout.result_key(hash_)).body.decode().splitlines()]
    return row


@pytest.fixture
def other_bucket(s3_client):
    name = f"other-{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    s3_client.put_object(Bucket=name, Key="secret.txt", Body=SECRET)
    return name


def test_a_cli_worker_on_s3_reads_no_local_file_and_with_input_locations_no_other_bucket(
    s3_client, s3_backend, s3_workspace, bucket, other_bucket, tmp_path
):
    local_secret = tmp_path / "secret.txt"
    local_secret.write_bytes(b"a local secret: 0d9f\n")
    s3_client.put_object(Bucket=bucket, Key="inputs/doc.txt", Body=b"the document\n")
    good, foreign, local = f"s3://{bucket}/inputs/doc.txt", f"s3://{other_bucket}/secret.txt", str(local_secret)
    hashes = hand_made_index(s3_backend, [good, foreign, local])

    result = run_cli(
        "work", s3_workspace, "--processor", "text", "--time-limit", "60", "--input-locations", f"s3://{bucket}/inputs", "--json"
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["input_errors"] == 2
    assert result_row(s3_backend, hashes[good])["text"] == "the document\n"
    for path, reason in ((foreign, "outside the allowed input locations"), (local, "is not an s3:// URI")):
        row = result_row(s3_backend, hashes[path])
        assert row["text"] is None and "input refused" in row["error"] and reason in row["error"], row
    stored = b"".join(s3_backend.read(key).body for key in s3_backend.list_keys(""))
    assert b"51c0e7d2" not in stored and b"0d9f" not in stored


def test_a_cli_worker_on_s3_reads_local_paths_only_when_allowed(s3_backend, s3_workspace, tmp_path):
    local = tmp_path / "page.txt"
    local.write_text("a page on this machine\n")
    [hash_] = hand_made_index(s3_backend, [str(local)]).values()

    refused = run_cli("work", s3_workspace, "--processor", "text", "--time-limit", "60")
    assert refused.returncode == 0, refused.stderr
    row = result_row(s3_backend, hash_)
    assert row["text"] is None and "--allow-local-inputs" in row["error"], row

    run_cli("reset", s3_workspace, "--all", "--yes")
    allowed = run_cli("work", s3_workspace, "--processor", "text", "--time-limit", "60", "--allow-local-inputs")
    assert allowed.returncode == 0, allowed.stderr
    assert result_row(s3_backend, hash_)["text"] == "a page on this machine\n"


def test_a_bad_input_location_is_a_one_line_error_and_changes_nothing(s3_backend, s3_workspace, bucket):
    hand_made_index(s3_backend, [f"s3://{bucket}/inputs/doc.txt"])
    before = sorted(s3_backend.list_keys(""))
    result = run_cli("work", s3_workspace, "--input-locations", "s3://Bad_Bucket/x")
    assert result.returncode == 2 and "--input-locations" in result.stderr and "'Bad_Bucket' is not a valid bucket name" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert sorted(s3_backend.list_keys("")) == before


def test_a_malformed_uri_is_one_bad_line_of_the_deployed_populate(monkeypatch, s3_client, s3_backend, bucket):
    """urlsplit's own ValueError ("Invalid IPv6 URL", the NFKC check) once failed the whole invocation, indexing nothing."""
    for name, value in {
        ENV_WORKSPACE: f"s3://{bucket}/ws",
        ENV_INPUT_LOCATIONS: f"s3://{bucket}",
        ENV_CHECK_INPUTS: "false",
        ENV_AUTO_START: "false",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(ENV_STATE_MACHINE_ARN, raising=False)
    reset_runtime()
    good = f"s3://{bucket}/inputs/doc.txt"
    lines = [good, f"s3://[{bucket}/x", f"s3://{bucket}\uff0fx/y", f"s3://{bucket}]/x", f"s3://{bucket}#@other-bucket/x"]
    s3_client.put_object(Bucket=bucket, Key="ws/manifests/m.txt", Body="\n".join(lines).encode())
    try:
        event = json.loads((EVENTS_DIR / "s3-put-manifest.json").read_text().replace("s3wq-test-bucket", bucket))
        event["Records"][0]["s3"]["object"]["key"] = "ws/manifests/m.txt"
        populate.handler(event, LambdaContext(60))
    finally:
        reset_runtime()
    assert [p for g in WorkIndex(s3_backend).iter_groups() for p in g.paths] == [good]
    record = json.loads(s3_backend.read(layout.manifest_errors_key("m.txt")).body)
    assert sorted(b["line"] for b in record["bad_lines"]) == [2, 3, 4, 5]
    assert all("invalid bucket name" in b["reason"] for b in record["bad_lines"]), record


def test_workspace_text_reaches_the_terminal_escaped_and_json_exact(workspace):
    backend = open_backend(workspace)
    path = f"/nonexistent/{ESCAPES}.txt"
    [hash_] = hand_made_index(backend, [path]).values()
    worked = run_cli("work", workspace, "--processor", "text", "--time-limit", "60")  # an input error either way: read or refused
    assert worked.returncode == 0, worked.stderr

    for command in (("failures", workspace, "--inputs"), ("inspect", workspace, hash_)):
        shown = run_cli(*command)
        assert shown.returncode == 0, shown.stderr
        assert not any(c in shown.stdout for c in "\x1b\x07\x9b"), repr(shown.stdout)
        assert "/nonexistent/\\x1b[2J\\x1b]0;pwned\\x07evil\\x9b31m.txt" in shown.stdout
        exact = run_cli(*command, "--json")
        assert path in strings(json.loads(exact.stdout)), exact.stdout


def strings(value) -> set[str]:
    """Every string a JSON document holds."""
    if isinstance(value, str):
        return {value}
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return set().union(*(strings(item) for item in items))
