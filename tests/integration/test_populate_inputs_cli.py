"""``s3wq populate`` as a user runs it: every bad line of a manifest in one run, local inputs on an S3 workspace, folders with unreadable files.

Each refusal is exit 2 with stdout empty and the workspace unchanged.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import run_cli

from s3wq.index import WorkIndex


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def objects(s3_client, bucket: str) -> dict[str, str]:
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {item["Key"]: item["ETag"] for page in pages for item in page.get("Contents", [])}


@pytest.fixture
def inputs(tmp_path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a.txt", "b.txt"):
        (folder / name).write_text(f"contents of {name}\n")
    return folder


def test_every_bad_line_is_reported_in_one_run_with_its_number_and_nothing_is_indexed(tmp_path, inputs, local_workspace):
    bad = {}
    lines: list[bytes] = [b"# 25 bad lines among good ones"]
    for n in range(25):
        lines.append(b"in/a.txt" if n % 5 == 0 else b"in/b.txt")
        kind = n % 4
        lines.append([b"ftp://host/x.pdf", b"in/caf\xe9.txt", b"in/nul\x00.txt", b"in/missing-%d.txt" % n][kind])
        bad[len(lines)] = ["unsupported scheme", "not UTF-8", "NUL byte", "no such file"][kind]
    manifest = tmp_path / "manifest.txt"
    manifest.write_bytes(b"\n".join(lines) + b"\n")
    before = snapshot(tmp_path)

    result = run_cli("populate", local_workspace, f"@{manifest}", cwd=tmp_path)

    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    summary, *listed = result.stderr.splitlines()
    assert summary == f"s3wq: error: 25 bad lines in {manifest}, nothing indexed:"
    shown = 20  # the report's cap; every bad line is counted
    assert len(listed) == shown + 1 and listed[-1] == f"  ... and {25 - shown} more"
    for line, (number, phrase) in zip(listed, list(bad.items())[:shown]):
        assert line.startswith(f"  {manifest}:{number}: ") and phrase in line, line
    assert snapshot(tmp_path) == before


def test_the_bad_lines_of_several_manifests_are_reported_together(tmp_path, inputs, local_workspace):
    first, second = tmp_path / "one.txt", tmp_path / "two.txt"
    first.write_text("in/a.txt\nftp://x/y\n")
    second.write_text("in/nope.txt\nin/b.txt\n")

    result = run_cli("populate", local_workspace, f"@{first}", f"@{second}", cwd=tmp_path)

    assert result.returncode == 2
    summary, one, two = result.stderr.splitlines()
    assert summary == "s3wq: error: 2 bad lines in 2 manifests, nothing indexed:"
    assert one.startswith(f"  {first}:2: unsupported scheme 'ftp'"), one
    assert two == f"  {second}:1: no such file or directory: '{tmp_path / 'in/nope.txt'}'"
    assert not Path(local_workspace).exists()


def test_missing_objects_are_bad_lines_of_the_same_report(tmp_path, s3_client, bucket, s3_workspace):
    s3_client.put_object(Bucket=bucket, Key="in/there.txt", Body=b"here")
    manifest = tmp_path / "m.txt"
    manifest.write_text(f"s3://{bucket}/in/there.txt\ns3://{bucket}/in/gone-1.txt\nftp://x/y\ns3://{bucket}/in/gone-2.txt\n")
    before = objects(s3_client, bucket)

    result = run_cli("populate", s3_workspace, f"@{manifest}")

    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    summary, *listed = result.stderr.splitlines()
    assert summary == f"s3wq: error: 3 bad lines in {manifest}, nothing indexed (--no-check skips the check that objects exist):"
    assert [line.split(": ", 1)[0] for line in listed] == [f"  {manifest}:{n}" for n in (2, 3, 4)]
    assert "gone-1.txt" in listed[0] and "gone-2.txt" in listed[2]
    assert objects(s3_client, bucket) == before


# --- local inputs and an S3 workspace -------------------------------------------------------------------------


def test_an_s3_workspace_refuses_local_inputs_in_one_line_and_writes_nothing(tmp_path, inputs, s3_client, bucket, s3_workspace):
    s3_client.put_object(Bucket=bucket, Key="in/doc.txt", Body=b"doc")
    before = objects(s3_client, bucket)

    named = run_cli("populate", s3_workspace, f"s3://{bucket}/in/doc.txt", str(inputs), cwd=tmp_path)
    manifest = tmp_path / "m.txt"
    manifest.write_text(f"s3://{bucket}/in/doc.txt\nin/a.txt\n")
    listed = run_cli("populate", s3_workspace, f"@{manifest}", cwd=tmp_path)

    assert (named.returncode, named.stdout) == (2, "")
    assert named.stderr.count("\n") == 1 and named.stderr.startswith(f"s3wq: error: '{inputs}' is not an s3:// URI"), named.stderr
    assert "--allow-local-inputs" in named.stderr and "Lambda refuses" in named.stderr
    assert (listed.returncode, listed.stdout) == (2, "")
    assert listed.stderr.startswith(f"s3wq: error: {manifest}:2: 'in/a.txt' is not an s3:// URI"), listed.stderr
    assert objects(s3_client, bucket) == before


def test_allow_local_inputs_indexes_them_on_an_s3_workspace(tmp_path, inputs, s3_client, bucket, s3_workspace, s3_backend):
    result = run_cli("populate", s3_workspace, str(inputs), "--allow-local-inputs", "--json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added_paths"] == 2
    assert sorted(p for g in WorkIndex(s3_backend).iter_groups() for p in g.paths) == sorted(str(p) for p in inputs.iterdir())


# --- folders and patterns with files that cannot be read ------------------------------------------------------


def test_a_folder_holding_a_dangling_symlink_or_a_fifo_is_refused_naming_them(tmp_path, inputs, local_workspace):
    (inputs / "gone.txt").symlink_to(tmp_path / "nowhere.txt")
    os.mkfifo(inputs / "pipe.txt")  # a reader would block on it forever
    before = snapshot(tmp_path)

    as_folder = run_cli("populate", local_workspace, str(inputs), cwd=tmp_path)
    as_glob = run_cli("populate", local_workspace, "in/*.txt", cwd=tmp_path)

    for result in (as_folder, as_glob):
        assert (result.returncode, result.stdout) == (2, ""), result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
        assert f"'{inputs / 'gone.txt'}' (a dangling symlink)" in result.stderr
        assert f"'{inputs / 'pipe.txt'}' (not a regular file)" in result.stderr
    assert snapshot(tmp_path) == before
