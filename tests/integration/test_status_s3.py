"""``status`` and ``failures`` on S3 over HTTP: listed by hash prefix on many threads, equal to a recount group by group.

The workspace sits under a key prefix, beside another workspace's flags, so
a listing that strayed outside its own prefix would be caught.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from support import recount_status

from s3wq.index import WorkIndex, encode_groups, make_groups
from s3wq.model import Group, LockState
from s3wq.ops.inspection import failed_groups, list_failures
from s3wq.ops.status import index_counts, listed_hashes, partition_digits, queue_status
from s3wq.protocol.bodies import LockBody
from s3wq.store import S3Backend, counting_requests, layout, request_counts
from s3wq.store import s3 as s3_module

GROUPS = 300
LEASE = 600.0


def held(hash_: str, state: str = "held") -> bytes:
    return LockBody(owner=f"w:{hash_[:6]}", worker_id="w", attempt=2, lease_seconds=LEASE, state=state).encode()


def write_all(backend: S3Backend, objects: dict[str, bytes]) -> None:
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda item: backend.write(*item), objects.items()))


@pytest.fixture
def counted_workspace(s3_client, bucket) -> tuple[S3Backend, list[Group]]:
    """GROUPS groups in two populates and olmocr's index beside them; each group done, failed, locked, released or pending; junk."""
    backend = S3Backend(s3_client=s3_client, bucket=bucket, prefix="ws")
    index = WorkIndex(backend)
    paths = [f"s3://inputs/doc-{n:05d}.pdf" for n in range(GROUPS)]
    index.populate(paths[:200], 1)
    index.populate(paths[200:], 1)
    legacy = make_groups([f"s3://inputs/olmocr-{n}.pdf" for n in range(6)], 2)
    backend.write(layout.LEGACY_INDEX_KEY, encode_groups(legacy))
    groups = sorted(index.iter_groups(), key=lambda g: g.hash) + legacy
    objects: dict[str, bytes] = {}
    for n, group in enumerate(groups):
        h = group.hash
        if n % 5 in (0, 1):
            objects[layout.done_key(h)] = b""
            if n % 25 == 0:
                objects[layout.lock_key(h)] = held(h)  # finished, its lock not yet deleted
        elif n % 13 == 2:
            objects[layout.failed_key(h)] = json.dumps(
                {"hash": h, "paths": list(group.paths), "attempts": 3, "error": f"boom {n}"}
            ).encode()
            objects[layout.lock_key(h)] = held(h, LockState.FAILED)
        elif n % 17 == 3:
            objects[layout.lock_key(h)] = held(h, LockState.FAILED)  # its flag deleted by hand
        elif n % 11 == 4:
            objects[layout.lock_key(h)] = held(h)
        elif n % 7 == 4:
            objects[layout.lock_key(h)] = b""  # olmocr's
        elif n % 5 == 4:
            objects[layout.lock_key(h)] = held(h, LockState.RELEASED)
    objects.update({"done_flags/done_not-a-hash.flag": b"", "worker_locks/worker_" + "A" * 40 + ".lock": b"", "failed_flags/x.json": b"{}"})
    write_all(backend, objects)
    # Another workspace in the same bucket, whose flags must not be counted.
    other = S3Backend(s3_client=s3_client, bucket=bucket, prefix="ws-other")
    write_all(other, {layout.done_key(g.hash): b"" for g in groups[:300]} | {layout.failed_key(g.hash): b"{}" for g in groups[300:310]})
    return backend, groups


