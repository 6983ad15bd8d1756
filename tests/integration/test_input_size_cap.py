"""The input size cap, through the real command line, on a local workspace and on S3 over HTTP.

An input too large to hold is that input's error, and the group's other
inputs still get their records; it is told from the input's size before
its bytes are read: a file's size on disk, an object's Content-Length.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from support import run_cli

from s3wq import WorkIndex
from s3wq.errors import InputTooLarge
from s3wq.inputs import InputPolicy
from s3wq.model import Group
from s3wq.processors import ProcessorContext
from s3wq.store import layout, open_backend

CAP = 1000
GOOD = {"a.txt": b"the first page\n", "c.txt": b"the last page\n"}
BIG = b"far too much text\n" * 200  # 3,600 bytes, over CAP
# A time well before the run: a read of a file whose access time is this old sets it to now (relatime too).
LONG_AGO = time.time() - 3 * 86400


def work_with_cap(workspace: str) -> dict:
    worked = run_cli("work", workspace, "--time-limit", "60", "--max-input-bytes", str(CAP), "--json")
    assert worked.returncode == 0, worked.stderr
    return json.loads(worked.stdout.splitlines()[-1])


def assert_the_big_input_alone_is_an_error(workspace: str, big_path: str, report: dict) -> None:
    """One group, done; the good inputs have their text, the big one an error naming its size and the cap."""
    assert (report["processed"], report["failed"], report["input_errors"]) == (1, 0, 1), report
    status = json.loads(run_cli("status", workspace, "--json").stdout)
    assert (status["groups"], status["done"], status["failed"]) == (1, 1, 0), status
    backend = open_backend(workspace)
    [group] = WorkIndex(backend).iter_groups()
    rows = {row["source"]: row for row in map(json.loads, backend.read(layout.result_key(group.hash)).body.decode().splitlines())}
    for path in rows.keys() - {big_path}:
        assert rows[path]["text"] == GOOD[os.path.basename(path)].decode(), rows[path]
    big = rows[big_path]
    assert big["text"] is None
    assert big["error"] == (
        f"input too large: {big_path} is {len(BIG):,} bytes, over the input size cap of {CAP:,} bytes "
        "(raise it with s3wq work --max-input-bytes, or -c maxInputBytes on the stack)"
    ), big
    listed = run_cli("failures", workspace, "--inputs", "--json")
    assert "input too large" in listed.stdout and big_path in listed.stdout, listed.stdout


def test_on_a_local_workspace_a_too_large_input_is_its_error_and_is_never_read(tmp_path, local_workspace):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name, body in {**GOOD, "b.txt": BIG}.items():
        (inputs / name).write_bytes(body)
    assert run_cli("populate", local_workspace, str(inputs), "--group-size", "3").returncode == 0
    for name in (*GOOD, "b.txt"):
        os.utime(inputs / name, (LONG_AGO, LONG_AGO))

    report = work_with_cap(local_workspace)

    assert_the_big_input_alone_is_an_error(local_workspace, str(inputs / "b.txt"), report)
    # The good inputs' reads moved their access times (this filesystem records reads); the big one's never moved.
    if all(os.stat(inputs / name).st_atime > LONG_AGO + 60 for name in GOOD):
        assert os.stat(inputs / "b.txt").st_atime == pytest.approx(LONG_AGO, abs=1), "the too-large input was read"


def test_on_s3_a_too_large_input_is_its_error(s3_client, bucket, s3_workspace):
    for name, body in {**GOOD, "b.txt": BIG}.items():
        s3_client.put_object(Bucket=bucket, Key=f"inputs/{name}", Body=body)
    populated = run_cli("populate", s3_workspace, f"s3://{bucket}/inputs/*.txt", "--group-size", "3")
    assert populated.returncode == 0, populated.stderr

    assert_the_big_input_alone_is_an_error(s3_workspace, f"s3://{bucket}/inputs/b.txt", work_with_cap(s3_workspace))


def test_on_s3_the_size_comes_from_the_response_headers_and_not_a_byte_of_the_body_is_read(s3_client, bucket, s3_backend):
    s3_client.put_object(Bucket=bucket, Key="inputs/big.bin", Body=b"x" * 100_000)
    s3_client.put_object(Bucket=bucket, Key="inputs/small.txt", Body=b"small\n")
    bodies = []  # each GetObject's body, as the client hands it over
    s3_client.meta.events.register("after-call.s3.GetObject", lambda parsed, **_: bodies.append(parsed.get("Body")))
    paths = (f"s3://{bucket}/inputs/big.bin", f"s3://{bucket}/inputs/small.txt")
    group = Group(layout.group_hash(list(paths)), paths)
    ctx = ProcessorContext(
        worker_id="w", attempt=1, deadline=time.time() + 60, group=group, backend=s3_backend, input_policy=InputPolicy(max_bytes=CAP)
    )

    with pytest.raises(InputTooLarge, match=f"is 100,000 bytes, over the input size cap of {CAP:,} bytes"):
        ctx.read_input(paths[0])

    assert bodies[0].tell() == 0  # bytes pulled off the connection: none
    # The connection it left unread was closed, not handed to the next request.
    assert ctx.read_input(paths[1]) == b"small\n"


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "64M", "lots"])
def test_a_bad_max_input_bytes_is_a_one_line_error_and_changes_nothing(tmp_path, local_workspace, value):
    (tmp_path / "a.txt").write_bytes(b"a\n")
    assert run_cli("populate", local_workspace, str(tmp_path / "a.txt")).returncode == 0
    before = sorted(open_backend(local_workspace).list_keys(""))

    refused = run_cli("work", local_workspace, "--max-input-bytes", value)

    assert refused.returncode == 2, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "argument --max-input-bytes: must be" in refused.stderr, refused.stderr
    assert sorted(open_backend(local_workspace).list_keys("")) == before
