"""Operating a run from the command line, against S3 over HTTP: watch it, list its failures, inspect a group, requeue.

Every command runs as a child process, as an operator runs it. The finished
run that most tests read is made the same way: ``s3wq populate``, then
``s3wq work`` with a processor that fails on inputs marked broken.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import pytest
from support import STATUS_KEYS, run_cli

from s3wq import WorkIndex
from s3wq.model import Group
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import ClaimProtocol
from s3wq.store import S3Backend, layout

from .conftest import HELPERS_DIR

# What a poll of status --watch --json adds to the counts: the manifests the deployed populate rejected lines of.
WATCH_KEYS = STATUS_KEYS | {"pages", "manifests_with_bad_lines", "manifest_errors"}
FAILING_PROCESSOR = "operator_processors:fails_on_broken"
BROKEN = b"BROKEN: the scanner jammed"
MAX_ATTEMPTS = 2
# The counts a watch ends on: 5 groups of 2 paths, 3 done and 2 failed (the broken ones, out of attempts).
ENDED_COUNTS = {
    "groups": 5,
    "paths": 10,
    "done": 3,
    "failed": 2,
    "locked": 0,
    "pending": 0,
    "remaining": 0,
    "finished": 5,
    "released": 0,
    "unavailable": 0,
    "wait_seconds": 0,
}
ANSI_ESCAPE = "\x1b"


def helpers_on_pythonpath(mp: pytest.MonkeyPatch) -> None:
    pythonpath = os.environ.get("PYTHONPATH")
    mp.setenv("PYTHONPATH", str(HELPERS_DIR) + (os.pathsep + pythonpath if pythonpath else ""))


def put_inputs(s3, bucket: str, inputs: dict[str, bytes]) -> list[str]:
    for key, body in inputs.items():
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    return [f"s3://{bucket}/{key}" for key in inputs]


def counts_line(doc: dict) -> str:
    return "  ".join(f"{k}={doc[k]}" for k in ("groups", "paths", "done", "failed", "locked", "pending", "remaining"))


@dataclass
class FinishedRun:
    workspace: str
    backend: S3Backend
    groups: dict[str, Group]
    failed: set[str]
    broken_path: dict[str, str]  # failed group -> its broken input


@pytest.fixture(scope="module")
def finished_run(s3_server) -> FinishedRun:
    """Ten inputs in five groups of two, worked until the queue is empty: three groups done, two failed."""
    s3 = s3_server.client()
    bucket = f"test-ops-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    broken = {"inputs/scan-03.txt", "inputs/scan-08.txt"}
    names = [f"inputs/scan-{n:02d}.txt" for n in range(10)]
    inputs = {name: BROKEN if name in broken else f"the text of {name}\n".encode() for name in names}
    put_inputs(s3, bucket, inputs)
    workspace = f"s3://{bucket}/run"
    with pytest.MonkeyPatch.context() as mp:
        helpers_on_pythonpath(mp)
        populated = run_cli("populate", workspace, f"s3://{bucket}/inputs/*.txt", "--group-size", "2")
        assert populated.returncode == 0, populated.stderr
        worked = run_cli(
            "work", workspace, "--processor", FAILING_PROCESSOR, "--max-attempts", str(MAX_ATTEMPTS), "--worker-id", "ops-worker", "--json"
        )
        assert worked.returncode == 1, worked.stderr  # it failed groups
        assert worked.stderr.splitlines()[-1] == f"s3wq: 2 groups failed here; see s3wq failures {workspace}"
    backend = S3Backend(s3_client=s3, bucket=bucket, prefix="run")
    groups = {g.hash: g for g in WorkIndex(backend).iter_groups()}
    broken_path = {h: p for h, g in groups.items() for p in g.paths if p.removeprefix(f"s3://{bucket}/") in broken}
    run = FinishedRun(workspace, backend, groups, set(broken_path), broken_path)
    assert (len(run.groups), len(run.failed)) == (5, 2), "the two broken inputs must land in different groups"
    assert json.loads(worked.stdout)["failed"] == 2
    return run


def fail_group(backend, group: Group, error: str) -> None:
    """Record a group as failed the way a worker does on its last attempt."""
    protocol = ClaimProtocol(backend, worker_id="ops-test", lease_seconds=900)
    claim = protocol.claim(group.hash)
    assert protocol.finalize_failed(claim, group, error)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("s3wq: error: "), result.stderr
    return result.stderr


# --- failures -------------------------------------------------------------------------------------


def test_failures_json_lists_each_failed_group_with_its_paths_attempts_and_error(finished_run):
    result = run_cli("failures", finished_run.workspace, "--json")

    assert result.returncode == 0, result.stderr
    failures = {f["hash"]: f for f in json.loads(result.stdout)["failures"]}
    assert set(failures) == finished_run.failed
    for hash_, failure in failures.items():
        assert failure["paths"] == list(finished_run.groups[hash_].paths)
        assert (failure["attempts"], failure["kind"]) == (MAX_ATTEMPTS, "error")
        assert failure["error"] == f"operator_processors.UnreadableInput: cannot read {finished_run.broken_path[hash_]}"
        assert failure["worker_id"] == "ops-worker"


def test_failures_human_output_names_each_failed_group_its_paths_and_error(finished_run):
    result = run_cli("failures", finished_run.workspace)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "2 failed groups"
    for hash_ in finished_run.failed:
        [headline] = [line for line in lines if line.startswith(hash_)]
        assert f"attempts={MAX_ATTEMPTS}  kind=error" in headline  # a processor error, not a run out of time
        assert f"cannot read {finished_run.broken_path[hash_]}" in headline
        for path in finished_run.groups[hash_].paths:
            assert f"    {path}" in lines
    done_hashes = set(finished_run.groups) - finished_run.failed
    assert not any(h in result.stdout for h in done_hashes)


def test_failures_of_a_workspace_without_failures_is_empty(s3_workspace, s3_backend):
    WorkIndex(s3_backend).populate(["s3://in/a.pdf", "s3://in/b.pdf"], group_size=1)

    as_json = run_cli("failures", s3_workspace, "--json")
    human = run_cli("failures", s3_workspace)

    assert (as_json.returncode, human.returncode) == (0, 0), as_json.stderr + human.stderr
    assert json.loads(as_json.stdout) == {"failures": []}
    assert human.stdout == "0 failed groups\n"


# --- requeue-failed -------------------------------------------------------------------------------


@pytest.fixture
def two_failed_groups(s3_client, bucket, s3_backend) -> list[Group]:
    """Three groups of one input each; the first two failed."""
    paths = put_inputs(s3_client, bucket, {f"inputs/page-{n}.txt": f"page {n}\n".encode() for n in range(3)})
    WorkIndex(s3_backend).populate(paths, group_size=1)
    groups = sorted(WorkIndex(s3_backend).iter_groups(), key=lambda g: g.paths)
    for group in groups[:2]:
        fail_group(s3_backend, group, f"RuntimeError: cannot read {group.paths[0]}")
    return groups


def test_requeue_failed_with_a_hash_requeues_only_that_group(s3_workspace, s3_backend, two_failed_groups):
    requeued, still_failed, untouched = two_failed_groups

    result = run_cli("requeue-failed", s3_workspace, "--hash", requeued.hash, "--json")

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"requeued": [requeued.hash], "skipped_live": []}
    assert list(s3_backend.list_keys(layout.FAILED_PREFIX)) == [layout.failed_key(still_failed.hash)]
    # The requeued group's lock is handed back at attempt 1; the other one stays marked failed.
    assert LockBody.decode(s3_backend.read(layout.lock_key(requeued.hash)).body).outcome == "requeued"
    assert LockBody.decode(s3_backend.read(layout.lock_key(still_failed.hash)).body).state == "failed"
    status = json.loads(run_cli("status", s3_workspace, "--json").stdout)
    assert (status["failed"], status["pending"], status["done"]) == (1, 2, 0)

    # The fixed run: a worker now finishes the requeued group (from attempt 1) and the untouched one.
    worked = run_cli("work", s3_workspace, "--processor", "text", "--json")

    assert worked.returncode == 0, worked.stderr
    assert json.loads(worked.stdout)["processed"] == 2
    assert json.loads(s3_backend.read(layout.done_key(requeued.hash)).body)["attempt"] == 1
    assert s3_backend.exists(layout.done_key(untouched.hash))
    assert not s3_backend.exists(layout.done_key(still_failed.hash))


def test_requeue_failed_naming_a_group_that_did_not_fail_changes_nothing(s3_workspace, s3_backend, two_failed_groups):
    failed, _, not_failed = two_failed_groups
    before = {key: s3_backend.read(key).etag for key in s3_backend.list_keys("")}

    result = run_cli("requeue-failed", s3_workspace, "--hash", failed.hash, "--hash", not_failed.hash)

    assert result.returncode == 2
    assert f"not a failed group: {not_failed.hash}" in one_line_error(result)
    assert {key: s3_backend.read(key).etag for key in s3_backend.list_keys("")} == before


# --- inspect --------------------------------------------------------------------------------------


def inspect_json(workspace: str, hash_: str) -> dict:
    result = run_cli("inspect", workspace, hash_, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_inspect_a_done_group_shows_its_done_flag_and_result(finished_run):
    hash_ = sorted(set(finished_run.groups) - finished_run.failed)[0]
    paths = list(finished_run.groups[hash_].paths)

    doc = inspect_json(finished_run.workspace, hash_)
    human = run_cli("inspect", finished_run.workspace, hash_)

    assert (doc["hash"], doc["state"], doc["paths"]) == (hash_, "done", paths)
    assert doc["done"]["worker_id"] == "ops-worker" and doc["done"]["attempt"] == 1
    assert doc["failed"] is None
    assert doc["lock"] is None  # released once the done flag was written
    result_uri = f"{finished_run.workspace}/{layout.result_key(hash_)}"
    stored = finished_run.backend.read(layout.result_key(hash_)).body
    assert doc["result"] == {"uri": result_uri, "records": 2, "bytes": len(stored)}
    assert [json.loads(line)["source"] for line in stored.splitlines()] == paths

    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0] == f"group {hash_}: done"
    assert all(f"  {p}" in lines for p in paths)
    assert "lock: none" in lines
    assert f"result: {result_uri} (2 records, {len(stored)} bytes)" in lines


def test_inspect_a_failed_group_shows_the_failed_flag_and_the_lock_marked_failed(finished_run):
    hash_ = sorted(finished_run.failed)[0]
    error = f"operator_processors.UnreadableInput: cannot read {finished_run.broken_path[hash_]}"

    doc = inspect_json(finished_run.workspace, hash_)
    human = run_cli("inspect", finished_run.workspace, hash_)

    assert (doc["state"], doc["paths"]) == ("failed", list(finished_run.groups[hash_].paths))
    assert doc["done"] is None and doc["result"] is None
    assert (doc["failed"]["attempts"], doc["failed"]["error"], doc["failed"]["worker_id"]) == (MAX_ATTEMPTS, error, "ops-worker")
    lock = doc["lock"]
    assert (lock["state"], lock["outcome"], lock["attempt"]) == ("failed", "error", MAX_ATTEMPTS)
    assert (lock["worker_id"], lock["error"]) == ("ops-worker", error)
    assert "stale_in_seconds" not in lock  # a failed lock is never taken over

    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0] == f"group {hash_}: failed"
    [lock_line] = [line for line in lines if line.startswith("lock: ")]
    assert "state=failed" in lock_line and f"attempt={MAX_ATTEMPTS}" in lock_line
    [failed_line] = [line for line in lines if line.startswith("failed: ")]
    assert f"attempts={MAX_ATTEMPTS}" in failed_line and error in failed_line
    assert "result: none" in lines


@pytest.fixture
def claimed_and_pending(s3_backend) -> tuple[Group, object, Group]:
    """Two groups: one held by a live claim (taken in this process, as a worker would), one untouched."""
    WorkIndex(s3_backend).populate(["s3://in/held-1.pdf", "s3://in/held-2.pdf", "s3://in/waiting.pdf"], group_size=2)
    held, pending = sorted(WorkIndex(s3_backend).iter_groups(), key=lambda g: len(g.paths), reverse=True)
    claim = ClaimProtocol(s3_backend, worker_id="live-worker", lease_seconds=900).claim(held.hash)
    assert claim.attempt == 1
    return held, claim, pending


def test_inspect_a_group_locked_by_a_live_claim_shows_owner_attempt_and_age(s3_workspace, claimed_and_pending):
    held, claim, _ = claimed_and_pending

    doc = inspect_json(s3_workspace, held.hash)
    human = run_cli("inspect", s3_workspace, held.hash)

    assert (doc["state"], doc["paths"], doc["done"], doc["failed"], doc["result"]) == ("locked", list(held.paths), None, None, None)
    lock = doc["lock"]
    assert (lock["owner"], lock["worker_id"], lock["attempt"]) == (claim.owner, "live-worker", 1)
    assert (lock["state"], lock["lease_seconds"]) == ("held", 900)
    assert lock["etag"] == claim.etag
    assert 0 <= lock["age_seconds"] < 900  # live: younger than its lease
    # When the store will call it stale unless its holder renews it.
    assert 890 < lock["stale_in_seconds"] <= 900

    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0] == f"group {held.hash}: locked"
    [lock_line] = [line for line in lines if line.startswith("lock: ")]
    assert f"owner={claim.owner}" in lock_line and "attempt=1" in lock_line and "stale_in_seconds=" in lock_line
    # (Its age: see test_inspect_shows_the_age_of_a_lock_taken_a_moment_ago.)


def test_inspect_shows_the_age_of_a_lock_taken_a_moment_ago(local_workspace, local_backend):
    WorkIndex(local_backend).populate(["s3://in/a.pdf"], group_size=1)
    [group] = WorkIndex(local_backend).iter_groups()
    ClaimProtocol(local_backend, worker_id="live-worker", lease_seconds=900).claim(group.hash)
    # A lock stamped a little ahead of this clock (another machine's): its age is 0.0 however slow this test runs.
    ahead = time.time() + 3600
    os.utime(os.path.join(local_workspace, layout.lock_key(group.hash)), (ahead, ahead))
    assert inspect_json(local_workspace, group.hash)["lock"]["age_seconds"] == 0.0

    human = run_cli("inspect", local_workspace, group.hash)

    assert human.returncode == 0, human.stderr
    [lock_line] = [line for line in human.stdout.splitlines() if line.startswith("lock: ")]
    assert "age_seconds=0.0" in lock_line, lock_line


def test_inspect_a_pending_group_shows_no_lock_no_flags_no_result(s3_workspace, claimed_and_pending):
    _, _, pending = claimed_and_pending

    doc = inspect_json(s3_workspace, pending.hash)
    human = run_cli("inspect", s3_workspace, pending.hash)

    assert doc == {
        "hash": pending.hash,
        "state": "pending",
        "paths": list(pending.paths),
        "lock": None,
        "done": None,
        "failed": None,
        "input_errors": None,
        "result": None,
    }
    assert human.returncode == 0, human.stderr
    paths = [f"  {p}" for p in pending.paths]
    assert human.stdout.splitlines() == [f"group {pending.hash}: pending", "paths:", *paths, "lock: none", "result: none"]


@pytest.mark.parametrize(
    ("hash_", "problem"),
    [
        ("nothex", "group hash must be 40 lowercase hex characters, got 'nothex'"),
        ("A" * 40, "group hash must be 40 lowercase hex characters"),
        ("0" * 40, f"no group {'0' * 40} in the index of s3://"),
    ],
    ids=["not-hex", "upper-case", "valid-but-unknown"],
)
def test_inspect_a_bad_or_unknown_hash_exits_2_with_one_line(finished_run, hash_, problem):
    result = run_cli("inspect", finished_run.workspace, hash_)

    assert result.returncode == 2
    assert problem in one_line_error(result)


# --- status --watch -------------------------------------------------------------------------------


def test_status_watch_json_prints_a_line_per_poll_until_a_running_worker_drains_the_queue(
    s3_client, bucket, s3_workspace, s3_backend, helper_env
):
    GROUPS = 24
    paths = put_inputs(s3_client, bucket, {f"inputs/doc-{n:02d}.txt": f"doc {n}\n".encode() for n in range(GROUPS)})
    WorkIndex(s3_backend).populate(paths, group_size=1)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "s3wq", "status", s3_workspace, "--watch", "--json", "--interval", "0.25"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        # The watcher has seen the queue untouched before the worker starts.
        first = watcher.stdout.readline()
        assert first, watcher.stderr.read()
        worked = run_cli("work", s3_workspace, "--processor", "operator_processors:takes_a_moment", "--json")
        rest, errors = watcher.communicate(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()

    assert worked.returncode == 0, worked.stderr
    assert json.loads(worked.stdout)["processed"] == GROUPS
    assert watcher.returncode == 0, errors
    polls = [json.loads(line) for line in (first + rest).splitlines()]
    assert len(polls) >= 2
    assert all(set(p) == WATCH_KEYS and p["groups"] == GROUPS for p in polls)
    no_problems = {"claimed_ahead": 0, "manifests_with_bad_lines": 0, "manifest_errors": []}
    assert polls[0] == {
        "groups": GROUPS,
        "paths": GROUPS,
        "done": 0,
        "failed": 0,
        "locked": 0,
        "pending": GROUPS,
        "remaining": GROUPS,
        "finished": 0,
        "released": 0,
        "unavailable": 0,
        "wait_seconds": 0,
        "pages": no_pages(0),
        **no_problems,
    }
    assert polls[-1] == {
        "groups": GROUPS,
        "paths": GROUPS,
        "done": GROUPS,
        "failed": 0,
        "locked": 0,
        "pending": 0,
        "remaining": 0,
        "finished": GROUPS + 0,
        "released": 0,
        "unavailable": 0,
        "wait_seconds": 0,
        # The processor reports no pages: every done group is one of unknown pages.
        "pages": no_pages(GROUPS),
        **no_problems,
    }
    # Only the last poll found the queue drained: the watch ended there.
    assert all(p["remaining"] > 0 for p in polls[:-1])
    assert [p["done"] for p in polls] == sorted(p["done"] for p in polls)


def no_pages(unknown: int) -> dict:
    """What status says of the pages of ``unknown`` done groups whose processor reported none."""
    return {"pages": 0, "groups": 0, "unknown": unknown, "estimated": False, "per_group": None}


def test_status_watch_exits_1_when_failed_groups_remain(finished_run):
    result = run_cli("status", finished_run.workspace, "--watch", "--json", "--interval", "0.25")

    assert result.returncode == 1, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"groups": 5, "paths": 10, "done": 3, "failed": 2, "locked": 0, "claimed_ahead": 0, "pending": 0, "remaining": 0, "finished": 5, "released": 0,
         "unavailable": 0, "wait_seconds": 0, "pages": no_pages(3), "manifests_with_bad_lines": 0, "manifest_errors": []}
    ]  # fmt: skip


def test_status_watch_without_a_terminal_prints_plain_lines_ending_with_the_counts(finished_run):
    result = run_cli("status", finished_run.workspace, "--watch")

    assert result.returncode == 1, result.stderr
    assert ANSI_ESCAPE not in result.stdout
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"\s*\d+\.\ds  done 3/5  failed 2  locked 0  pending 0  .*", lines[0]), lines
    assert lines[-1] == counts_line(ENDED_COUNTS)


def run_in_terminal(*args: str, timeout: float = 60) -> tuple[int, str]:
    """Run the CLI with a pseudo-terminal as its stdin, stdout and stderr; its exit code and everything it wrote."""
    controller, terminal = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "30"}
    process = subprocess.Popen([sys.executable, "-m", "s3wq", *args], stdin=terminal, stdout=terminal, stderr=terminal, env=env)
    os.close(terminal)
    output = bytearray()
    try:
        while True:
            ready, _, _ = select.select([controller], [], [], timeout)
            assert ready, f"no output for {timeout}s: {output.decode(errors='replace')}"
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the child has closed the terminal
                break
            if not chunk:
                break
            output += chunk
        return process.wait(timeout=timeout), output.decode("utf-8", errors="replace")
    finally:
        os.close(controller)
        if process.poll() is None:
            process.kill()
            process.wait()


def test_status_watch_in_a_terminal_draws_a_progress_bar_then_the_counts(finished_run):
    returncode, output = run_in_terminal("status", finished_run.workspace, "--watch")

    assert returncode == 1, output
    assert ANSI_ESCAPE in output
    assert "━" in output
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)
    assert re.search(r"\b5/5\b", plain) and "failed 2" in plain, plain
    assert plain.rstrip().splitlines()[-1].strip() == counts_line(ENDED_COUNTS)


# --- start: input checked before anything is started -----------------------------------------------


def test_start_without_an_aws_region_is_a_one_line_error(s3_server, tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    empty_config = tmp_path / "aws-config"
    empty_config.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty_config))

    result = run_cli("start", "--workers", "1")

    assert result.returncode == 2, result.stderr
    assert "region" in one_line_error(result)


def test_start_refuses_a_negative_failure_tolerance(s3_server):
    result = run_cli("start", "--stack", "S3wqNotThere", "--workers", "1", "--failure-tolerance", "-1")

    assert result.returncode == 2
    assert "--failure-tolerance" in result.stderr and result.stderr.count("\n") == 1, result.stderr


# --- help -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["start", "failures", "inspect"])
def test_help_shows_an_example(command):
    result = run_cli(command, "--help")

    assert result.returncode == 0, result.stderr
    assert re.search(rf"examples?:\n\s+s3wq {command} ", result.stdout), result.stdout
