"""Workspaces shared with olmocr's work queue, in both directions.

olmocr's format is rebuilt here from its description, independently of
s3wq's code: a group's hash is SHA-1 over its sorted paths' UTF-8 bytes with
no separator; the index ``work_index_list.csv.zstd`` is CSV rows
(QUOTE_MINIMAL, each stripped) joined by newlines and zstd-compressed in one
shot; done flags and locks are empty objects named
``done_flags/done_<hash>.flag`` and ``worker_locks/worker_<hash>.lock``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import subprocess
import sys
import threading
from collections import Counter

import pytest
import zstandard
from support import REPO_ROOT

from s3wq import Worker, WorkerSettings, WorkIndex, queue_status
from s3wq.index import olmocr as olmocr_module
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.store import S3Backend

# A lock is fresh for far longer than the worker may run, so it stays held.
SETTINGS = WorkerSettings(time_limit=60, lease=600)

# Names as real archives have them: spaces, commas and quotes force CSV quoting.
OLMOCR_GROUPS = [
    ["s3://archive/pdfs/a plain.pdf", "s3://archive/pdfs/b plain.pdf"],
    ["s3://archive/pdfs/comma, in name.pdf"],
    ['s3://archive/pdfs/quote "in" name.pdf', "s3://archive/pdfs/z.pdf", "s3://archive/pdfs/y.pdf"],
    ["s3://archive/pdfs/locked-1.pdf", "s3://archive/pdfs/locked-2.pdf"],
    ["s3://archive/pdfs/pending-1.pdf"],
    ["s3://archive/pdfs/pending-2.pdf", "s3://archive/pdfs/pending-3.pdf"],
    ["s3://archive/pdfs/ünïcödé.pdf"],
    ["s3://archive/pdfs/pending, with comma.pdf", "s3://archive/pdfs/pending-4.pdf"],
]
DONE_BY_OLMOCR = [0, 1, 2]
LOCKED_BY_OLMOCR = 3


def olmocr_hash(paths: list[str]) -> str:
    sha1 = hashlib.sha1()
    for path in sorted(paths):
        sha1.update(path.encode("utf-8"))
    return sha1.hexdigest()


def olmocr_row(fields: list[str]) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_MINIMAL).writerow(fields)
    return out.getvalue().strip()


def olmocr_index(groups: list[list[str]]) -> bytes:
    rows = [olmocr_row([olmocr_hash(paths), *sorted(paths)]) for paths in groups]
    return zstandard.ZstdCompressor().compress("\n".join(rows).encode("utf-8"))


def olmocr_done_key(hash_: str) -> str:
    return f"done_flags/done_{hash_}.flag"


def olmocr_lock_key(hash_: str) -> str:
    return f"worker_locks/worker_{hash_}.lock"


def write_result(group, ctx) -> None:
    ctx.write_result({"path": path, "worker": ctx.worker_id} for path in group.paths)


def test_s3wq_drains_an_olmocr_workspace_leaving_its_done_and_locked_groups_alone(backend):
    hashes = [olmocr_hash(paths) for paths in OLMOCR_GROUPS]
    backend.write("work_index_list.csv.zstd", olmocr_index(OLMOCR_GROUPS))
    for i in DONE_BY_OLMOCR:
        backend.write(olmocr_done_key(hashes[i]), b"")
    locked = hashes[LOCKED_BY_OLMOCR]
    lock_etag = backend.write(olmocr_lock_key(locked), b"")
    pending = {i: h for i, h in enumerate(hashes) if i not in DONE_BY_OLMOCR and i != LOCKED_BY_OLMOCR}

    Worker(backend, write_result, SETTINGS, worker_id="s3wq-worker").run()

    # Exactly the pending groups were processed, each with its own paths intact.
    assert list(backend.list_keys("results/")) == sorted(f"results/output_{h}.jsonl" for h in pending.values())
    for i, hash_ in pending.items():
        records = [json.loads(line) for line in backend.read(f"results/output_{hash_}.jsonl").body.decode("utf-8").splitlines()]
        assert [r["path"] for r in records] == sorted(OLMOCR_GROUPS[i])
    assert list(backend.list_keys("done_flags/")) == sorted(olmocr_done_key(h) for h in hashes if h != locked)
    for i in DONE_BY_OLMOCR:
        assert backend.read(olmocr_done_key(hashes[i])).body == b""  # olmocr's flags are untouched
    lock = backend.read(olmocr_lock_key(locked))
    assert (lock.body, lock.etag) == (b"", lock_etag)
    assert list(backend.list_keys("worker_locks/")) == [olmocr_lock_key(locked)]
    assert list(backend.list_keys("failed_flags/")) == []
    status = queue_status(backend).as_document()
    # olmocr's lock is honoured for olmocr's 1,800 s: the drain loop would wait that long for it.
    assert 1800 <= status.pop("wait_seconds") <= 1804
    assert status == {
        "groups": len(OLMOCR_GROUPS),
        "paths": sum(len(g) for g in OLMOCR_GROUPS),
        "done": len(OLMOCR_GROUPS) - 1,
        "failed": 0,
        "locked": 1,
        "claimed_ahead": 0,
        "pending": 0,
        "remaining": 1,
        "finished": len(OLMOCR_GROUPS) - 1,
        "released": 0,
        "unavailable": 0,
    }


def test_queue_status_counts_an_untouched_olmocr_workspace(backend):
    hashes = [olmocr_hash(paths) for paths in OLMOCR_GROUPS]
    backend.write("work_index_list.csv.zstd", olmocr_index(OLMOCR_GROUPS))
    for i in DONE_BY_OLMOCR:
        backend.write(olmocr_done_key(hashes[i]), b"")
    backend.write(olmocr_lock_key(hashes[LOCKED_BY_OLMOCR]), b"")

    status = queue_status(backend).as_document()
    assert 1800 <= status.pop("wait_seconds") <= 1804
    assert status == {
        "groups": 8,
        "paths": 14,
        "done": 3,
        "failed": 0,
        "locked": 1,
        "claimed_ahead": 0,
        "pending": 4,
        "remaining": 5,
        "finished": 3,
        "released": 0,
        "unavailable": 0,
    }


def test_s3wq_names_its_flags_and_locks_as_olmocr_does(backend):
    paths = [f"s3://archive/scans/scan {n:03d}.pdf" for n in range(20)]
    expected_groups = [sorted(paths)[i : i + 4] for i in range(0, 20, 4)]
    expected_hashes = {olmocr_hash(g) for g in expected_groups}
    held = olmocr_hash(expected_groups[0])
    WorkIndex(backend).populate(paths, 4)
    claim = ClaimProtocol(backend, worker_id="olmocr-stand-in", lease_seconds=600).claim(held)
    assert isinstance(claim, Claim)

    Worker(backend, write_result, SETTINGS, worker_id="s3wq-worker").run()

    assert list(backend.list_keys("done_flags/")) == sorted(olmocr_done_key(h) for h in expected_hashes - {held})
    assert list(backend.list_keys("worker_locks/")) == [olmocr_lock_key(held)]
    # s3wq's index rows carry the same hashes, and decode with a plain one-shot zstd read.
    rows = []
    for key in backend.list_keys("index/segments/"):
        text = zstandard.ZstdDecompressor().decompress(backend.read(key).body).decode("utf-8")
        rows.extend(csv.reader(io.StringIO(text)))
    assert {row[0]: row[1:] for row in rows} == {olmocr_hash(g): g for g in expected_groups}


def test_populating_an_olmocr_workspace_adds_only_the_paths_olmocr_did_not_index(backend):
    backend.write("work_index_list.csv.zstd", olmocr_index(OLMOCR_GROUPS))
    olmocr_paths = [p for group in OLMOCR_GROUPS for p in group]
    new_paths = ["s3://archive/pdfs/new-1.pdf", "s3://archive/pdfs/new-2.pdf"]

    result = WorkIndex(backend).populate(olmocr_paths + new_paths, 10)

    assert (result.added_paths, result.already_indexed) == (2, len(olmocr_paths))
    groups = {g.hash: sorted(g.paths) for g in WorkIndex(backend).iter_groups()}
    assert groups == {**{olmocr_hash(g): sorted(g) for g in OLMOCR_GROUPS}, olmocr_hash(new_paths): new_paths}
    # olmocr's own index object is left as olmocr wrote it.
    assert backend.read("work_index_list.csv.zstd").body == olmocr_index(OLMOCR_GROUPS)


# --- many workers over a big olmocr index -------------------------------------------------------------

BENCH_DIR = REPO_ROOT / "bench"
SPREAD_WORKERS = 4


def archive_paths(count: int) -> list[str]:
    awkward = ["plain", "comma, in name", 'quote "in" name', "ünïcödé", "two  spaces"]
    return [f"s3://archive/pdfs/{n:04d} {awkward[n % len(awkward)]}.pdf" for n in range(count)]


def populate_with_published_olmocr(workspace: str, paths: list[str], group_size: int) -> None:
    """olmocr's own populate_queue (the package the benchmarks install: the published_olmocr fixture), in a process of its own."""
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import boto3, olmocr_queue; "
        "olmocr_queue.populate(boto3.client('s3'), sys.argv[2], json.load(sys.stdin), int(sys.argv[3]))"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(BENCH_DIR), workspace, str(group_size)],
        input=json.dumps(paths),
        text=True,
        check=True,
        timeout=120,
    )