def test_status_on_s3_equals_a_recount_with_every_partitioning(counted_workspace):
    backend, _groups = counted_workspace
    recounted_at = time.monotonic()
    expected, failed = recount_status(backend)
    assert partition_digits(expected["groups"]) == 0
    assert min(expected["done"], expected["failed"], expected["locked"], expected["released"], expected["pending"]) >= 10, expected

    for digits in (None, 1):
        status = queue_status(backend, digits=digits)
        assert {k: v for k, v in status.items() if k != "wait_seconds"} == {k: v for k, v in expected.items() if k != "wait_seconds"}, (
            digits
        )
        # The live locks' stale_in shrinks as the clock runs.
        assert expected["wait_seconds"] - (time.monotonic() - recounted_at) - 1 <= status["wait_seconds"] <= expected["wait_seconds"]
    assert failed_groups(backend) == failed


def test_status_on_s3_costs_the_index_count_three_lists_a_partition_and_a_read_per_unflagged_lock(counted_workspace, s3_server):
    backend, _ = counted_workspace
    listed = {
        prefix: listed_hashes(backend, prefix, suffix)
        for prefix, suffix in (
            (layout.DONE_PREFIX, layout.DONE_SUFFIX),
            (layout.FAILED_PREFIX, layout.FAILED_SUFFIX),
            (layout.LOCKS_PREFIX, layout.LOCK_SUFFIX),
        )
    }
    unflagged = len(listed[layout.LOCKS_PREFIX] - listed[layout.DONE_PREFIX] - listed[layout.FAILED_PREFIX])
    index_client = counting_requests(s3_server.client())
    index_counts(S3Backend(s3_client=index_client, bucket=backend.bucket, prefix=backend.prefix))
    index_requests = request_counts(index_client)
    client = counting_requests(s3_server.client())

    queue_status(S3Backend(s3_client=client, bucket=backend.bucket, prefix=backend.prefix), digits=1)

    # The catalog (once to choose the partitions, once more to count the
    # index after the flags), olmocr's index (no segment), 16 partitions x
    # (failed, locks, done: each under 1,000 keys), the unflagged locks.
    assert not [op for op in index_requests if op not in ("GetObject", "HeadObject")]
    expected = dict(index_requests)
    expected["GetObject"] = expected.get("GetObject", 0) + 1 + unflagged
    expected["ListObjectsV2"] = 48
    assert request_counts(client) == expected


@pytest.mark.parametrize("lean", [True, False], ids=["keys-taken-out", "left-to-botocore"])
def test_list_keys_on_s3_pages_through_more_than_a_page_and_returns_every_name_as_written(s3_backend, monkeypatch, lean):
    odd = ["odd/a b.txt", "odd/plus+sign", "odd/100%", "odd/&amp;<x>", "odd/é ü", "odd/~tilde", "odd/%2F"]
    plain = [f"odd/k{n:04d}" for n in range(1005)]
    write_all(s3_backend, dict.fromkeys(odd + plain, b""))
    pages_read_lean = []
    keys_and_rest = s3_module._keys_and_rest

    def recording(body):
        split = keys_and_rest(body) if lean else None
        pages_read_lean.append(split is not None)
        return split

    monkeypatch.setattr(s3_module, "_keys_and_rest", recording)

    assert list(s3_backend.list_keys("odd/")) == sorted(odd + plain)
    assert list(s3_backend.list_keys("odd/k1")) == sorted(k for k in plain if k.startswith("odd/k1"))
    # The server's pages are in S3's plain shape: the keys were taken out of every one, not left to botocore's parser.
    assert pages_read_lean == [lean] * 3


def test_failures_on_s3_lists_every_failed_flag_in_hash_order_with_its_body(counted_workspace):
    backend, groups = counted_workspace
    flagged = sorted(
        h for key in backend.list_keys(layout.FAILED_PREFIX) if (h := layout.hash_from_key(key, layout.FAILED_PREFIX, layout.FAILED_SUFFIX))
    )

    failures = list_failures(backend)

    assert len(flagged) >= 10
    assert [f["hash"] for f in failures] == flagged
    paths = {g.hash: list(g.paths) for g in groups}
    assert all(f["paths"] == paths[f["hash"]] and f["error"].startswith("boom ") and f["attempts"] == 3 for f in failures)
