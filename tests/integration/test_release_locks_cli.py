"""``s3wq release-locks`` names one worker instance, and a worker id with a live lease is refused unless forced.

The issue's case: a box dies holding a group (and one it claimed ahead),
reboots and starts again under the same worker id, and takes a new group.
Its id now names a live worker. The locks are made by the claim protocol
itself, on S3 over HTTP; every command is the real ``s3wq`` in a child process.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pytest
from support import run_cli

from s3wq import WorkIndex
from s3wq.model import LockState, Outcome
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.store import layout

LEASE = 300.0
BOX = "gpu-box-3"


@dataclass(frozen=True)
class Fleet:
    groups: dict[str, str]  # name -> hash
    claims: dict[str, Claim]  # name -> the claim holding it

    def owner(self, name: str) -> str:
        return self.claims[name].owner


def claim(protocol: ClaimProtocol, hash_: str, behind: Claim | None = None) -> Claim:
    claimed = protocol.claim(hash_, behind=behind)
    assert isinstance(claimed, Claim)
    return claimed


@pytest.fixture
def fleet(s3_backend) -> Fleet:
    names = ["running", "ahead", "after-reboot", "other"]
    paths = {n: f"s3://inputs/release/{n}.pdf" for n in names}
    WorkIndex(s3_backend).populate(list(paths.values()), 1)
    groups = {n: layout.group_hash([p]) for n, p in paths.items()}
    dead = ClaimProtocol(s3_backend, worker_id=BOX, lease_seconds=LEASE)  # the box before it rebooted
    restarted = ClaimProtocol(s3_backend, worker_id=BOX, lease_seconds=LEASE)  # the same box, started again
    running = claim(dead, groups["running"])
    claims = {
        "running": running,
        "ahead": claim(dead, groups["ahead"], behind=running),
        "after-reboot": claim(restarted, groups["after-reboot"]),
        "other": claim(ClaimProtocol(s3_backend, worker_id="gpu-box-4", lease_seconds=LEASE), groups["other"]),
    }
    return Fleet(groups, claims)


def locks(s3_backend, fleet: Fleet) -> dict[str, tuple[str, LockBody]]:
    stored = {n: s3_backend.read(layout.lock_key(h)) for n, h in fleet.groups.items()}
    return {n: (s.etag, LockBody.decode(s.body)) for n, s in stored.items()}


def test_a_worker_id_with_live_leases_is_refused_and_nothing_changes(s3_workspace, s3_backend, fleet):
    before = locks(s3_backend, fleet)

    refused = run_cli("release-locks", s3_workspace, "--worker-id", BOX)

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "3 locks held by worker id gpu-box-3 have a live lease" in refused.stderr
    # One token an instance, each as inspect shows it: the dead box's and the restarted one's, not the claim ahead's.
    assert f"--owner {fleet.owner('running')}" in refused.stderr and f"--owner {fleet.owner('after-reboot')}" in refused.stderr
    assert fleet.owner("ahead") not in refused.stderr and "--force" in refused.stderr
    assert locks(s3_backend, fleet) == before


def test_owner_releases_one_instance_and_leaves_the_restarted_one_alone(s3_workspace, s3_backend, fleet):
    before = locks(s3_backend, fleet)
    shown = run_cli("inspect", s3_workspace, fleet.groups["running"], "--json")
    owner = json.loads(shown.stdout)["lock"]["owner"]

    released = run_cli("release-locks", s3_workspace, "--owner", owner, "--json")

    assert released.returncode == 0, released.stderr
    # Its running group and the one it claimed ahead behind it: both the dead instance's.
    assert json.loads(released.stdout) == {"released": sorted([fleet.groups["running"], fleet.groups["ahead"]])}
    after = locks(s3_backend, fleet)
    for name in ("running", "ahead"):
        body = after[name][1]
        assert (body.state, body.outcome, body.counted, body.owner) == (LockState.RELEASED, Outcome.OPERATOR, False, fleet.owner(name))
    assert {n: after[n] for n in ("after-reboot", "other")} == {n: before[n] for n in ("after-reboot", "other")}


def test_owner_of_a_claim_no_longer_held_releases_nothing(s3_workspace, s3_backend, fleet):
    # The claim ahead names the running one; once that one is gone, a live worker may run the claim ahead.
    gone = fleet.claims["running"]
    ClaimProtocol(s3_backend, worker_id=BOX, lease_seconds=LEASE).release(gone)
    ahead = s3_backend.read(layout.lock_key(fleet.groups["ahead"])).etag

    released = run_cli("release-locks", s3_workspace, "--owner", gone.owner, "--json")

    assert released.returncode == 0, released.stderr
    assert json.loads(released.stdout) == {"released": []}
    assert s3_backend.read(layout.lock_key(fleet.groups["ahead"])).etag == ahead


def test_force_releases_every_lock_of_the_worker_id(s3_workspace, s3_backend, fleet):
    released = run_cli("release-locks", s3_workspace, "--worker-id", BOX, "--force")

    assert released.returncode == 0, released.stderr
    assert released.stdout.strip() == "released 3 locks held by worker id gpu-box-3"
    after = locks(s3_backend, fleet)
    assert [n for n, (_, body) in after.items() if body.state == LockState.RELEASED] == ["running", "ahead", "after-reboot"]


def test_stale_locks_of_a_worker_id_are_released_without_force(s3_workspace, s3_backend):
    path = "s3://inputs/release/stale.pdf"
    WorkIndex(s3_backend).populate([path], 1)
    hash_ = layout.group_hash([path])
    claim(ClaimProtocol(s3_backend, worker_id=BOX, lease_seconds=1.0), hash_)
    give_up = time.monotonic() + 30
    while s3_backend.read(layout.lock_key(hash_)).age_seconds <= 1.0:  # the store's own clock says when its lease ran out
        assert time.monotonic() < give_up, "the lease never ran out"
        time.sleep(0.1)

    released = run_cli("release-locks", s3_workspace, "--worker-id", BOX, "--json")

    assert released.returncode == 0, released.stderr
    assert json.loads(released.stdout) == {"released": [hash_]}


def test_one_of_worker_id_and_owner_is_required(s3_workspace, fleet):
    for args in ((), ("--worker-id", BOX, "--owner", "x")):
        refused = run_cli("release-locks", s3_workspace, *args)
        assert refused.returncode == 2 and "--owner" in refused.stderr
