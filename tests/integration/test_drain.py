"""Several ``s3wq work`` processes drain one workspace together.

Each group must end with one done flag, no failed flag and no lock, and the
recording processor's files must show it was processed exactly once. The S3
drain also measures what the queue costs: the workers' own request counts,
per group and by S3 operation.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from support import assert_no_lock_left, run_cli

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.protocol.bodies import LockBody
from s3wq.store import S3Backend, layout

from .workers import recorded_calls, run_workers

PROCESSOR = "recording_processor:record"
DRAIN_STATS_ENV = "S3WQ_DRAIN_STATS"


def populate_one_path_per_group(workspace: str, count: int, tmp_path: Path) -> set[str]:
    """Populate through the CLI from a manifest, as an operator would; return the group hashes."""
    paths = [f"s3://inputs/scans/page-{n:04d}.pdf" for n in range(count)]
    manifest = tmp_path / "manifest.txt"
    manifest.write_text("# one page per group\n" + "\n".join(paths) + "\n")
    result = run_cli(
        "populate", workspace, f"@{manifest}", "--group-size", "1", "--no-check", "--json"
    )  # the inputs are names only: the processor never reads them
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["added_groups"] == count
    return {layout.group_hash([p]) for p in paths}


def assert_drained_exactly_once(workspace: str, backend, hashes: set[str], record_dir: Path) -> None:
    assert {g.hash for g in WorkIndex(backend).iter_groups()} == hashes
    assert list(backend.list_keys(layout.DONE_PREFIX)) == sorted(layout.done_key(h) for h in hashes)
    assert list(backend.list_keys("failed_flags/")) == []
    assert_no_lock_left(backend, workspace)
    calls = recorded_calls(record_dir)
    assert set(calls) == hashes
    twice = {h: n for h, n in calls.items() if n != 1}
    assert not twice, f"groups processed more than once: {twice}"


def requests_per_group(reports: list[dict], groups: int) -> dict:
    total: Counter = Counter()
    for report in reports:
        total.update(report["s3_requests"])
    by_operation = {op: round(n / groups, 3) for op, n in sorted(total.items())}
    return {
        "groups": groups,
        "workers": len(reports),
        "requests_total": sum(total.values()),
        "requests_per_group": round(sum(total.values()) / groups, 3),
        "requests_per_group_by_operation": by_operation,
        "requests_by_operation": dict(sorted(total.items())),
    }


def test_eight_workers_drain_two_hundred_groups_on_s3_exactly_once(s3_workspace, s3_backend, helper_env, record_dir, tmp_path):
    hashes = populate_one_path_per_group(s3_workspace, 200, tmp_path)

    reports = run_workers(s3_workspace, 8, processor=PROCESSOR, env=helper_env, log_dir=tmp_path / "logs")

    assert_drained_exactly_once(s3_workspace, s3_backend, hashes, record_dir)
    assert sum(r["processed"] for r in reports) == 200
    stats = requests_per_group(reports, len(hashes))
    print("\nS3 requests per group, 8 workers draining 200 groups:", json.dumps(stats, indent=2))
    if os.environ.get(DRAIN_STATS_ENV):
        Path(os.environ[DRAIN_STATS_ENV]).write_text(json.dumps(stats, indent=2) + "\n")


def test_four_workers_drain_forty_groups_on_a_local_directory_exactly_once(
    local_workspace, local_backend, helper_env, record_dir, tmp_path
):
    hashes = populate_one_path_per_group(local_workspace, 40, tmp_path)

    reports = run_workers(local_workspace, 4, processor=PROCESSOR, env=helper_env, log_dir=tmp_path / "logs")

    assert_drained_exactly_once(local_workspace, local_backend, hashes, record_dir)
    assert sum(r["processed"] for r in reports) == 40


def test_a_worker_with_an_out_of_date_listing_relists_after_one_finished_group(s3_client, bucket, s3_backend):
    # A versioned bucket keeps every lock ever written, even after its delete.
    s3_client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    groups = WorkIndex(s3_backend).populate([f"s3://inputs/scans/page-{n:04d}.pdf" for n in range(10)], 1)
    assert groups.added_groups == 10
    hashes = {g.hash for g in WorkIndex(s3_backend).iter_groups()}
    processed = []

    class PeersFinishEverythingElse(S3Backend):
        """Stands in for peers that finish every other group just after this worker claims its first."""

        def create(self, key, body):
            etag = super().create(key, body)
            if (
                key.startswith(layout.LOCKS_PREFIX)
                and not key.startswith(layout.PROBE_PREFIX)
                and not processed
                and not hasattr(self, "done")
            ):
                self.done = True
                first = layout.hash_from_key(key, layout.LOCKS_PREFIX, layout.LOCK_SUFFIX)
                for other in hashes - {first}:
                    self.write(layout.done_key(other), b"{}")
            return etag

    backend = PeersFinishEverythingElse(s3_client=s3_client, bucket=bucket, prefix="ws")
    report = Worker(backend, lambda group, ctx: processed.append(group.hash), WorkerSettings(time_limit=60), worker_id="late").run()

    assert len(processed) == 1
    history = s3_client.list_object_versions(Bucket=bucket, Prefix="ws/worker_locks/")
    locked_at_some_point = {v["Key"] for v in history.get("Versions", []) if not v["Key"].startswith(f"ws/{layout.PROBE_PREFIX}")}
    # The first finished group it meets tells it its listing is stale; it
    # re-lists once and touches no other finished group.
    assert f"ws/{layout.lock_key(processed[0])}" in locked_at_some_point
    assert len(locked_at_some_point) == 2
    assert report.listings == 2
    assert report.already_finished == 1


def test_four_workers_drain_forty_groups_exactly_once_on_a_store_without_conditional_delete(
    s3_workspace_without_conditional_delete, s3_client, helper_env, record_dir, tmp_path
):
    """LocalStack's S3 answers DELETE with If-Match with 501: locks are released by rewriting them, never run twice."""
    workspace = s3_workspace_without_conditional_delete
    bucket = workspace.removeprefix("s3://").split("/", 1)[0]
    backend = S3Backend(s3_client=s3_client, bucket=bucket, prefix="ws")
    hashes = populate_one_path_per_group(workspace, 40, tmp_path)

    reports = run_workers(workspace, 4, processor=PROCESSOR, env=helper_env, log_dir=tmp_path / "logs")

    assert sum(r["processed"] for r in reports) == 40 and sum(r["failed"] for r in reports) == 0
    calls = recorded_calls(record_dir)
    assert set(calls) == hashes and set(calls.values()) == {1}, calls
    assert list(backend.list_keys(layout.DONE_PREFIX)) == sorted(layout.done_key(h) for h in hashes)
    # Every lock is left released, not deleted, and names the run that finished its group.
    for hash_ in hashes:
        lock = LockBody.decode(backend.read(layout.lock_key(hash_)).body)
        assert (lock.state, lock.outcome) == ("released", "finished")
    # The probe's two DELETEs per worker (its 501, and the probe's removal), then rewrites: no DELETE per group.
    deletes = sum(r["s3_requests"].get("DeleteObject", 0) for r in reports)
    assert deletes == 2 * 4, deletes
