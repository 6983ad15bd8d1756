"""A group whose processor always raises uses up its attempts, is marked failed, and can be requeued."""

from __future__ import annotations

import dataclasses
import json

from support import run_cli

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.model import Group
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.store import layout

from .workers import recorded_calls

PATHS = [f"s3://inputs/reports/report-{n:02d}.pdf" for n in range(12)]
GROUP_SIZE = 2
MAX_ATTEMPTS = 3


def status(workspace: str) -> dict:
    """The counts of `s3wq status --json` (without what it reports of inputs, manifests and pages: none here)."""
    result = run_cli("status", workspace, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc.pop("input_error_groups"), doc.pop("manifests_with_bad_lines"), doc.pop("manifest_errors")) == (0, 0, [])
    # Neither processor here reports pages, so every done group is counted as one whose pages are unknown.
    assert doc.pop("pages") == {"pages": 0, "groups": 0, "unknown": doc["done"], "estimated": False, "per_group": None}
    return doc


def test_a_poison_group_fails_after_max_attempts_and_requeue_makes_it_pending(
    workspace, backend, helper_env, record_dir, tmp_path, monkeypatch
):
    groups = [PATHS[i : i + GROUP_SIZE] for i in range(0, len(PATHS), GROUP_SIZE)]
    hashes = {layout.group_hash(g) for g in groups}
    poison = layout.group_hash(groups[2])
    monkeypatch.setenv("S3WQ_TEST_POISON_HASH", poison)
    manifest = tmp_path / "manifest.txt"
    manifest.write_text("\n".join(PATHS) + "\n")
    populated = run_cli("populate", workspace, f"@{manifest}", "--group-size", str(GROUP_SIZE), "--no-check", "--json")
    assert populated.returncode == 0, populated.stderr

    worked = run_cli(
        "work", workspace, "--worker-id", "w0", "--json", "--processor", "poison_processor:process", "--max-attempts", str(MAX_ATTEMPTS)
    )

    assert worked.returncode == 1, worked.stderr  # the poisoned group failed
    failed_flag = json.loads(backend.read(f"failed_flags/failed_{poison}.json").body)
    assert failed_flag["hash"] == poison
    assert failed_flag["paths"] == groups[2]
    assert failed_flag["attempts"] == MAX_ATTEMPTS
    assert "RuntimeError" in failed_flag["error"]
    assert f"poisoned input in group {poison}" in failed_flag["error"]
    assert list(backend.list_keys("failed_flags/")) == [f"failed_flags/failed_{poison}.json"]
    assert list(backend.list_keys("done_flags/")) == sorted(f"done_flags/done_{h}.flag" for h in hashes - {poison})
    # The failed group keeps its lock, marked failed, so no peer starts it over.
    assert list(backend.list_keys("worker_locks/")) == [layout.lock_key(poison)]
    assert LockBody.decode(backend.read(layout.lock_key(poison)).body).state == "failed"
    assert recorded_calls(record_dir) == {**dict.fromkeys(hashes - {poison}, 1), poison: MAX_ATTEMPTS}
    assert status(workspace) == {
        "groups": 6,
        "paths": 12,
        "done": 5,
        "failed": 1,
        "locked": 0,
        "claimed_ahead": 0,
        "pending": 0,
        "remaining": 0,
        "finished": 6,
        "released": 0,
        "unavailable": 0,
        "wait_seconds": 0,
    }

    requeued = run_cli("requeue-failed", workspace, "--json")

    assert requeued.returncode == 0, requeued.stderr
    assert json.loads(requeued.stdout) == {"requeued": [poison], "skipped_live": []}
    assert list(backend.list_keys("failed_flags/")) == []
    # The lock is handed back, to be taken at once from attempt 1.
    lock = LockBody.decode(backend.read(layout.lock_key(poison)).body)
    assert (lock.state, lock.outcome, lock.next_attempt) == ("released", "requeued", 1)
    assert list(backend.list_keys("done_flags/")) == sorted(f"done_flags/done_{h}.flag" for h in hashes - {poison})
    assert status(workspace) == {
        "groups": 6,
        "paths": 12,
        "done": 5,
        "failed": 0,
        "locked": 0,
        "claimed_ahead": 0,
        "pending": 1,
        "remaining": 1,
        "finished": 5,
        "released": 1,
        "unavailable": 0,
        "wait_seconds": 0,
    }

    # Once its input is fixed, the requeued group is worked again and completes.
    rerun = run_cli("work", workspace, "--worker-id", "w1", "--json", "--processor", "recording_processor:record")

    assert rerun.returncode == 0, rerun.stderr
    assert list(backend.list_keys("done_flags/")) == sorted(f"done_flags/done_{h}.flag" for h in hashes)
    assert recorded_calls(record_dir)[poison] == MAX_ATTEMPTS + 1
    assert status(workspace) == {
        "groups": 6,
        "paths": 12,
        "done": 6,
        "failed": 0,
        "locked": 0,
        "claimed_ahead": 0,
        "pending": 0,
        "remaining": 0,
        "finished": 6,
        "released": 0,
        "unavailable": 0,
        "wait_seconds": 0,
    }


class AfterFirstLock:
    """A store through which ``then(hash)`` runs right after this worker's first lock is created: peers acting meanwhile."""

    def __init__(self, backend, then):
        self._backend, self._then, self._fired = backend, then, False

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def create(self, key, body):
        etag = self._backend.create(key, body)
        if not self._fired and key.startswith(layout.LOCKS_PREFIX):
            self._fired = True
            self._then(layout.hash_from_key(key, layout.LOCKS_PREFIX, layout.LOCK_SUFFIX))
        return etag


def test_a_worker_leaves_alone_a_group_a_peer_failed_after_it_loaded_the_index(backend):
    WorkIndex(backend).populate(PATHS, GROUP_SIZE)
    hashes = {g.hash for g in WorkIndex(backend).iter_groups()}
    processed = []

    def peers_fail_everything_else(first: str) -> None:
        # Peers use up every attempt on every other group just after this
        # worker claimed its first one, i.e. after this worker listed the flags.
        peer = ClaimProtocol(backend, worker_id="peer", lease_seconds=60)
        for other in hashes - {first}:
            claim = peer.claim(other)
            assert isinstance(claim, Claim)
            failed_claim = dataclasses.replace(claim, body=dataclasses.replace(claim.body, attempt=MAX_ATTEMPTS))
            assert peer.finalize_failed(failed_claim, Group(other, ()), "RuntimeError: failed at a peer")

    watched = AfterFirstLock(backend, peers_fail_everything_else)
    report = Worker(
        watched, lambda group, ctx: processed.append(group.hash), WorkerSettings(time_limit=60, max_attempts=MAX_ATTEMPTS), worker_id="late"
    ).run()

    assert processed == processed[:1]
    assert report.processed == 1 and report.failed == 0
    assert list(backend.list_keys("done_flags/")) == [layout.done_key(processed[0])]
    assert list(backend.list_keys("failed_flags/")) == sorted(layout.failed_key(h) for h in hashes - {processed[0]})
