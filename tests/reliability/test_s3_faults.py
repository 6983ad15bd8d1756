"""S3 failing under the queue: 500s, 503 SlowDown, connection resets, and responses lost after S3 applied the request.

The workers reach S3 through :class:`FaultProxy` and retry with botocore's
standard mode (``make_s3_client``), as on Lambda. The drain asserts that
nothing is lost and nothing is done twice; the targeted tests take each
conditional request of the claim protocol and lose its response once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter

import pytest
from integration.workers import run_workers

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.protocol.bodies import LockBody
from s3wq.store import S3Backend, layout, make_s3_client

from .bucket_state import listed
from .fault_proxy import AFTER_FORWARDING, ALL_FAULTS, Request, SeededFaults
from .marking_processor import SECONDS_ENV, read_calls
from .scale import scale

FAULT_RATE = 0.10
SEED = 3
WORKERS = 6


def test_workers_drain_through_ten_percent_faults_with_every_group_done_exactly_once(
    fault_proxy, s3_client, bucket, s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    groups = 100 * scale()
    paths = [f"s3://inputs/faults/page-{n:05d}.pdf" for n in range(groups)]
    hashes = {layout.group_hash([p]) for p in paths}
    manifest = tmp_path / "manifest.txt"
    manifest.write_text("\n".join(paths) + "\n")
    fault_proxy.set_plan(SeededFaults(SEED, FAULT_RATE))
    env = {**child_env, "AWS_ENDPOINT_URL": fault_proxy.endpoint, SECONDS_ENV: "0,0.02"}
    started = time.monotonic()

    # Populate through the faults too: its conditional writes of the catalog and segments are hit alike.
    populated = subprocess.run(
        [sys.executable, "-m", "s3wq", "populate", s3_workspace, f"@{manifest}", "--group-size", "1", "--no-check", "--json"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert populated.returncode == 0, populated.stderr
    reports = run_workers(s3_workspace, WORKERS, processor="reliability.marking_processor:process", env=env, log_dir=tmp_path / "logs")

    elapsed = time.monotonic() - started
    journal = fault_proxy.journal
    faults = journal.faults()
    lost_writes = Counter(
        f"{e.request.kind} {e.request.key.split('/')[1]} {e.fault}"
        for e in journal.exchanges
        if e.fault in AFTER_FORWARDING and e.request.method in ("PUT", "DELETE")
    )
    sdk_requests = sum(sum(r["s3_requests"].values()) for r in reports) + sum(json.loads(populated.stdout)["s3_requests"].values())
    calls = read_calls(mark_dir)
    per_group = Counter(c.hash for c in calls)
    figures = {
        "groups": groups,
        "workers": WORKERS,
        "requests": journal.requests(),
        "faults": sum(faults.values()),
        "faults_by_kind": dict(sorted(faults.items())),
        "lost_responses_on_writes": dict(sorted(lost_writes.items())),
        "processor_calls": len(calls),
        "duplicates": len(calls) - len(per_group),
        "lost_groups": len(hashes - set(per_group)),
        "requests_sent_by_the_sdks": sdk_requests,
        "populate_reported_added_groups": json.loads(populated.stdout)["added_groups"],
        "seconds": round(elapsed, 1),
        "seed": SEED,
    }
    print(f"\nS3 faults: {json.dumps(figures)}")

    # Faults of every kind were injected, and responses were lost on the claim protocol's conditional writes.
    assert set(faults) == set(ALL_FAULTS)
    assert 0.06 < figures["faults"] / figures["requests"] < 0.14
    lost_on = {" ".join(k.split()[:3]) for k in lost_writes}
    assert {"PUT If-None-Match worker_locks", "PUT If-None-Match done_flags", "DELETE If-Match worker_locks"} <= lost_on
    # Every request an SDK sent reached S3 through the proxy, retries included (none went around it).
    assert figures["requests"] == sdk_requests
    # The index holds every path once.
    assert sorted(p for g in WorkIndex(s3_backend).iter_groups() for p in g.paths) == sorted(paths)
    # Every group done exactly once: one done flag each, no failure, no lock left, one processor call each.
    assert listed(s3_client, bucket, "ws/done_flags/") == sorted(f"ws/{layout.done_key(h)}" for h in hashes)
    assert listed(s3_client, bucket, "ws/failed_flags/") == []
    assert listed(s3_client, bucket, "ws/worker_locks/") == []
    assert set(per_group) == hashes
    assert {h: n for h, n in per_group.items() if n != 1} == {}
    # No false done flag: each names the worker whose call completed the group.
    worker_of = {c.hash: c.worker for c in calls}
    assert {h: json.loads(s3_backend.read(layout.done_key(h)).body)["worker_id"] for h in hashes} == worker_of


# --- one lost response at a time -----------------------------------------------------------------


def lose_first(method: str, condition: str, folder: str, fault: str):
    """A plan that loses the response to the first ``method`` with ``condition`` on a key under ``folder`` (a lock, not a worker's probe of the store, with layout.LOCKS_PREFIX)."""

    def plan(request: Request) -> str | None:
        hit = request.method == method and request.condition == condition and f"/{folder}" in request.key and request.occurrence == 1
        return fault if hit else None

    return plan


@pytest.fixture
def faulty_backend(fault_proxy, bucket, monkeypatch):
    """The workspace through the fault proxy, with the client every worker uses (standard retries)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", fault_proxy.endpoint)
    return S3Backend(s3_client=make_s3_client(), bucket=bucket, prefix="ws")


@pytest.fixture
def one_group(s3_backend) -> str:
    WorkIndex(s3_backend).populate(["s3://inputs/lost/page-1.pdf"], 1)
    return layout.group_hash(["s3://inputs/lost/page-1.pdf"])


LOST_FAULTS = pytest.mark.parametrize("fault", ["lost-reset", "lost-500"])
# Long enough that waiting for a lock to go stale would show in the run time.
LOCK_TIMEOUT = 60.0


def run_worker(backend, processor, *, max_attempts: int = 3) -> tuple:
    started = time.monotonic()
    report = Worker(backend, processor, WorkerSettings(time_limit=LOCK_TIMEOUT, max_attempts=max_attempts), worker_id="solo").run()
    return report, time.monotonic() - started


def only_fault(journal) -> tuple:
    injected = [e for e in journal.exchanges if e.fault]
    assert len(injected) == 1, injected
    [exchange] = injected
    retries = [e for e in journal.exchanges if e.request.kind == exchange.request.kind and e.request.key == exchange.request.key]
    return exchange, [e.upstream_status for e in retries]


@LOST_FAULTS
@pytest.mark.parametrize(
    "lost, retry_status",
    [
        pytest.param(("PUT", "If-None-Match", layout.LOCKS_PREFIX), 412, id="lock-create"),
        pytest.param(("PUT", "If-None-Match", "done_flags/"), 412, id="done-flag-create"),
        pytest.param(("DELETE", "If-Match", layout.LOCKS_PREFIX), 404, id="lock-delete"),
    ],
)
def test_a_lost_response_to_a_claim_protocol_write_costs_no_wait_and_no_duplicate(
    fault_proxy, faulty_backend, s3_backend, one_group, lost, retry_status, fault
):
    fault_proxy.set_plan(lose_first(*lost, fault))
    calls = []

    report, seconds = run_worker(faulty_backend, lambda group, ctx: calls.append(group.hash))

    exchange, statuses = only_fault(fault_proxy.journal)
    print(f"\nlost response on {exchange.request.kind} {exchange.request.key}: S3 answered {statuses}; worker took {seconds:.2f}s")
    # S3 applied the request whose response was lost; the SDK's retry met our own write.
    assert statuses[:2] == [200 if lost[0] == "PUT" else 204, retry_status]
    assert calls == [one_group]
    assert (report.conflicts, report.reclaimed, report.lost_locks, report.stopped_reason) == (0, 0, 0, "queue_empty")
    assert seconds < 10, "the worker waited, as if for its own lock to go stale"
    assert list(s3_backend.list_keys("done_flags/")) == [layout.done_key(one_group)]
    assert json.loads(s3_backend.read(layout.done_key(one_group)).body)["worker_id"] == "solo"
    assert list(s3_backend.list_keys("worker_locks/")) == []
    assert list(s3_backend.list_keys("failed_flags/")) == []


@LOST_FAULTS
def test_a_lost_response_to_a_lock_takeover_is_recognised_by_the_owner_token(fault_proxy, faulty_backend, s3_backend, one_group, fault):
    # A peer released the group after a failed attempt: a takeover (PUT If-Match) at once, no staleness needed.
    released = LockBody(
        owner="peer:0123", worker_id="peer", attempt=1, lease_seconds=60, state="released", outcome="error", counted=True, error="boom"
    )
    s3_backend.create(layout.lock_key(one_group), released.encode())
    fault_proxy.set_plan(lose_first("PUT", "If-Match", layout.LOCKS_PREFIX, fault))
    calls = []

    report, seconds = run_worker(faulty_backend, lambda group, ctx: calls.append((group.hash, ctx.attempt)))

    exchange, statuses = only_fault(fault_proxy.journal)
    print(f"\nlost response on takeover {exchange.request.key}: S3 answered {statuses}; worker took {seconds:.2f}s")
    assert statuses[:2] == [200, 412]
    assert calls == [(one_group, 2)]
    assert (report.conflicts, report.lost_locks, report.stopped_reason) == (0, 0, "queue_empty")
    assert seconds < 10
    assert json.loads(s3_backend.read(layout.done_key(one_group)).body) | {"finished_at": None, "owner": None} == {
        "worker_id": "solo", "attempt": 2, "finished_at": None, "owner": None,
    }  # fmt: skip
    assert list(s3_backend.list_keys("worker_locks/")) == []


def test_a_lost_response_to_recording_the_next_attempt_does_not_strand_the_group(fault_proxy, faulty_backend, s3_backend, one_group):
    fault_proxy.set_plan(lose_first("PUT", "If-Match", layout.LOCKS_PREFIX, "lost-reset"))
    calls = []

    def always_fails(group, ctx):
        calls.append(ctx.attempt)
        raise RuntimeError("poisoned input")

    report, seconds = run_worker(faulty_backend, always_fails, max_attempts=3)

    print(f"\nnext_attempt's lost response: attempts run {calls}, report {report.to_dict()}, {seconds:.2f}s")
    assert len([e for e in fault_proxy.journal.exchanges if e.fault]) == 1
    # The worker should go on to attempts 2 and 3 and record the failure, as without the fault.
    assert calls == [1, 2, 3]
    assert json.loads(s3_backend.read(layout.failed_key(one_group)).body)["attempts"] == 3
    assert report.lost_locks == 0


def test_a_lost_response_to_the_done_flag_still_counts_the_group_as_processed(fault_proxy, faulty_backend, one_group):
    fault_proxy.set_plan(lose_first("PUT", "If-None-Match", "done_flags/", "lost-reset"))

    report, _ = run_worker(faulty_backend, lambda group, ctx: None)

    assert (report.processed, report.already_finished) == (1, 0)


def test_a_lost_response_to_the_catalog_write_still_reports_the_paths_added(fault_proxy, faulty_backend, s3_backend):
    paths = [f"s3://inputs/lost/page-{n}.pdf" for n in range(3)]
    fault_proxy.set_plan(lose_first("PUT", "If-None-Match", "index/catalog", "lost-reset"))

    result = WorkIndex(faulty_backend).populate(paths, 1)

    assert len([e for e in fault_proxy.journal.exchanges if e.fault]) == 1
    assert sorted(p for g in WorkIndex(s3_backend).iter_groups() for p in g.paths) == paths  # the index itself is right
    assert (result.added_paths, result.added_groups) == (3, 3)
