"""A run that left work behind is not done: real ``s3wq work`` processes (the processor host) on the local S3 endpoint.

The processor starts a helper process (``sleep 30``) to finish the group and
returns (or raises) without waiting for it. The host kills the helper with
the run, so its work never finished: the run is a failed attempt of kind
``leftover``, retried like an error while attempts allow, and the group
ends failed with that kind, as ``failures`` and ``inspect`` show. Before,
such a run was recorded done.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from s3wq import WorkIndex
from s3wq.model import LockState
from s3wq.protocol.bodies import LockBody, load_object
from s3wq.store import layout

from .leftover_processor import RAISED
from .worker_processes import alive

MAX_ATTEMPTS = 2
# The kind as the docs name it, and as `failures` prints it: what users and their scripts match (Outcome.LEFTOVER).
LEFTOVER = "leftover"


def work(workspace: str, processor: str, env: dict) -> tuple[int, dict]:
    """``s3wq work`` as a user runs it; its exit code and JSON report."""
    command = [
        sys.executable, "-m", "s3wq", "work", workspace, "--worker-id", "w1", "--json", "--time-limit", "60",
        "--max-attempts", str(MAX_ATTEMPTS), "--retry-backoff", "0.1", "--processor", f"reliability.leftover_processor:{processor}",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def cli(*args: str, env: dict) -> str:
    done = subprocess.run([sys.executable, "-m", "s3wq", *args], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("processor", ["returns", "raises"])
def test_a_run_that_leaves_a_child_running_is_a_failed_attempt_and_the_group_fails_as_leftover(
    processor, s3_workspace, s3_backend, child_env, mark_dir
):
    name = "s3://inputs/leftover/group.pdf"
    WorkIndex(s3_backend).populate([name], 1)
    hash_ = layout.group_hash([name])

    code, report = work(s3_workspace, processor, child_env)

    # Never done: the helper was killed before it could finish the group; failed after its attempts, as leftover.
    assert not s3_backend.exists(layout.done_key(hash_))
    flag = load_object(s3_backend.read(layout.failed_key(hash_)).body)
    assert (flag["kind"], flag["attempts"]) == (LEFTOVER, MAX_ATTEMPTS)
    assert "left" in flag["error"] and "running" in flag["error"]
    if processor == "raises":
        # What the run raised is in the error too, with its traceback and the processor's own line.
        assert RAISED in flag["error"] and RAISED in flag["traceback"]
        assert flag["error_frame"]["function"] == "raises"
    # Every attempt ran once, and left its helper, which is gone now.
    runs = sorted(p.name.split(".")[1] for p in mark_dir.glob(f"{hash_}.*.child"))
    assert runs == [str(a) for a in range(1, MAX_ATTEMPTS + 1)]
    assert not [pid for pid in (int(p.read_text()) for p in mark_dir.glob("*.child")) if alive(pid)]
    assert code == 1  # a group failed here
    assert (report["processed"], report["failed"], report["leftovers"], report["retried"]) == (0, 1, MAX_ATTEMPTS, MAX_ATTEMPTS - 1)
    lock = LockBody.decode(s3_backend.read(layout.lock_key(hash_)).body)
    assert (lock.state, lock.outcome, lock.attempt) == (LockState.FAILED, LEFTOVER, MAX_ATTEMPTS)

    failures = cli("failures", s3_workspace, env=child_env)
    assert f"{hash_}  attempts={MAX_ATTEMPTS}  kind={LEFTOVER}  the run left" in failures
    as_json = json.loads(cli("failures", s3_workspace, "--json", env=child_env))
    assert [(f["hash"], f["kind"]) for f in as_json["failures"]] == [(hash_, LEFTOVER)]
    inspected = cli("inspect", s3_workspace, hash_, env=child_env)
    print(f"\n{failures}{inspected}")
    assert f"group {hash_}: failed" in inspected
    assert f"kind={LEFTOVER}" in inspected and f"outcome={LEFTOVER}" in inspected
