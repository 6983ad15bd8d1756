"""A claim made ahead is fresh for every reader: a real ``s3wq work`` process beside an olmocr-style neighbour, on the local S3 endpoint.

The worker's lease (20 s) is longer than the foreign lock timeout (3 s, for
olmocr's 1,800 s), and its first run lasts past that timeout, so the group
it claims ahead at once waits longer than an olmocr worker honours an
unrenewed lock. The neighbour does what olmocr does: it lists the locks, and
takes one whose LastModified is older than the foreign timeout with an
unconditional PUT, then runs the group (:mod:`olmocr_neighbour`). The two
must never run one group at once, measured from both sides' heartbeats.

Before, the claim ahead was never written while it waited, and the check
before its run compared against s3wq's lease only: the neighbour took it,
and s3wq ran it too until its first renewal found the lock changed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from s3wq import WorkIndex
from s3wq.errors import ObjectNotFound
from s3wq.protocol.bodies import LockBody
from s3wq.store import layout

from .gated_processor import GATE_FILE_ENV
from .heartbeat_processor import SECONDS_ENV, overlap_seconds, read_runs

LEASE_SECONDS = 20.0
FOREIGN_TIMEOUT_SECONDS = 3.0
# The neighbour's run: shorter than the foreign timeout, so that no s3wq worker ever takes its lock over as stale.
NEIGHBOUR_RUN_SECONDS = 2.0
# How long past the foreign timeout the claim ahead waits before the run in front is let go (by then any
# olmocr worker calls an unwritten lock stale), if the neighbour took nothing; a failure bound, not a schedule.
PAST_FOREIGN_TIMEOUT_SECONDS = 1.5


def wait_until(predicate, *, timeout: float, what: str):
    give_up = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < give_up, f"timed out waiting for {what}"
        time.sleep(0.02)
    return found


def started_run(mark_dir: Path, worker: str) -> str | None:
    """The hash of the group the worker's first run is on, once its heartbeat started."""
    return next((r.hash for r in read_runs(mark_dir) if r.worker == worker), None)


def claimed_ahead(s3_backend, hash_: str, behind: str) -> bool:
    try:
        body = LockBody.decode(s3_backend.read(layout.lock_key(hash_)).body)
    except ObjectNotFound:
        return False
    return body is not None and body.behind == behind


def neighbour_passes(signals: Path) -> int:
    try:
        return int((signals / "passes").read_text())
    except (FileNotFoundError, ValueError):
        return 0


def test_a_claim_ahead_that_waits_past_the_foreign_timeout_never_runs_beside_an_olmocr_worker(
    s3_workspace, s3_backend, child_env, mark_dir, tmp_path
):
    names = ["s3://inputs/ahead/one.pdf", "s3://inputs/ahead/two.pdf"]
    WorkIndex(s3_backend).populate(names, 1)
    hashes = {layout.group_hash([n]) for n in names}
    signals, gate = tmp_path / "signals", tmp_path / "gate"
    signals.mkdir()
    neighbour = subprocess.Popen(
        [sys.executable, "-m", "reliability.olmocr_neighbour", s3_workspace, str(FOREIGN_TIMEOUT_SECONDS), str(signals)],
        env={**child_env, SECONDS_ENV: str(NEIGHBOUR_RUN_SECONDS)},
    )
    command = [
        sys.executable, "-m", "s3wq", "work", s3_workspace, "--worker-id", "s3wq", "--json", "--time-limit", "60",
        "--lease", str(LEASE_SECONDS), "--foreign-lock-timeout", str(FOREIGN_TIMEOUT_SECONDS),
        "--processor", "reliability.gated_processor:process",
    ]  # fmt: skip
    log = tmp_path / "worker.err"
    with open(log, "wb") as err:
        env = {**child_env, GATE_FILE_ENV: str(gate), SECONDS_ENV: "1"}
        worker = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        # The first run is held open (the gate); the other group is claimed ahead of it at once.
        first = wait_until(lambda: started_run(mark_dir, "s3wq"), timeout=60, what="the first run")
        [second] = hashes - {first}
        wait_until(lambda: claimed_ahead(s3_backend, second, first), timeout=30, what="the claim ahead")
        aged_at = time.monotonic() + FOREIGN_TIMEOUT_SECONDS + PAST_FOREIGN_TIMEOUT_SECONDS
        wait_until(lambda: time.monotonic() >= aged_at or (signals / f"took.{second}").exists(), timeout=30, what="the claim to age")
        took = (signals / f"took.{second}").exists()
        if not took:
            # The neighbour finished a look at the locks since, and found nothing to take.
            looked = neighbour_passes(signals) + 2
            wait_until(lambda: neighbour_passes(signals) >= looked or (signals / f"took.{second}").exists(), timeout=30, what="a look")
        # Let the first run go: its worker now starts the run of the claim made ahead, while the neighbour may be running it.
        gate.write_text("")
        took = (signals / f"took.{second}").exists()
        assert worker.wait(timeout=60) in (0, 1), log.read_text()
    finally:
        (signals / "stop").write_text("")
        gate.write_text("")
        worker.kill()
        neighbour.wait(timeout=30)

    runs = read_runs(mark_dir)
    overlap = overlap_seconds(runs)
    print(f"\nclaim ahead beside an olmocr-style neighbour: overlap {overlap:.3f} s; neighbour took it: {took}; runs {len(runs)}")
    assert overlap == 0, [(r.hash[:8], r.worker, r.start_ns, r.running_until_ns) for r in runs]
    # Every group ended done or failed, whoever ran it.
    assert all(s3_backend.exists(layout.done_key(h)) or s3_backend.exists(layout.failed_key(h)) for h in hashes)
