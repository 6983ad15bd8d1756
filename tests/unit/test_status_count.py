"""``status`` and the operators' listings, counted by hash prefix, against a recount group by group.

The recount reads every group of the index and looks up its own flags and
lock, which is what the count meant before it listed by prefix: the two must
agree on any mix of done, failed, held, stale, released and olmocr locks,
with junk beside them, however the hash space is partitioned.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import recount_status

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.index import WorkIndex, encode_groups, make_groups
from s3wq.model import Group, LockState, Outcome
from s3wq.ops.inspection import failed_groups, inspect_group, list_failures
from s3wq.ops.status import MAX_PARTITION_GROUPS, flag_partitions, partition_digits, queue_status
from s3wq.protocol.bodies import LockBody
from s3wq.store import LocalBackend, layout

LEASE = 600.0
# Ages a half second off whole seconds, far from the lease: live and stale
# cannot trade places, nor wait_seconds round differently, between two counts.
LIVE_AGE, STALE_AGE = 100.5, 700.5

# What a group's flags and lock can be, alone or together.
STATES = {
    "pending": (),
    "done": ("done",),
    "done-lock-left": ("done", "held"),  # finished, its lock not yet deleted
    "failed": ("failed", "failed-lock"),
    "failed-flag-only": ("failed",),
    "failed-lock-only": ("failed-lock",),  # an operator deleted the flag
    "failed-flag-live-lock": ("failed", "held"),
    "done-and-failed": ("done", "failed", "failed-lock"),
    "held": ("held",),
    "held-stale": ("held-stale",),
    "released": ("released",),
    # Handed back by a processor that raised ServiceUnavailable: released, and counted apart among the released.
    "released-unavailable": ("released-unavailable",),
    "olmocr-lock": ("olmocr",),
    "olmocr-lock-stale": ("olmocr-stale",),
    "unparsable-lock": ("junk-lock",),
}
JUNK_KEYS = [
    "done_flags/done_not-a-hash.flag",
    "done_flags/done_" + "A" * 40 + ".flag",
    "done_flags/done_" + "a" * 39 + ".flag",
    "done_flags/notes.txt",
    "failed_flags/failed_" + "b" * 40 + ".json.bak",
    "failed_flags/failed_" + "0" * 41 + ".json",
    "worker_locks/worker_" + "c" * 40 + ".lock~",
    "worker_locks/README",
    "done_flags/nested/done_" + "d" * 40 + ".flag",
]


def set_age(backend: LocalBackend, key: str, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(backend.root / key, (then, then))


def lock_body(kind: str, hash_: str) -> bytes:
    if kind in ("olmocr", "olmocr-stale"):
        return b""
    if kind == "junk-lock":
        return b'{"owner": 1e999}'
    state = {"failed-lock": LockState.FAILED, "released": LockState.RELEASED, "released-unavailable": LockState.RELEASED}.get(kind, "held")
    outcome = Outcome.UNAVAILABLE if kind == "released-unavailable" else None
    return LockBody(owner=f"w:{hash_[:6]}", worker_id="w", attempt=1, lease_seconds=LEASE, state=state, outcome=outcome).encode()


def apply_state(backend: LocalBackend, hash_: str, state: str) -> None:
    for part in STATES[state]:
        if part == "done":
            backend.create(layout.done_key(hash_), b"")
        elif part == "failed":
            doc = {"hash": hash_, "paths": [f"p-{hash_[:8]}"], "attempts": 3, "kind": "error", "error": f"boom {hash_[:8]}"}
            backend.create(layout.failed_key(hash_), json.dumps(doc).encode())
        else:
            backend.create(layout.lock_key(hash_), lock_body(part, hash_))
            stale = part in ("held-stale", "olmocr-stale") or (part == "junk-lock" and hash_ < "8")
            set_age(backend, layout.lock_key(hash_), STALE_AGE if stale else LIVE_AGE)
            if part.startswith("olmocr"):
                # olmocr's foreign timeout is 1,800 s: a stale olmocr lock is older than that.
                set_age(backend, layout.lock_key(hash_), FOREIGN_LOCK_TIMEOUT_SECONDS + 100.5 if stale else LIVE_AGE)


def build(backend: LocalBackend, segment_states: list[str], olmocr_states: list[str], junk: list[str], group_size: int) -> list[Group]:
    """A workspace: s3wq's index (one populate per 7 groups), olmocr's index beside it, each group in its state, junk keys."""
    paths = [f"s3://inputs/s3wq-{n:04d}.pdf" for n in range(len(segment_states) * group_size)]
    index = WorkIndex(backend)
    for start in range(0, len(paths), 7 * group_size):
        index.populate(paths[start : start + 7 * group_size], group_size)
    groups = sorted(index.iter_groups(), key=lambda g: g.paths)
    legacy = make_groups([f"s3://inputs/olmocr-{n:04d}.pdf" for n in range(len(olmocr_states))], 1)
    if legacy:
        backend.write(layout.LEGACY_INDEX_KEY, encode_groups(legacy))
    for group, state in zip(groups + legacy, segment_states + olmocr_states):
        apply_state(backend, group.hash, state)
    for key in junk:
        backend.write(key, b"{}")
    return groups + legacy


def without_wait(status: dict) -> dict:
    return {k: v for k, v in status.items() if k != "wait_seconds"}


@settings(max_examples=60, deadline=None)
@given(
    segment_states=st.lists(st.sampled_from(sorted(STATES)), max_size=40),
    olmocr_states=st.lists(st.sampled_from(sorted(STATES)), max_size=8),
    junk=st.lists(st.sampled_from(JUNK_KEYS), unique=True),
    group_size=st.integers(1, 3),
    digits=st.sampled_from([None, 0, 1, 2]),
)
def test_status_counted_by_prefix_equals_a_recount_group_by_group(segment_states, olmocr_states, junk, group_size, digits):
    with tempfile.TemporaryDirectory() as root:
        backend = LocalBackend(root)
        build(backend, segment_states, olmocr_states, junk, group_size)

        status = queue_status(backend, digits=digits)
        expected, failed = recount_status(backend)

        assert without_wait(status) == without_wait(expected)
        assert abs(status["wait_seconds"] - expected["wait_seconds"]) <= 1
        assert failed_groups(backend) == failed
        # Every failed flag that names a hash (with a done flag or not), in hash order, with its body.
        flagged = sorted(
            h for k in backend.list_keys(layout.FAILED_PREFIX) if (h := layout.hash_from_key(k, layout.FAILED_PREFIX, layout.FAILED_SUFFIX))
        )
        listed = list_failures(backend)
        assert [f["hash"] for f in listed] == flagged
        assert all(f["error"] == f"boom {f['hash'][:8]}" for f in listed)


class RecordingBackend:
    """A local workspace listed as S3 is (narrow prefixes are cheap), recording each read and listing."""

    narrow_listing_is_cheap = True

    def __init__(self, inner: LocalBackend):
        self.inner = inner
        self.uri = inner.uri
        self.clock_resolution_seconds = inner.clock_resolution_seconds
        self.calls: list[tuple[str, str]] = []  # appended from the count's threads: list.append is atomic

    def read(self, key):
        self.calls.append(("read", key))
        return self.inner.read(key)

    def read_range(self, key, start, length, etag=None):
        self.calls.append(("read", key))
        return self.inner.read_range(key, start, length, etag)

    def exists(self, key):
        self.calls.append(("exists", key))
        return self.inner.exists(key)

    def list_keys(self, prefix):
        self.calls.append(("list", prefix))
        return self.inner.list_keys(prefix)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture
def big_workspace(local_backend) -> list[Group]:
    """3,000 groups in two populates (16 segments by hash prefix, and one), every third done, every hundredth failed, ten held."""
    index = WorkIndex(local_backend)
    for start, stop in ((0, 2000), (2000, 3000)):
        index.populate([f"s3://inputs/doc-{n:05d}.pdf" for n in range(start, stop)], 1)
    groups = sorted(index.iter_groups(), key=lambda g: g.hash)
    for n, group in enumerate(groups):
        state = "done" if n % 3 == 0 else "failed" if n % 100 == 1 else "held" if n % 300 == 2 else "pending"
        apply_state(local_backend, group.hash, state)
    return groups


def test_status_reads_the_catalog_and_no_segment_and_lists_each_prefix_once(local_backend, big_workspace):
    recording = RecordingBackend(local_backend)

    status = queue_status(recording)

    assert without_wait(status) == without_wait(recount_status(local_backend)[0])
    assert (status["groups"], status["done"], status["failed"], status["locked"]) == (3000, 1000, 20, 10)
    reads = [key for op, key in recording.calls if op != "list"]
    assert not [key for key in reads if key.startswith(layout.INDEX_SEGMENTS_PREFIX)]
    # The catalog (to choose the partitions, and again after the flags to
    # count the index), one look for olmocr's index (there is none), and
    # only the locks with neither flag.
    assert reads.count(layout.LEGACY_INDEX_KEY) <= 1
    assert Counter(k for k in reads if k != layout.LEGACY_INDEX_KEY) == Counter(
        [layout.INDEX_CATALOG_KEY] * 2 + [layout.lock_key(g.hash) for n, g in enumerate(big_workspace) if n % 300 == 2]
    )
    lists = sorted(key for op, key in recording.calls if op == "list")
    assert partition_digits(3000) == 1
    assert lists == sorted(
        f"{prefix}{p:x}" for prefix in (layout.DONE_PREFIX, layout.FAILED_PREFIX, layout.LOCKS_PREFIX) for p in range(16)
    )


def test_a_local_workspace_is_listed_whole_for_its_directories_are_read_whole(local_backend, big_workspace):
    assert flag_partitions(local_backend, 3000) == [""]
    assert flag_partitions(RecordingBackend(local_backend), 3000) == [f"{p:x}" for p in range(16)]
    assert queue_status(local_backend) == queue_status(RecordingBackend(local_backend))


def test_flags_for_hashes_outside_the_index_are_counted_but_never_past_the_groups(local_backend):
    """Only holders of index groups write flags, so a flag is counted as listed; one copied in by hand cannot make pending negative."""
    WorkIndex(local_backend).populate(["s3://inputs/only.pdf"], 1)
    [group] = WorkIndex(local_backend).iter_groups()
    strangers = [layout.group_hash([f"s3://elsewhere/{n}.pdf"]) for n in range(5)]
    for hash_ in strangers[:3]:
        local_backend.create(layout.done_key(hash_), b"")
    for hash_ in strangers[3:]:
        local_backend.create(layout.failed_key(hash_), b"{}")
    apply_state(local_backend, group.hash, "held")

    status = queue_status(local_backend)

    assert without_wait(status) == {
        "groups": 1, "paths": 1, "done": 1, "failed": 0, "locked": 0, "claimed_ahead": 0, "pending": 0, "remaining": 0, "finished": 1,
        "released": 0, "unavailable": 0,
    }  # fmt: skip
    assert status["wait_seconds"] == 0


@pytest.mark.parametrize(
    ("groups", "digits"),
    [(0, 0), (1000, 0), (2000, 0), (2001, 1), (100_000, 1), (300_000, 2), (1_000_000, 2), (4_000_000, 2), (10_000_000, 3), (10**9, 3)],
)
def test_partitions_are_chosen_for_the_fewest_round_trips(groups, digits):
    assert partition_digits(groups) == digits


def test_partitions_hold_a_bounded_number_of_groups_up_to_the_most_partitions():
    for groups in [0, *range(1, 20_000_000, 9_973)]:
        digits = partition_digits(groups)
        assert groups / 16**digits <= MAX_PARTITION_GROUPS or digits == 3, groups


def test_inspect_reads_only_the_segments_whose_prefix_the_hash_has(local_backend, big_workspace):
    recording = RecordingBackend(local_backend)
    catalog, _ = WorkIndex(local_backend).read_catalog()
    group = big_workspace[1234]

    doc = inspect_group(recording, group.hash)

    assert (doc["hash"], doc["paths"]) == (group.hash, list(group.paths))
    segment_reads = [key for op, key in recording.calls if op == "read" and key.startswith(layout.INDEX_SEGMENTS_PREFIX)]
    candidates = {s.key for s in catalog.segments if group.hash.startswith(s.prefix)}
    assert (len(catalog.segments), len(candidates)) == (17, 2)  # its prefix's segment of the first populate, and the second's only one
    assert segment_reads and set(segment_reads) <= candidates


def test_inspect_finds_a_group_of_olmocrs_index(local_backend):
    WorkIndex(local_backend).populate(["s3://inputs/s3wq.pdf"], 1)
    [legacy] = make_groups(["s3://inputs/olmocr.pdf"], 1)
    local_backend.write(layout.LEGACY_INDEX_KEY, encode_groups([legacy]))

    assert inspect_group(local_backend, legacy.hash)["paths"] == ["s3://inputs/olmocr.pdf"]
