"""A local-directory workspace judges a lock's age on a clock no wall-clock step can move (Linux), and says when it cannot.

The wall clock cannot really be stepped here, so it is stepped for this
process alone (``time.time`` patched), which is what an NTP step or a VM
resume does to every reader of mtimes; the boot clock is not touched. A
writer of another boot is played by the backend's injectable ages.
"""

from __future__ import annotations

import errno
import json
import os
import time
import uuid
from pathlib import Path

import pytest

from s3wq import WorkIndex
from s3wq.ops.inspection import inspect_group
from s3wq.protocol.claims import Claim, ClaimProtocol, Held
from s3wq.store import LocalBackend, layout
from s3wq.store.local_ages import WRITE_RECORD_ATTRIBUTE, AgeSource, BootClockAges, WallClockAges, default_ages

HASH = "a" * 40
LOCK = layout.lock_key(HASH)
DAY = 86_400.0
# Both the reader and the writer of another boot say they are this machine (a
# container without /etc/machine-id would otherwise have no machine id at all).
MACHINE = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def workspace(tmp_path) -> Path:
    probe = tmp_path / "xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, WRITE_RECORD_ATTRIBUTE, b"probe")
    except (AttributeError, OSError) as exc:
        pytest.skip(f"no user extended attributes here ({exc}): the wall-clock fallback is all a workspace gets")
    return tmp_path / "ws"


def reader(workspace: Path) -> LocalBackend:
    return LocalBackend(workspace, ages=BootClockAges(machine_id=MACHINE))


def step_wall_clock(monkeypatch, seconds: float) -> None:
    """Step this process's wall clock by ``seconds``, as NTP or a VM resume steps a machine's."""
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + seconds)


def held_claim(backend: LocalBackend, lease: float) -> Claim:
    claim = ClaimProtocol(backend, worker_id="holder", lease_seconds=lease).claim(HASH)
    assert isinstance(claim, Claim)
    return claim


def test_this_platform_reads_ages_on_the_boot_clock(workspace):
    assert isinstance(default_ages(), BootClockAges)
    backend = LocalBackend(workspace)
    backend.create(LOCK, b"{}")
    assert backend.age_of(LOCK).source == AgeSource.BOOT_CLOCK


@pytest.mark.parametrize("step", [DAY, -DAY])
def test_a_wall_clock_step_moves_no_lock_age(workspace, monkeypatch, step):
    backend = LocalBackend(workspace)
    backend.create(LOCK, b"{}")

    step_wall_clock(monkeypatch, step)

    assert backend.read(LOCK).age_seconds < 5


def test_a_live_lock_stays_held_through_a_wall_clock_step_forward(workspace, monkeypatch):
    # The case: an NTP step makes a live lock look stale, and a taker runs beside its holder.
    backend = LocalBackend(workspace)
    held_claim(backend, lease=600)

    step_wall_clock(monkeypatch, DAY)

    taker = ClaimProtocol(backend, worker_id="taker", lease_seconds=600).claim(HASH)
    assert isinstance(taker, Held) and taker.stale_in > 500


def test_a_stale_lock_is_stale_through_a_wall_clock_step_back(workspace, monkeypatch):
    # Written 20 s ago on this boot's clock; the wall clock then goes back a day.
    boot = BootClockAges(machine_id=MACHINE)
    earlier = BootClockAges(machine_id=MACHINE, boottime_ns=lambda: boot._boottime_ns() - 20_000_000_000)
    held_claim(LocalBackend(workspace, ages=earlier), lease=10)

    step_wall_clock(monkeypatch, -DAY)

    backend = reader(workspace)
    assert 19 < backend.read(LOCK).age_seconds < 30
    assert isinstance(ClaimProtocol(backend, worker_id="taker", lease_seconds=10).claim(HASH), Claim)


def test_a_lock_of_another_boot_of_this_machine_is_stale_whatever_its_lease(workspace):
    previous_boot = BootClockAges(boot_id=str(uuid.uuid4()), machine_id=MACHINE, boottime_ns=lambda: 10**12)
    held_claim(LocalBackend(workspace, ages=previous_boot), lease=12 * 3600)

    backend = reader(workspace)
    age = backend.age_of(LOCK)
    assert age.source == AgeSource.EARLIER_BOOT and age.seconds == float("inf")
    taken = ClaimProtocol(backend, worker_id="after-reboot", lease_seconds=60).claim(HASH)
    assert isinstance(taken, Claim) and taken.reclaimed


