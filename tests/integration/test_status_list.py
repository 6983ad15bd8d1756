"""``s3wq status WS --list STATE``, against S3 over HTTP: each state's groups, their fields, paging, --json, bad input.

The workspace is made as an operator makes one: ``s3wq populate`` and ``s3wq
work`` (five groups done, one failed), a second populate (four groups never
run), then the claim protocol's own code holds one of those (a live lease),
hands one back and leaves one to go stale.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

import pytest
from support import run_cli

from s3wq import WorkIndex
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.protocol.locks import read_lock
from s3wq.store import S3Backend

from .test_operate_cli import BROKEN, FAILING_PROCESSOR, helpers_on_pythonpath, put_inputs

LEASE_SECONDS = 900


@dataclass
class MixedRun:
    workspace: str
    done: set[str]
    failed: str
    locked: str
    released: str
    stale: str
    never_run: str

    @property
    def pending(self) -> set[str]:
        return {self.released, self.stale, self.never_run}

    @property
    def every(self) -> set[str]:
        return self.done | self.pending | {self.failed, self.locked}


@pytest.fixture(scope="module")
def mixed_run(s3_server) -> MixedRun:
    s3 = s3_server.client()
    bucket = f"test-list-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    first = {f"first/doc-{n}.txt": BROKEN if n == 2 else f"text {n}\n".encode() for n in range(6)}
    put_inputs(s3, bucket, first)
    workspace = f"s3://{bucket}/run"
    backend = S3Backend(s3_client=s3, bucket=bucket, prefix="run")
    with pytest.MonkeyPatch.context() as mp:
        helpers_on_pythonpath(mp)
        assert run_cli("populate", workspace, f"s3://{bucket}/first/*.txt", "--group-size", "1").returncode == 0
        worked = run_cli("work", workspace, "--processor", FAILING_PROCESSOR, "--max-attempts", "1", "--worker-id", "list-worker")
        assert worked.returncode == 1, worked.stderr
    ran = {g.hash: g for g in WorkIndex(backend).iter_groups()}
    failed = next(h for h, g in ran.items() if g.paths[0].endswith("doc-2.txt"))
    second = put_inputs(s3, bucket, {f"second/doc-{n}.txt": b"later\n" for n in range(4)})
    WorkIndex(backend).populate(second, group_size=1)
    later = sorted(g.hash for g in WorkIndex(backend).iter_groups() if g.hash not in ran)
    locked, released, stale, never_run = later
    holder = ClaimProtocol(backend, worker_id="holder-1", lease_seconds=LEASE_SECONDS)
    assert isinstance(holder.claim(locked), Claim)
    handed = ClaimProtocol(backend, worker_id="handing-1", lease_seconds=LEASE_SECONDS).claim(released)
    assert isinstance(handed, Claim)
    assert ClaimProtocol(backend, worker_id="handing-1", lease_seconds=LEASE_SECONDS).hand_back(handed, "timeout", counted=True)
    assert isinstance(ClaimProtocol(backend, worker_id="vanished-1", lease_seconds=1).claim(stale), Claim)
    deadline = time.monotonic() + 30
    while not read_lock(backend, stale).stale:  # judged by the store's clock: a second or two
        assert time.monotonic() < deadline
        time.sleep(0.5)
    return MixedRun(workspace, set(ran) - {failed}, failed, locked, released, stale, never_run)


def listed(workspace: str, *args: str) -> dict:
    result = run_cli("status", workspace, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def by_hash(doc: dict) -> dict[str, dict]:
    return {row["hash"]: row for row in doc["groups"]}


def test_list_locked_names_the_live_holder_its_attempt_and_lease(mixed_run):
    doc = listed(mixed_run.workspace, "--list", "locked")

    assert doc["next_after"] is None
    [row] = doc["groups"]
    assert row["hash"] == mixed_run.locked
    assert (row["worker_id"], row["attempt"], row["lease"], row["lease_seconds"]) == ("holder-1", 1, "live", LEASE_SECONDS)
    assert row["owner"].startswith("holder-1")
    assert 0 <= row["age_seconds"] < LEASE_SECONDS and 0 < row["stale_in_seconds"] <= LEASE_SECONDS


def test_list_failed_gives_attempts_and_the_error_first_line(mixed_run):
    [row] = listed(mixed_run.workspace, "--list", "failed")["groups"]

    assert row["hash"] == mixed_run.failed
    assert (row["attempts"], row["kind"], row["worker_id"]) == (1, "error", "list-worker")
    assert row["error"].startswith("operator_processors.UnreadableInput: cannot read ") and "\n" not in row["error"]
    assert row["failed_at"]


def test_list_done_gives_when_and_input_errors(mixed_run):
    rows = by_hash(listed(mixed_run.workspace, "--list", "done"))

    assert set(rows) == mixed_run.done
    assert all(r["finished_at"] and r["worker_id"] == "list-worker" and r["input_errors"] == 0 for r in rows.values())


def test_list_pending_says_never_run_handed_back_or_stale(mixed_run):
    rows = by_hash(listed(mixed_run.workspace, "--list", "pending"))

    assert set(rows) == mixed_run.pending
    assert rows[mixed_run.never_run]["never_run"] and rows[mixed_run.never_run]["lock"] is None
    handed = rows[mixed_run.released]["lock"]
    assert (handed["lease"], handed["outcome"], handed["counted"], handed["attempt"]) == ("released", "timeout", True, 1)
    assert (rows[mixed_run.stale]["lock"]["lease"], rows[mixed_run.stale]["lock"]["worker_id"]) == ("stale", "vanished-1")
    assert [r["hash"] for r in listed(mixed_run.workspace, "--list", "stale")["groups"]] == [mixed_run.stale]
    assert [r["hash"] for r in listed(mixed_run.workspace, "--list", "released")["groups"]] == [mixed_run.released]


def test_pages_cover_every_group_once_in_hash_order(mixed_run):
    seen: list[str] = []
    for state in ("locked", "failed", "pending", "done"):
        after: list[str] = []
        while True:
            doc = listed(mixed_run.workspace, "--list", state, "--limit", "2", *after)
            assert len(doc["groups"]) <= 2
            seen += [r["hash"] for r in doc["groups"]]
            if doc["next_after"] is None:
                break
            assert doc["next_after"] == doc["groups"][-1]["hash"]
            after = ["--after", doc["next_after"]]

    assert sorted(seen) == sorted(mixed_run.every) and len(seen) == len(mixed_run.every) == 10


def test_the_text_listing_is_ready_for_inspect_and_says_how_to_page_on(mixed_run):
    result = run_cli("status", mixed_run.workspace, "--list", "done", "--limit", "3")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"s3wq inspect {mixed_run.workspace} HASH" in lines[0]
    first = sorted(mixed_run.done)[:3]
    assert [line.split()[0] for line in lines[1:4]] == first
    assert lines[-1] == f"next page: s3wq status {mixed_run.workspace} --list done --limit 3 --after {first[-1]}"
    inspected = run_cli("inspect", mixed_run.workspace, lines[1].split()[0], "--json")
    assert json.loads(inspected.stdout)["state"] == "done"
    locked = run_cli("status", mixed_run.workspace, "--list", "locked").stdout.splitlines()
    assert locked[1].startswith(f"{mixed_run.locked}  live: worker holder-1 ") and "attempt 1" in locked[1]
    assert locked[-1] == "end of the list"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--list", "running"], "invalid choice: 'running'"),
        (["--list", "done", "--after", "not-a-hash"], "group hash must be 40 lowercase hex characters"),
        (["--after", "0" * 40], "--limit and --after page a --list"),
        (["--list", "done", "--limit", "0"], "must be at least 1"),
    ],
)
def test_a_bad_state_or_cursor_is_one_line_and_exit_2(mixed_run, args, named):
    result = run_cli("status", mixed_run.workspace, *args)

    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and named in result.stderr, result.stderr


def test_the_work_summary_explains_conflicts_as_harmless_claim_races(s3_workspace, s3_backend):
    WorkIndex(s3_backend).populate(["s3://in/a.pdf"], group_size=1)
    [group] = WorkIndex(s3_backend).iter_groups()
    assert isinstance(ClaimProtocol(s3_backend, worker_id="first-1", lease_seconds=LEASE_SECONDS).claim(group.hash), Claim)

    # The only group is held by a live lease past this worker's time: its claim loses the race and it stops.
    result = run_cli("work", s3_workspace, "--processor", "text", "--time-limit", "5", "--worker-id", "second")

    assert result.returncode == 0, result.stderr
    summary = result.stdout.splitlines()[-1]
    assert "conflicts 1 (claim races: another worker claimed the group first; nothing ran twice)" in summary, summary
