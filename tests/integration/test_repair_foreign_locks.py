"""``requeue-failed`` and ``reset`` judge a lock s3wq cannot read (olmocr's) by ``--foreign-lock-timeout``, as ``work`` does.

An olmocr worker's lock is an empty object, honoured for the foreign lock
timeout (1,800 s by default, olmocr's own). An operator who runs workers
with a shorter one must be able to repair with the same rule: a lock older
than the timeout is stale, and its group is requeued or reset; a younger one
is a live worker's, and is left alone.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from support import run_cli

from s3wq import WorkIndex
from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.model import LockState, Outcome
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

# Younger than the default foreign lock timeout, older than the one given.
LOCK_AGE = 600
TIMEOUT = "300"


def olmocr_locked_group(backend, workspace: str, flag_key) -> str:
    """One group, flagged (``flag_key(hash)``: failed or done), under an empty olmocr lock LOCK_AGE seconds old; its hash."""
    assert LOCK_AGE < FOREIGN_LOCK_TIMEOUT_SECONDS
    WorkIndex(backend).populate(["s3://inputs/a.pdf"], group_size=1)
    [group] = WorkIndex(backend).iter_groups()
    backend.write(flag_key(group.hash), json.dumps({"paths": list(group.paths), "attempts": 3, "error": "boom"}).encode())
    backend.write(layout.lock_key(group.hash), b"")
    then = time.time() - LOCK_AGE
    os.utime(os.path.join(workspace, layout.lock_key(group.hash)), (then, then))
    return group.hash


def repair(*args: str) -> dict:
    result = run_cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def assert_requeued(backend, hash_: str) -> None:
    lock = LockBody.decode(backend.read(layout.lock_key(hash_)).body)
    assert (lock.state, lock.outcome, lock.attempt, lock.lease_seconds) == (LockState.RELEASED, Outcome.REQUEUED, 1, float(TIMEOUT)), lock
    assert not backend.exists(layout.failed_key(hash_)) and not backend.exists(layout.done_key(hash_))


def test_requeue_failed_takes_an_olmocr_lock_older_than_the_foreign_lock_timeout_it_is_given(local_workspace, local_backend):
    hash_ = olmocr_locked_group(local_backend, local_workspace, layout.failed_key)

    left = repair("requeue-failed", local_workspace)
    assert (left["requeued"], left["skipped_live"]) == ([], [hash_])
    assert local_backend.read(layout.lock_key(hash_)).body == b"" and local_backend.exists(layout.failed_key(hash_))

    taken = repair("requeue-failed", local_workspace, "--foreign-lock-timeout", TIMEOUT)
    assert (taken["requeued"], taken["skipped_live"]) == ([hash_], [])
    assert_requeued(local_backend, hash_)


def test_reset_takes_an_olmocr_lock_older_than_the_foreign_lock_timeout_it_is_given(local_workspace, local_backend):
    hash_ = olmocr_locked_group(local_backend, local_workspace, layout.done_key)

    left = repair("reset", local_workspace, "--all", "--yes")
    assert (left["reset"], left["skipped_live"]) == ([], [hash_])
    assert local_backend.exists(layout.done_key(hash_))

    taken = repair("reset", local_workspace, "--hash", hash_, "--yes", "--foreign-lock-timeout", TIMEOUT)
    assert (taken["reset"], taken["skipped_live"]) == ([hash_], [])
    assert_requeued(local_backend, hash_)


@pytest.mark.parametrize("command", [("requeue-failed",), ("reset", "--all", "--yes")])
@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "soon"])
def test_a_bad_foreign_lock_timeout_is_a_one_line_error_and_changes_nothing(local_workspace, local_backend, command, value):
    hash_ = olmocr_locked_group(local_backend, local_workspace, layout.failed_key)
    before = {key: local_backend.read(key) for key in local_backend.list_keys("")}

    refused = run_cli(command[0], local_workspace, *command[1:], "--foreign-lock-timeout", value)

    assert refused.returncode == 2, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "argument --foreign-lock-timeout: must be" in refused.stderr, refused.stderr
    after = {key: local_backend.read(key) for key in local_backend.list_keys("")}
    assert {k: (v.body, v.etag) for k, v in after.items()} == {k: (v.body, v.etag) for k, v in before.items()}
    assert local_backend.exists(layout.failed_key(hash_))


def test_the_three_commands_take_one_foreign_lock_timeout_and_help_shows_its_default():
    option = (
        f"--foreign-lock-timeout SECONDS how long a lock s3wq cannot read (olmocr's) is honoured "
        f"(default {FOREIGN_LOCK_TIMEOUT_SECONDS:.0f}, olmocr's own)"
    )
    for command in ("work", "requeue-failed", "reset"):
        helped = run_cli(command, "--help")
        assert helped.returncode == 0, helped.stderr
        assert option in " ".join(helped.stdout.split()), helped.stdout
