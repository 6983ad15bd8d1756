"""Workers SIGKILLed mid-group, replaced as a new Map round would: nothing lost, nothing done twice by live workers.

Eight worker processes (``s3wq.Worker`` as ``s3wq work`` runs it, see
:mod:`fleet`) drain 100 groups (x S3WQ_RELIABILITY_SCALE) with a 3 s time
limit and a 3 s lock timeout; each group takes 0.2-0.5 s. A killer SIGKILLs
about three in ten workers a moment into one of their groups and a
replacement starts. A killed worker's lock can only be taken over once it is
stale, by S3's clock, and the takeover counts the lost attempt.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import defaultdict

from s3wq import WorkIndex
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

from .bucket_state import listed
from .fleet import Fleet
from .marking_processor import SECONDS_ENV, read_calls
from .scale import scale

WORKERS = 8
TIME_LIMIT_SECONDS = 3
PROCESS_SECONDS = (0.2, 0.5)
SEED = 20261129
# High enough that no group fails however often the killer happens to hit it.
MAX_ATTEMPTS = 10


def test_workers_killed_mid_group_lose_nothing_and_no_two_live_workers_overlap(
    s3_client, bucket, s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    groups = 100 * scale()
    paths = [f"s3://inputs/crash/page-{n:05d}.pdf" for n in range(groups)]
    WorkIndex(s3_backend).populate(paths, 1)
    hashes = {layout.group_hash([p]) for p in paths}
    fleet = Fleet(
        s3_workspace,
        {"time_limit": TIME_LIMIT_SECONDS, "lease": TIME_LIMIT_SECONDS, "max_attempts": MAX_ATTEMPTS},
        env={**child_env, SECONDS_ENV: ",".join(map(str, PROCESS_SECONDS))},
        log_dir=tmp_path / "logs",
        mark_dir=mark_dir,
        size=WORKERS,
        seed=SEED,
        doom_share=0.3,
        kill_after_seconds=(0.02, 0.15),
    )
    started = time.monotonic()

    run = fleet.run(lambda: len(listed(s3_client, bucket, "ws/done_flags/")) >= groups, deadline_seconds=150 * scale())

    elapsed = time.monotonic() - started
    calls = read_calls(mark_dir)
    killed_at = {m.worker_id: m.killed_ns for m in run.killed}
    mid_group = [m for m in run.killed if next(c for c in calls if c.call == m.killed_call).outcome is None]
    by_group = defaultdict(list)
    for call in calls:
        by_group[call.hash].append(call)
    reports = run.reports()
    leftover_locks = listed(s3_client, bucket, "ws/worker_locks/")
    figures = {
        "groups": groups,
        "workers_started": len(run.members),
        "workers_that_processed": len({c.worker for c in calls}),
        "kills": len(run.killed),
        "kills_mid_group": len(mid_group),
        "reclaims": sum(r["reclaimed"] for r in reports),
        "calls": len(calls),
        "duplicates_after_kills": len(calls) - len(by_group),
        "groups_processed_more_than_once": sum(1 for g in by_group.values() if len(g) > 1),
        "locks_left_by_killed_workers_on_done_groups": len(leftover_locks),
        "seconds": round(elapsed, 1),
        "seed": SEED,
    }
    print(f"\ncrash: {json.dumps(figures)}")

    # Every worker that was not killed ended by itself, cleanly.
    assert {m.worker_id: m.exit_code for m in run.survivors if m.exit_code != 0} == {}
    assert all(m.exit_code == -9 for m in run.killed)
    # At least a fifth of the workers that got to process anything were killed mid-group (a
    # replacement that found every group done or held ends at once and is not counted).
    assert len(mid_group) * 5 >= figures["workers_that_processed"], "fewer than a fifth of the workers were killed mid-group"
    # Every group has exactly one done flag and none failed.
    assert listed(s3_client, bucket, "ws/done_flags/") == sorted(f"ws/{layout.done_key(h)}" for h in hashes)
    assert listed(s3_client, bucket, "ws/failed_flags/") == []
    # A lock is left only where its holder was killed between writing the
    # group's done flag and deleting the lock; the group is done, so nobody
    # needs that lock again (the bucket's lifecycle rule expires it).
    for key in leftover_locks:
        holder = LockBody.decode(s3_backend.read(key.removeprefix("ws/")).body)
        assert holder.worker_id in killed_at, f"{key} left by {holder.worker_id}, which was not killed"
    assert set(by_group) == hashes
    # Attempts add up: every kill in a run cost exactly one attempt -- the killed run's, or, when it was killed while
    # the done flag of the group in front was still on its way, that group's (it runs again; the one claimed behind it
    # is taken for never run). A claim made ahead that never ran cost none.
    assert sum(json.loads(s3_backend.read(layout.done_key(h)).body)["attempt"] - 1 for h in hashes) == len(mid_group)
    for hash_, group_calls in by_group.items():
        # Each call lasts until it returned or its worker was killed; a call
        # that neither returned nor was killed would be a worker gone missing.
        spans = []
        for call in group_calls:
            end = call.end_ns if call.outcome == "end" else killed_at.get(call.worker)
            assert end is not None, f"{call} neither returned nor was killed"
            spans.append((call.start_ns, end, call))
        # No two calls on one group overlap in time, counting a killed call as running until its kill.
        for (_, end, before), (start, _, after) in itertools.pairwise(spans):
            assert start >= end, f"group {hash_} processed by {before.worker} and {after.worker} at overlapping times"
        # Only a killed worker's call is ever followed by another call on the same group.
        assert all(call.worker in killed_at for call in group_calls[:-1]), f"group {hash_} redone after a live worker's call"
        # Each redo was a takeover of the dead holder's lock: attempts never go back, and rise by one at most.
        attempts = [call.attempt for call in group_calls]
        assert attempts[0] == 1 and all(b - a in (0, 1) for a, b in itertools.pairwise(attempts)), f"group {hash_} attempts {attempts}"
        # The done flag names the worker and attempt of the last, completed call: no false done flag.
        last = group_calls[-1]
        assert last.outcome == "end"
        flag = json.loads(s3_backend.read(layout.done_key(hash_)).body)
        assert (flag["worker_id"], flag["attempt"]) == (last.worker, last.attempt)
