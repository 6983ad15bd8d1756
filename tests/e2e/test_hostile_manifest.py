"""A hostile manifest and a hand-made index against the deployed stack on the local cloud.

Whoever may upload a manifest (or write the index) must not be able to make
the worker Lambda read its own disk or a bucket the deployment was not given:
on Lambda, ``/proc/self/environ`` holds the function's AWS credentials. The
manifest below mixes good lines (the workspace bucket, an allowed input
bucket) with local paths, ``..``, ``file://``, another bucket that exists and
holds a secret, URL-encoded tricks, NUL bytes, a line that is not UTF-8, long
lines and one 50 MB line. Every bad line must be recorded with its number,
every good line indexed and processed, and nothing of the host's disk or of
the other bucket may reach the workspace.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from s3wq import WorkIndex
from s3wq.dev.localcloud.cloud import DEFAULT_BUCKET, LocalCloud
from s3wq.index import encode_groups
from s3wq.model import Group
from s3wq.store import S3Backend, layout

INPUT_BUCKET, INPUT_PREFIX = "s3wq-inputs", "scans"
OTHER_BUCKET = "other-bucket"
SECRET = b"the other bucket's secret: 7f3a9c1e-do-not-leak\n"
LOCAL_FILES = ("/etc/passwd", "/etc/hostname")
FIFTY_MB = 50 * 2**20
MANIFEST_NAME = "hostile.txt"
RECORD_KEY = layout.manifest_errors_key(MANIFEST_NAME)


def host_secrets() -> list[bytes]:
    """Pieces of what the Lambda host could leak: lines of its files, its environment's credentials, the other bucket's object."""
    # /proc/self/environ of a Lambda is NUL-separated NAME=value pairs; these names are in every one of the local cloud's.
    pieces = [SECRET.strip(), b"AWS_LAMBDA_FUNCTION_NAME=", b"AWS_ENDPOINT_URL=", b"_HANDLER=s3wq.handlers."]
    for path in LOCAL_FILES:
        if os.path.exists(path):
            pieces += [line for line in Path(path).read_bytes().splitlines() if len(line) >= 6]
    return pieces


def hostile_manifest(bucket: str, prefix: str) -> tuple[bytes, dict[str, str], dict[int, str]]:
    """The manifest's bytes; the good paths it names (path -> text); each bad line's number -> a phrase its reason holds."""
    good: dict[str, str] = {}
    bad: dict[int, str] = {}
    lines: list[bytes] = [b"# a hostile manifest: good lines among bad ones"]

    def ok(line: str, *paths: str) -> None:
        lines.append(line.encode())
        good.update({path: f"text of {path}\n" for path in paths})

    def refused(line: bytes | str, phrase: str) -> None:
        lines.append(line if isinstance(line, bytes) else line.encode())
        bad[len(lines)] = phrase

    local = "is not an s3:// URI"
    outside = "outside the allowed input locations"
    ok(f"s3://{bucket}/inputs/doc-1.txt", f"s3://{bucket}/inputs/doc-1.txt")
    for path in (*LOCAL_FILES, "/proc/self/environ", "../../etc/passwd", "/proc/self/*", "~/.aws/credentials"):
        refused(path, local)
    refused("file:///etc/passwd", "file")
    refused(f"s3://{OTHER_BUCKET}/secret.txt", outside)
    refused(f"s3://{OTHER_BUCKET}/*", outside)
    refused(f"s3://{INPUT_BUCKET}/secret.txt", outside)  # the allowed bucket, outside its prefix
    refused(f"s3://{INPUT_BUCKET}/{INPUT_PREFIX}x/a.txt", outside)
    ok(f"s3://{INPUT_BUCKET}/{INPUT_PREFIX}/page-1.txt", f"s3://{INPUT_BUCKET}/{INPUT_PREFIX}/page-1.txt")
    refused(f"s3://{INPUT_BUCKET}/{INPUT_PREFIX}/../secret.txt", "'..' segment")
    refused(f"s3://{bucket}/{prefix}/../../etc/passwd", "'..' segment")
    # URL-encoding decodes nowhere: an S3 key is taken as it is written, and anything else is a local path.
    refused(f"s3://{bucket}/%2e%2e/%2e%2e/etc/passwd", "no such object")
    refused("%2Fetc%2Fpasswd", local)
    refused(f"s3:%2F%2F{OTHER_BUCKET}/secret.txt", "s3")
    refused(f"s3://{OTHER_BUCKET}%2Fsecret.txt", "bucket")
    refused(f"s3://{bucket}/inputs/nul\x00/etc/passwd".encode(), "NUL byte")
    refused(f"s3://{bucket}/inputs/caf".encode() + b"\xe9.txt", "not UTF-8")
    refused(f"s3://{bucket}/inputs/bell\x07.txt".encode(), "control character")
    refused(f"s3://{bucket}/{'k' * 2000}", "longer than 1,024 bytes")
    refused(f"s3://{bucket}/{'k' * 10_000}", "longer than 8,192 bytes")
    refused(b"/" + b"a" * FIFTY_MB, "longer than 8,192 bytes")
    # Reading goes on after the 50 MB line.
    ok(f"s3://{bucket}/inputs/doc-*.txt", *(f"s3://{bucket}/inputs/doc-{n}.txt" for n in (1, 2, 3)))
    ok(f"s3://{INPUT_BUCKET}/{INPUT_PREFIX}/batch-*.txt", *(f"s3://{INPUT_BUCKET}/{INPUT_PREFIX}/batch-{n}.txt" for n in (1, 2)))
    return b"\n".join(lines) + b"\n", good, bad


def wait_for_executions(sfn, arn: str, count: int, timeout: float, backend: S3Backend | None = None) -> list[dict]:
    """The executions once ``count`` have ended; with ``backend``, fail at once if populate refused the whole manifest."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executions = sfn.list_executions(stateMachineArn=arn)["executions"]
        if len(executions) >= count and all(e["status"] != "RUNNING" for e in executions):
            return [sfn.describe_execution(executionArn=e["executionArn"]) for e in executions]
        if backend is not None and backend.exists(RECORD_KEY):
            whole = [b for b in json.loads(backend.read(RECORD_KEY).body)["bad_lines"] if b["line"] == 0]
            if whole:
                pytest.fail(f"populate refused the whole manifest: {whole[0]['reason'][:300]}")
        time.sleep(0.5)
    pytest.fail(f"{count} executions did not finish within {timeout}s")


