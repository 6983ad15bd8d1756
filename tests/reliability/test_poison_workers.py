"""Poison groups among several worker processes: each uses exactly its attempts, wherever they run.

Covered elsewhere and not repeated here: one worker failing a poison group
after max attempts, its failed flag and failed-marked lock, and requeue of
every failed group (tests/integration/test_poison.py, on both backends);
``requeue-failed --hash`` for one of several failed groups, a requeued group
finishing from attempt 1, and ``--hash`` of a group that did not fail
(tests/integration/test_operate_cli.py).
"""

from __future__ import annotations

import json
from collections import Counter

from integration.workers import run_workers
from support import run_cli

from s3wq import WorkIndex
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

from .marking_processor import POISON_ENV, SECONDS_ENV, read_calls

MAX_ATTEMPTS = 2
WORKERS = 4


def test_poison_groups_among_four_workers_fail_after_exactly_their_attempts_and_a_requeue_restarts_the_count(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    WorkIndex(s3_backend).populate([f"s3://inputs/poison/doc-{n:02d}.pdf" for n in range(24)], 2)
    groups = {g.hash: g for g in WorkIndex(s3_backend).iter_groups()}
    poison = sorted(groups)[:3]
    healthy = set(groups) - set(poison)
    env = {**child_env, POISON_ENV: ",".join(poison), SECONDS_ENV: "0.02,0.08"}
    work_args = ["--max-attempts", str(MAX_ATTEMPTS)]

    reports = run_workers(
        s3_workspace, WORKERS, processor="reliability.marking_processor:process", env=env, log_dir=tmp_path / "round1", extra_args=work_args
    )

    calls = read_calls(mark_dir)
    attempts = {h: sorted(c.attempt for c in calls if c.hash == h) for h in poison}
    figures = {
        "groups": len(groups),
        "poison_groups": len(poison),
        "workers": WORKERS,
        "processor_calls": len(calls),
        "failed": sum(r["failed"] for r in reports),
        "processed": sum(r["processed"] for r in reports),
    }
    assert Counter(c.hash for c in calls) == {**dict.fromkeys(healthy, 1), **dict.fromkeys(poison, MAX_ATTEMPTS)}
    assert attempts == {h: list(range(1, MAX_ATTEMPTS + 1)) for h in poison}
    assert (figures["failed"], figures["processed"]) == (len(poison), len(healthy))
    assert list(s3_backend.list_keys(layout.DONE_PREFIX)) == sorted(layout.done_key(h) for h in healthy)
    assert list(s3_backend.list_keys(layout.FAILED_PREFIX)) == sorted(layout.failed_key(h) for h in poison)
    for hash_ in poison:
        flag = json.loads(s3_backend.read(layout.failed_key(hash_)).body)
        assert (flag["hash"], flag["paths"], flag["attempts"]) == (hash_, list(groups[hash_].paths), MAX_ATTEMPTS)
        assert flag["error"] == f"RuntimeError: poisoned input in group {hash_}"
        assert LockBody.decode(s3_backend.read(layout.lock_key(hash_)).body).state == "failed"
    others = {k: s3_backend.read(k).etag for k in s3_backend.list_keys("") if poison[0] not in k}

    requeued = run_cli("requeue-failed", s3_workspace, "--hash", poison[0], "--json")
    assert requeued.returncode == 0, requeued.stderr
    assert json.loads(requeued.stdout) == {"requeued": [poison[0]], "skipped_live": []}
    # Still poisoned: the requeued group gets a full set of attempts again, from 1, and fails again.
    reports = run_workers(
        s3_workspace, 2, processor="reliability.marking_processor:process", env=env, log_dir=tmp_path / "round2", extra_args=work_args
    )

    calls = read_calls(mark_dir)
    figures["calls_after_requeue"] = len(calls) - figures["processor_calls"]
    print(f"\npoison: {json.dumps(figures)}")
    assert sorted(c.attempt for c in calls if c.hash == poison[0]) == sorted(2 * list(range(1, MAX_ATTEMPTS + 1)))
    assert figures["calls_after_requeue"] == MAX_ATTEMPTS
    assert sum(r["failed"] for r in reports) == 1
    assert json.loads(s3_backend.read(layout.failed_key(poison[0])).body)["attempts"] == MAX_ATTEMPTS
    # Nothing else was touched: the other failures and every done flag keep their ETags.
    assert {k: s3_backend.read(k).etag for k in s3_backend.list_keys("") if poison[0] not in k} == others