@pytest.mark.parametrize("populated_by", ["rebuilt-format", "published-olmocr"])
def test_workers_spread_over_an_olmocr_index_in_many_parts_each_run_every_group_once(populated_by, s3_server, bucket, monkeypatch, request):
    # Parts of 2 KiB and fetches of 512 bytes: a couple of hundred groups make
    # some twenty parts, each its own stretch to enter, read piece by piece.
    monkeypatch.setattr(olmocr_module, "LEGACY_PART_CHARS", 2048)
    monkeypatch.setattr(olmocr_module, "FETCH_BYTES", 512)
    paths, group_size = archive_paths(600), 3
    workspace = f"s3://{bucket}/ws"
    backend = S3Backend(s3_client=s3_server.client(), bucket=bucket, prefix="ws")
    ordered = sorted(paths)
    groups = [ordered[i : i + group_size] for i in range(0, len(ordered), group_size)]
    if populated_by == "published-olmocr":
        request.getfixturevalue("published_olmocr")  # only this case needs the package registry
        populate_with_published_olmocr(workspace, paths, group_size)
    else:
        backend.write("work_index_list.csv.zstd", olmocr_index(groups))
    hashes = {olmocr_hash(g): sorted(g) for g in groups}
    done_by_olmocr = sorted(hashes)[::7]
    for hash_ in done_by_olmocr:
        backend.write(olmocr_done_key(hash_), b"")
    index = WorkIndex(backend)
    refs = index.segment_refs()
    part_of = {g.hash: ref.part for ref in refs for g in index.load_ref(ref)}
    assert len(refs) >= 4 * SPREAD_WORKERS and sorted(part_of) == sorted(hashes)

    runs: Counter = Counter()
    first_group: dict[str, str] = {}
    lock = threading.Lock()

    def record(group, ctx) -> None:
        assert sorted(group.paths) == hashes[group.hash]
        with lock:
            runs[group.hash] += 1
            first_group.setdefault(ctx.worker_id, group.hash)

    workers = [
        Worker(
            S3Backend(s3_client=s3_server.client(), bucket=bucket, prefix="ws"),
            record,
            SETTINGS,
            worker_id=f"w{i}",
            position=i / SPREAD_WORKERS,
        )
        for i in range(SPREAD_WORKERS)
    ]
    reports: list = [None] * SPREAD_WORKERS
    threads = [threading.Thread(target=lambda i=i: reports.__setitem__(i, workers[i].run())) for i in range(SPREAD_WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)

    # A worker that ends while a peer holds a group leaves it to that peer (whose lease outlasts it).
    assert all(r is not None and r.stopped_reason in ("queue_empty", "locked_by_others") for r in reports), reports
    assert runs == Counter({h: 1 for h in hashes if h not in done_by_olmocr})
    assert list(backend.list_keys("done_flags/")) == sorted(olmocr_done_key(h) for h in hashes)
    assert list(backend.list_keys("worker_locks/")) == list(backend.list_keys("failed_flags/")) == []
    # Worker i of n entered the index i/n of the way through: its first group is from that part, not from the top.
    assert [part_of[first_group[f"w{i}"]] for i in range(SPREAD_WORKERS)] == [
        i * len(refs) // SPREAD_WORKERS for i in range(SPREAD_WORKERS)
    ]
