"""One worker, two locks: `status` and `inspect` say which one is claimed ahead and not started.

While a processor's run is under way, a worker claims its next group ahead,
so that the claim's round trips hide behind the run. A group whose run
raised is held through its retry backoff, and the claim made ahead waits
behind it the whole time: `locked=2` for one worker. The test runs a real
worker whose processor always raises, with a backoff long enough to be
seen, and polls until the state shows (no sleeps that guess a schedule).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from helpers.operator_processors import BROKEN_MARK
from support import run_cli

# Generous, for a loaded machine: the worker claims its two groups within its first second or so.
OBSERVED_WITHIN_SECONDS = 60
# Long enough to be seen, and shorter than a third of the lease (the most a backoff may be).
RETRY_BACKOFF_SECONDS = 25


def poll(what, until, timeout: float = OBSERVED_WITHIN_SECONDS):
    deadline = time.monotonic() + timeout
    while True:
        seen = what()
        if until(seen):
            return seen
        if time.monotonic() > deadline:
            raise AssertionError(f"not observed within {timeout} s; last seen: {seen}")
        time.sleep(0.2)


def test_a_group_claimed_ahead_behind_a_retry_backoff_is_counted_and_named_as_such(helper_env, s3_client, bucket, s3_workspace):
    for n in range(3):
        s3_client.put_object(Bucket=bucket, Key=f"inputs/doc-{n}.txt", Body=BROKEN_MARK + b" input")
    populated = run_cli("populate", s3_workspace, f"s3://{bucket}/inputs/*.txt", "--group-size", "1")
    assert populated.returncode == 0, populated.stderr
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "s3wq",
            "work",
            s3_workspace,
            "--processor",
            "operator_processors:fails_on_broken",
            "--retry-backoff",
            str(RETRY_BACKOFF_SECONDS),
            "--breaker",
            "0",
            "--time-limit",
            "300",
            "--worker-id",
            "only-worker",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        status = poll(lambda: json.loads(run_cli("status", s3_workspace, "--json").stdout), lambda d: d["claimed_ahead"] == 1)
        assert (status["locked"], status["claimed_ahead"], status["pending"]) == (2, 1, 1)
        shown = poll(lambda: run_cli("status", s3_workspace).stdout, lambda out: "claimed ahead" in out)
        assert "locked=2 (1 claimed ahead, not started)" in shown

        locks = [k["Key"] for k in s3_client.list_objects_v2(Bucket=bucket, Prefix="ws/worker_locks/worker_")["Contents"]]
        hashes = [k.rsplit("worker_", 1)[1].removesuffix(".lock") for k in locks]
        assert len(hashes) == 2
        views = {h: json.loads(run_cli("inspect", s3_workspace, h, "--json").stdout) for h in hashes}
        [ahead] = [h for h, v in views.items() if v["lock"].get("claimed_ahead_of")]
        [front] = [h for h in hashes if h != ahead]
        # Both held by the one worker; the one in front is the group waiting out its backoff.
        assert {v["lock"]["worker_id"] for v in views.values()} == {"only-worker"}
        assert views[ahead]["lock"]["claimed_ahead_of"] == front
        assert "claimed_ahead_of" not in views[front]["lock"]
        text = run_cli("inspect", s3_workspace, ahead).stdout
        assert text.splitlines()[0] == f"group {ahead}: locked (claimed ahead of group {front}, which its worker still holds: not started)"
    finally:
        worker.send_signal(signal.SIGINT)
        out, err = worker.communicate(timeout=OBSERVED_WITHIN_SECONDS)
    assert worker.returncode == 130, (out, err)
    # Handed back on the signal: nothing is locked, nothing is claimed ahead.
    after = json.loads(run_cli("status", s3_workspace, "--json").stdout)
    assert (after["locked"], after["claimed_ahead"]) == (0, 0)
