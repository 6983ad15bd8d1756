"""``s3wq work --group-timeout``: a hung group is stopped at its limit, and the worker gets on with the rest.

Real worker processes, on a local workspace and on S3 over HTTP, with a
processor that hangs on one input (sleeping in a loop; one variant also
ignores SIGTERM). Each run stopped at the group timeout counts as an
attempt, so the hung group ends failed, kind ``timeout``, after its
attempts, not pending for ever; the other groups are done. The assertions
are on what the workspace holds and what the processor recorded, never on
how long a run took.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from support import run_cli

from s3wq import WorkIndex, open_backend
from s3wq.model import LockState, Outcome
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

TIME_LIMIT = 900  # the default: a hung group would hold the worker this long without a group timeout
INPUTS = {f"inputs/page-{n}.txt": f"the text of page {n}\n".encode() for n in range(4)} | {"inputs/stuck.txt": b"HANG forever\n"}


def records(record_dir: Path) -> Counter:
    return Counter(path.name.split(".")[0] for path in record_dir.iterdir())


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    """(workspace, input sources) on a local directory, or in a bucket of the local S3 server."""
    if request.param == "local":
        for key, body in INPUTS.items():
            (tmp_path / key).parent.mkdir(exist_ok=True)
            (tmp_path / key).write_bytes(body)
        return str(tmp_path / "ws"), [str(tmp_path / "inputs")]
    s3, bucket = request.getfixturevalue("s3_client"), request.getfixturevalue("bucket")
    for key, body in INPUTS.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    return f"s3://{bucket}/ws", [f"s3://{bucket}/inputs/*.txt"]


@pytest.mark.parametrize(
    "processor, max_attempts",
    [("hang_processors:hangs", 2), ("hang_processors:hangs_ignoring_sigterm", 3)],
    ids=["hangs", "ignores-sigterm"],
)
def test_a_hung_group_times_out_on_each_attempt_and_fails_while_the_others_are_done(store, helper_env, record_dir, processor, max_attempts):
    workspace, sources = store
    assert run_cli("populate", workspace, *sources, "--group-size", "1").returncode == 0
    backend = open_backend(workspace)
    groups = {g.paths[0].rsplit("/", 1)[-1]: g.hash for g in WorkIndex(backend).iter_groups()}
    stuck = groups["stuck.txt"]

    began = time.monotonic()
    work = run_cli(
        "work",
        workspace,
        "--processor",
        processor,
        "--group-timeout",
        "1",
        "--max-attempts",
        str(max_attempts),
        "--time-limit",
        str(TIME_LIMIT),
        "--worker-id",
        "gt-worker",
        "--json",
    )
    elapsed = time.monotonic() - began

    assert work.returncode == 1, work.stderr  # a run that failed a group is not a success
    report = json.loads(work.stdout)
    assert (report["processed"], report["failed"], report["timed_out"], report["stopped_reason"]) == (4, 1, max_attempts, "queue_empty")
    # Every other group done, each run once; the hung one run once per attempt, by this same worker.
    assert all(backend.exists(layout.done_key(h)) for name, h in groups.items() if name != "stuck.txt")
    assert records(record_dir) == Counter({h: (max_attempts if h == stuck else 1) for h in groups.values()})
    flag = json.loads(backend.read(layout.failed_key(stuck)).body)
    assert (flag["kind"], flag["attempts"], flag["worker_id"]) == ("timeout", max_attempts, "gt-worker")
    assert flag["error"].startswith("ran past the group timeout of 1 s: stopped after ")
    lock = LockBody.decode(backend.read(layout.lock_key(stuck)).body)
    assert (lock.state, lock.outcome, lock.attempt, lock.counted) == (LockState.FAILED, Outcome.TIMEOUT, max_attempts, True)
    status = json.loads(run_cli("status", workspace, "--json").stdout)
    assert (status["done"], status["failed"], status["pending"], status["locked"]) == (4, 1, 0, 0)
    # The hung group held the worker for its group timeout, not for its time limit.
    assert elapsed < TIME_LIMIT / 4


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "value, problem",
    [
        ("0", "argument --group-timeout: must be positive, got 0"),
        ("-1", "argument --group-timeout: must be positive, got -1"),
        ("nan", "argument --group-timeout: must be a finite number"),
        ("inf", "argument --group-timeout: must be a finite number"),
        ("soon", "argument --group-timeout: must be a number"),
        ("0.1", "group timeout must be at least 0.5 s, got 0.1"),
        ("900", "group timeout of 900 s is longer than any run can last: at most 890 s"),
    ],
)
def test_a_bad_group_timeout_is_one_line_exit_2_and_nothing_changes(tmp_path, helper_env, value, problem):
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "a.txt").write_text("a\n")
    workspace = tmp_path / "ws"
    assert run_cli("populate", str(workspace), str(tmp_path / "inputs")).returncode == 0
    before = snapshot(workspace)

    work = run_cli("work", str(workspace), "--processor", "hang_processors:hangs", "--group-timeout", value)

    assert work.returncode == 2, work.stderr
    [line] = work.stderr.strip().splitlines()
    assert problem in line
    assert snapshot(workspace) == before
