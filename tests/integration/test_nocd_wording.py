"""On a store that cannot delete on a condition, status and inspect say what happened.

There a lock is never deleted: a holder that finishes rewrites it as
released, outcome finished (claims.ClaimProtocol.release). The local S3
server answers a conditional DELETE with 501 in buckets named ``nocd-...``,
as LocalStack's S3 does.

- A group that finishes while ``status`` counts (after its done flags were
  listed, before its lock is read) is done, not pending and released.
- A claim given back unrun (made ahead, then the worker was stopped) is
  released with why, not "finished": its group is pending.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from support import run_cli

from s3wq import WorkIndex, open_backend
from s3wq.model import LockState, Outcome
from s3wq.ops.status import queue_status
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.store import layout

from .workers import WORKER_TIMEOUT_SECONDS


class FinishesWhenItsLockIsRead:
    """The workspace, where the holder of ``claim`` finishes its group just before the first read of its lock."""

    def __init__(self, backend, protocol: ClaimProtocol, claim: Claim):
        self._backend, self._protocol, self._claim = backend, protocol, claim
        self.finished = False

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def read(self, key: str):
        if key == layout.lock_key(self._claim.hash) and not self.finished:
            self.finished = True
            assert self._protocol.mark_done(self._claim) and self._protocol.release(self._claim)
        return self._backend.read(key)


def test_a_group_that_finishes_mid_count_is_counted_done(s3_workspace_without_conditional_delete, s3_client):
    backend = open_backend(s3_workspace_without_conditional_delete, s3_client=s3_client)
    paths = ["s3://inputs/nocd/finishing.pdf", "s3://inputs/nocd/waiting.pdf"]
    WorkIndex(backend).populate(paths, 1)
    protocol = ClaimProtocol(backend, worker_id="w", lease_seconds=60)
    claim = protocol.claim(layout.group_hash(paths[:1]))
    assert isinstance(claim, Claim)
    counting = FinishesWhenItsLockIsRead(backend, protocol, claim)

    status = queue_status(counting)

    assert counting.finished, "the count never read the lock"
    lock = LockBody.decode(backend.read(layout.lock_key(claim.hash)).body)
    assert (lock.state, lock.outcome) == (LockState.RELEASED, Outcome.FINISHED)  # rewritten, not deleted: the store answered 501
    assert {k: status[k] for k in ("done", "pending", "released", "locked")} == {"done": 1, "pending": 1, "released": 0, "locked": 0}
    assert status == queue_status(backend)  # as a count after it finished says


def test_a_claim_ahead_given_back_unrun_reads_released_not_finished(
    s3_workspace_without_conditional_delete, s3_client, helper_env, tmp_path
):
    workspace = s3_workspace_without_conditional_delete
    bucket = workspace.removeprefix("s3://").split("/", 1)[0]
    paths = [f"s3://{bucket}/inputs/{name}.txt" for name in ("first", "second")]
    for path in paths:
        s3_client.put_object(Bucket=bucket, Key=path.split("/", 3)[3], Body=b"HANG until stopped")
    backend = open_backend(workspace, s3_client=s3_client)
    WorkIndex(backend).populate(paths, 1)
    err = tmp_path / "worker.err"
    command = [sys.executable, "-m", "s3wq", "work", workspace, "--worker-id", "w", "--processor", "hang_processors:hangs"]
    with open(err, "wb") as stderr:
        worker = subprocess.Popen(command, env=dict(helper_env), stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        ahead = wait_for_claim_ahead(backend, worker)
        worker.send_signal(signal.SIGINT)
        assert worker.wait(timeout=WORKER_TIMEOUT_SECONDS) == 130, err.read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    shown = run_cli("inspect", workspace, ahead, "--json")

    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["state"] == "pending"
    lock = doc["lock"]
    assert (lock["state"], lock["outcome"], lock["attempt"]) == (LockState.RELEASED, Outcome.INTERRUPTED, 1), lock
    assert "never run" in lock["error"]
    human = run_cli("inspect", workspace, ahead)
    assert "outcome=interrupted" in human.stdout and "finished" not in human.stdout
    status = json.loads(run_cli("status", workspace, "--json").stdout)
    assert {k: status[k] for k in ("done", "pending", "released")} == {"done": 0, "pending": 2, "released": 2}


def wait_for_claim_ahead(backend, worker: subprocess.Popen) -> str:
    """The hash of the group the worker claimed ahead while it runs the other one."""
    give_up = time.monotonic() + WORKER_TIMEOUT_SECONDS
    while time.monotonic() < give_up and worker.poll() is None:
        for key in backend.list_keys(layout.LOCKS_PREFIX):
            body = LockBody.decode(backend.read(key).body)
            if body is not None and body.behind is not None:
                return key.removeprefix(layout.LOCKS_PREFIX).removesuffix(layout.LOCK_SUFFIX)
        time.sleep(0.05)
    raise AssertionError(f"no claim ahead (worker exit code {worker.poll()})")
