"""``s3wq work -j N`` through the command line on the S3 endpoint: N workers, each group done once, Ctrl-C hands every group back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

from support import run_cli

from s3wq import WorkIndex
from s3wq.model import LockState
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

GROUPS = 9
JOBS = 3


def populated(s3_client, bucket: str, s3_backend, groups: int) -> list[str]:
    paths = []
    for n in range(groups):
        s3_client.put_object(Bucket=bucket, Key=f"inputs/doc-{n}.txt", Body=f"doc {n}\n".encode())
        paths.append(f"s3://{bucket}/inputs/doc-{n}.txt")
    WorkIndex(s3_backend).populate(paths, group_size=1)
    return [g.hash for g in WorkIndex(s3_backend).iter_groups()]


def runs_recorded(record_dir) -> list[tuple[str, str]]:
    """(group hash, worker id) of each run the processors recorded."""
    return [tuple(name.split(".")[:2]) for name in os.listdir(record_dir)]  # type: ignore[misc]


def test_work_j3_runs_every_group_once_on_three_workers_and_sums_their_reports(
    helper_env, s3_client, bucket, s3_workspace, s3_backend, record_dir
):
    hashes = populated(s3_client, bucket, s3_backend, GROUPS)

    result = run_cli("work", s3_workspace, "-j", str(JOBS), "--processor", "jobs_processors:meets", "--json", timeout=300)

    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["workers"], doc["processed"], doc["failed"], doc["pages"]) == (JOBS, GROUPS, 0, 2 * GROUPS)
    assert len(set(doc["worker_ids"])) == JOBS and doc["exit_codes"] == [0] * JOBS
    runs = runs_recorded(record_dir)
    assert Counter(h for h, _ in runs) == Counter(hashes)  # each group run once, by one worker
    assert {w for _, w in runs} == set(doc["worker_ids"])  # every worker ran one at least
    for hash_ in hashes:
        flag = json.loads(s3_backend.read(layout.done_key(hash_)).body)
        [line] = s3_backend.read(layout.result_key(hash_)).body.decode().splitlines()
        assert json.loads(line)["worker_id"] == flag["worker_id"] == dict(runs)[hash_]
        assert flag["pages"] == 2
    status = json.loads(run_cli("status", s3_workspace, "--json").stdout)
    assert (status["done"], status["pages"]["pages"], status["pages"]["per_group"]) == (GROUPS, 2 * GROUPS, 2.0)


def test_ctrl_c_to_work_j3_hands_every_workers_group_back_and_exits_130(
    helper_env, s3_client, bucket, s3_workspace, s3_backend, record_dir
):
    populated(s3_client, bucket, s3_backend, 2 * JOBS)
    parent = subprocess.Popen(
        [sys.executable, "-m", "s3wq", "work", s3_workspace, "-j", str(JOBS), "--processor", "jobs_processors:holds"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 120
        while len({w for _, w in runs_recorded(record_dir)}) < JOBS:
            assert parent.poll() is None and time.monotonic() < deadline, parent.stderr.read() if parent.poll() is not None else "slow"
            time.sleep(0.1)
        parent.send_signal(signal.SIGINT)  # to the parent alone, as `kill -INT` does
        out, err = parent.communicate(timeout=90)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()

    assert parent.returncode == 130, err
    assert "stopped by SIGINT; every worker handed back the group in hand" in err
    assert out.startswith(f"{JOBS} workers: processed 0 "), out
    status = json.loads(run_cli("status", s3_workspace, "--json").stdout)
    assert (status["done"], status["failed"], status["locked"]) == (0, 0, 0)
    locks = [LockBody.decode(s3_backend.read(key).body) for key in s3_backend.list_keys("worker_locks/")]
    # Handed back, each lock released with its attempt not counted: the next worker takes it at once, as if never run.
    assert locks and all(lock is not None and lock.state == LockState.RELEASED and not lock.counted for lock in locks), locks
    assert len({w for _, w in runs_recorded(record_dir)}) == JOBS