def everything(s3, bucket: str, prefix: str = "") -> dict[str, bytes]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {
        item["Key"]: s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read() for page in pages for item in page.get("Contents", [])
    }


def test_a_hostile_manifest_and_a_hand_made_index_read_nothing_but_the_allowed_buckets(tmp_path):
    with LocalCloud(log_dir=tmp_path / "cloud") as cloud:
        # The workspace bucket named too: with inputBuckets set, the functions read inputs there and nowhere else.
        stack = cloud.deploy(
            {"defaultWorkers": 2, "groupSize": 2, "processor": "text", "inputBuckets": f"{INPUT_BUCKET}/{INPUT_PREFIX},{DEFAULT_BUCKET}"}
        )
        s3, sfn = cloud.client("s3"), cloud.client("stepfunctions")
        bucket, prefix = stack.workspace.removeprefix("s3://").split("/", 1)
        for name in (INPUT_BUCKET, OTHER_BUCKET):
            s3.create_bucket(Bucket=name)
        s3.put_object(Bucket=OTHER_BUCKET, Key="secret.txt", Body=SECRET)
        s3.put_object(Bucket=INPUT_BUCKET, Key="secret.txt", Body=SECRET)
        body, good, bad = hostile_manifest(bucket, prefix)
        for path, text in good.items():
            target, key = path.removeprefix("s3://").split("/", 1)
            s3.put_object(Bucket=target, Key=key, Body=text.encode())

        manifest_key = stack.outputs["ManifestPrefix"].split("/", 3)[3] + MANIFEST_NAME
        s3.put_object(Bucket=bucket, Key=manifest_key, Body=body)
        backend = S3Backend(s3_client=s3, bucket=bucket, prefix=prefix)
        [first] = wait_for_executions(sfn, stack.state_machine_arn, 1, timeout=120, backend=backend)

        assert first["status"] == "SUCCEEDED", first.get("cause")
        record = json.loads(backend.read(RECORD_KEY).body)
        reasons = {b["line"]: b["reason"] for b in record["bad_lines"]}
        assert record["bad_line_count"] == len(bad) and sorted(reasons) == sorted(bad), reasons
        for number, phrase in bad.items():
            assert phrase in reasons[number], (number, reasons[number])
        assert max(len(r) for r in reasons.values()) < 1000  # a long line is not copied into its reason
        groups = list(WorkIndex(backend).iter_groups())
        assert sorted(p for g in groups for p in g.paths) == sorted(good)
        output = json.loads(first["output"])
        assert (output["done"], output["failed"], output["remaining"]) == (len(groups), 0, 0)
        records = [json.loads(line) for g in groups for line in backend.read(layout.result_key(g.hash)).body.decode().splitlines()]
        assert {r["source"]: r["text"] for r in records} == good

        # An index written by hand, as olmocr writes its own: rows the policy refuses, and one good row.
        hostile_rows = ["/etc/passwd", "/etc/hostname", "/proc/self/environ", "../../etc/passwd", "file:///etc/passwd",
                        f"s3://{OTHER_BUCKET}/secret.txt", f"s3://{INPUT_BUCKET}/secret.txt",
                        f"s3://{bucket}/{prefix}/../inputs/doc-1.txt"]  # fmt: skip
        hand_made = [Group(layout.group_hash([path]), (path,)) for path in hostile_rows]
        still_good = f"s3://{bucket}/inputs/doc-2.txt"
        hand_made.append(Group(layout.group_hash([still_good, hostile_rows[0]]), (still_good, hostile_rows[0])))
        backend.write(layout.LEGACY_INDEX_KEY, encode_groups(hand_made))
        sfn.start_execution(stateMachineArn=stack.state_machine_arn, name="hand-made-index", input=json.dumps({"workers": 1}))
        executions = wait_for_executions(sfn, stack.state_machine_arn, 2, timeout=120)

        [second] = [e for e in executions if e["name"] == "hand-made-index"]
        assert second["status"] == "SUCCEEDED", second.get("cause")
        assert json.loads(second["output"])["failed"] == 0
        for group in hand_made:
            assert backend.exists(layout.done_key(group.hash)), group.paths
            [*rows] = [json.loads(line) for line in backend.read(layout.result_key(group.hash)).body.decode().splitlines()]
            for row in rows:
                if row["source"] == still_good:
                    assert row["text"] == good[still_good]
                else:
                    assert row["text"] is None and "input refused" in row["error"], row
        refused_inputs = [
            entry for key in backend.list_keys(layout.INPUT_ERRORS_PREFIX) for entry in json.loads(backend.read(key).body)["inputs"]
        ]
        assert sorted(e["path"] for e in refused_inputs) == sorted([*hostile_rows, hostile_rows[0]])
        assert all("input refused" in e["error"] for e in refused_inputs)

        # Nothing of the host's disk or of the other bucket anywhere in the workspace bucket.
        stored = everything(s3, bucket)
        leaks = [(key, piece[:40]) for key, data in stored.items() if key != manifest_key for piece in host_secrets() if piece in data]
        assert leaks == []
        print(
            f"\nhostile manifest: {len(bad)} bad lines recorded, {len(good)} good paths done; hand-made index: {len(hostile_rows) + 1} refused reads"
        )