def test_a_lock_of_another_machine_is_judged_by_the_wall_clock(workspace):
    # Not this machine's earlier boot: nothing says its holder is gone, so only the wall clock can judge it.
    elsewhere = BootClockAges(boot_id=str(uuid.uuid4()), machine_id="f" * 32)
    held_claim(LocalBackend(workspace, ages=elsewhere), lease=600)

    backend = reader(workspace)
    assert backend.age_of(LOCK).source == AgeSource.WALL_CLOCK
    assert isinstance(ClaimProtocol(backend, worker_id="taker", lease_seconds=60).claim(HASH), Held)


def test_a_file_without_a_record_is_judged_by_its_mtime(workspace):
    # An older workspace, or a file written by hand.
    path = workspace / LOCK
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    os.utime(path, (time.time() - 100, time.time() - 100))

    age = LocalBackend(workspace).age_of(LOCK)
    assert age.source == AgeSource.WALL_CLOCK and 99 < age.seconds < 110


def test_a_file_rewritten_in_place_since_its_record_is_judged_by_its_mtime(workspace):
    # An editor, or a tool that is not s3wq, writes into the file: its record is of the bytes before.
    backend = LocalBackend(workspace)
    backend.create(LOCK, b"{}")
    path = workspace / LOCK
    with open(path, "r+b") as f:
        f.write(b"[]")
    os.utime(path, (time.time() - 100, time.time() - 100))

    age = backend.age_of(LOCK)
    assert age.source == AgeSource.WALL_CLOCK and age.seconds > 99


def test_every_write_carries_its_record_and_the_bytes_are_the_object(workspace):
    backend = LocalBackend(workspace)
    etag = backend.create(LOCK, b"first")
    etag = backend.replace(LOCK, b"second", etag)
    backend.write("results/output_x.jsonl", b"third")

    assert (workspace / LOCK).read_bytes() == b"second"
    for key in (LOCK, "results/output_x.jsonl"):
        assert backend.age_of(key).source == AgeSource.BOOT_CLOCK
        assert os.getxattr(workspace / key, WRITE_RECORD_ATTRIBUTE).startswith(b"s3wq1 ")
    assert backend.read_range(LOCK, 0, 3, etag).body == b"sec"


def test_without_extended_attributes_writes_work_and_ages_fall_back_to_the_wall_clock(workspace, monkeypatch, caplog):
    def unsupported(*_args, **_kwargs):
        raise OSError(errno.ENOTSUP, "Operation not supported")

    monkeypatch.setattr(os, "setxattr", unsupported)
    backend = LocalBackend(workspace)
    backend.create(LOCK, b"{}")
    backend.write("results/output_x.jsonl", b"x")

    assert backend.read(LOCK).body == b"{}"
    assert backend.age_of(LOCK).source == AgeSource.WALL_CLOCK
    assert sum("no user extended attributes" in r.getMessage() for r in caplog.records) == 1


def test_the_wall_clock_ages_are_what_other_platforms_get(workspace, monkeypatch):
    backend = LocalBackend(workspace, ages=WallClockAges())
    backend.create(LOCK, b"{}")

    step_wall_clock(monkeypatch, DAY)

    age = backend.age_of(LOCK)
    assert age.source == AgeSource.WALL_CLOCK and age.seconds > DAY - 5


def test_inspect_says_a_lock_was_written_before_this_machine_last_booted(workspace):
    previous_boot = BootClockAges(boot_id=str(uuid.uuid4()), machine_id=MACHINE, boottime_ns=lambda: 10**12)
    writer = LocalBackend(workspace, ages=previous_boot)
    WorkIndex(writer).populate(["/data/scan.pdf"], 1)
    hash_ = layout.group_hash(["/data/scan.pdf"])
    assert isinstance(ClaimProtocol(writer, worker_id="before-reboot", lease_seconds=600).claim(hash_), Claim)

    doc = inspect_group(reader(workspace), hash_)

    assert doc["state"] == "pending"
    assert doc["lock"]["written_before_last_boot"] is True and "age_seconds" not in doc["lock"]
    json.dumps(doc, allow_nan=False)  # what --json prints: no Infinity
