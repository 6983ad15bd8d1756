"""Hostile input: awkward keys end to end, empty and corrupt manifests, odd events, a corrupt index, a garbage lock.

Each bad input gets its one-line error (or error record), and every object
already in the bucket keeps its key and ETag.

Covered elsewhere and not repeated here: non-S3, blank and comment manifest
lines, CRLF, a corrupt .gz (tests/unit/test_sources.py); the index
round trip over arbitrary path strings and the claim protocol against a model
(hypothesis, tests/unit/test_index_encoding.py and test_claim_protocol.py);
garbage lock bodies on a local workspace (test_claim_protocol.py); group
hashes that are not 40 hex characters, and local keys with ``..``, absolute
paths, NUL or a symlink out of the root (tests/unit/test_config_layout.py);
``s3:TestEvent``, events without S3 records, the sample URL-encoded key and a
manifest deleted before populate reads it (tests/integration/test_handlers.py);
populate on a corrupt index, in-process on a local workspace
(tests/unit/test_populate.py).
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path
from urllib.parse import quote_plus

import pytest
import zstandard
from support import run_cli

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.cli import main as cli_main
from s3wq.index import encode_groups
from s3wq.protocol.claims import ClaimProtocol
from s3wq.store import layout

from .bucket_state import objects

EVENTS_DIR = Path(__file__).resolve().parent.parent / "events"
SAMPLE_EVENT_BUCKET = "s3wq-test-bucket"

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def one_line(stderr: str, start: str) -> str:
    assert stderr.count("\n") == 1 and stderr.startswith(start), stderr
    return stderr


@pytest.fixture
def busy_workspace(s3_client, bucket, s3_backend) -> list[str]:
    """Three groups: one done, one failed (lock marked failed), one held by a live lock -- so a command that wrongly went ahead changes something."""
    WorkIndex(s3_backend).populate([f"s3://{bucket}/inputs/doc-{n}.txt" for n in range(6)], 2)
    groups = sorted(WorkIndex(s3_backend).iter_groups(), key=lambda g: g.hash)
    protocol = ClaimProtocol(s3_backend, worker_id="busy", lease_seconds=900)
    done = protocol.claim(groups[0].hash)
    protocol.mark_done(done)
    protocol.release(done)
    protocol.finalize_failed(protocol.claim(groups[1].hash), groups[1], "RuntimeError: boom")
    protocol.claim(groups[2].hash)
    return [g.hash for g in groups]


# --- awkward keys, end to end -------------------------------------------------------------------


def key_of_bytes(size: int) -> str:
    """An S3 key of exactly ``size`` UTF-8 bytes, mostly two-byte characters, ending in .txt."""
    head, tail = "in/long-", ".txt"
    room = size - len(head) - len(tail)
    key = head + "é" * (room // 2) + "x" * (room % 2) + tail
    assert len(key.encode("utf-8")) == size
    return key


AWKWARD_KEYS = {
    "comma": "in/scan 1, final.txt",
    "double-quotes": 'in/the "best" scan.txt',
    "single-quote": "in/o'brien.txt",
    "spaces": "in/  two leading spaces and  two inner.txt",
    "folder-ending-in-a-space": "in/folder with a trailing space /page.txt",
    "plus": "in/a+b=c.txt",
    "percent": "in/100%25 literal %41.txt",
    "unicode": "in/café 日本語 😀.txt",
    "url-characters": "in/q?x=1&y=#2;3.txt",
    "backslash": "in/back\\slash.txt",
    "tab": "in/tab\tinside.txt",
    "1024-bytes": key_of_bytes(1024),
}
# A key with a carriage return cannot be written on a manifest line, but a glob lists it.
CR_KEY = "in-cr/carriage\rreturn.txt"


def test_awkward_s3_keys_survive_populate_and_a_worker_end_to_end(s3_client, bucket, s3_workspace, s3_backend, tmp_path):
    texts = {key: f"text of {name}\n" for name, key in {**AWKWARD_KEYS, "carriage-return": CR_KEY}.items()}
    for key, text in texts.items():
        s3_client.put_object(Bucket=bucket, Key=key, Body=text.encode("utf-8"))
    uris = {f"s3://{bucket}/{key}": text for key, text in texts.items()}
    first, *rest = [f"s3://{bucket}/{key}" for key in AWKWARD_KEYS.values()]
    lines = [first, "# awkward keys, one per line", "", *rest, rest[0]]  # the last line repeats an earlier one
    manifest = tmp_path / "manifest.txt"
    # As a Windows editor saves it: a byte-order mark in front of the first path.
    manifest.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode("utf-8") + b"\n")

    populated = run_cli("populate", s3_workspace, f"@{manifest}", f"s3://{bucket}/in-cr/*", "--group-size", "3", "--json")
    worked = run_cli("work", s3_workspace, "--processor", "text", "--worker-id", "awkward", "--json")

    assert populated.returncode == 0, populated.stderr
    assert json.loads(populated.stdout)["added_paths"] == len(uris)
    groups = list(WorkIndex(s3_backend).iter_groups())
    assert sorted(p for g in groups for p in g.paths) == sorted(uris)
    assert worked.returncode == 0, worked.stderr
    assert (json.loads(worked.stdout)["processed"], json.loads(worked.stdout)["failed"]) == (len(groups), 0)
    records = [json.loads(line) for g in groups for line in s3_backend.read(layout.result_key(g.hash)).body.decode("utf-8").splitlines()]
    assert {r["source"]: r["text"] for r in records} == uris
    assert [r for r in records if r.get("error")] == []
    print(
        f"\nawkward S3 keys: {len(uris)} keys in {len(groups)} groups, each read back and processed once; longest key {max(len(k.encode()) for k in texts)} bytes"
    )


# Newlines cannot be in a key the local S3 server serves; a local workspace and local inputs take them.
AWKWARD_FILE_NAMES = [
    "line\nbreak.txt",
    "carriage\rreturn.txt",
    'comma, "quotes".txt',
    " leading space.txt",
    "trailing space .txt",
    "tab\t.txt",
    "ünïcödé 😀.txt",
]


def test_awkward_local_file_names_including_newlines_survive_populate_and_a_worker(tmp_path, local_workspace, local_backend):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name in AWKWARD_FILE_NAMES:
        (inputs / name).write_text(f"text of {name!r}\n", encoding="utf-8")
    expected = {str((inputs / name).resolve()): f"text of {name!r}\n" for name in AWKWARD_FILE_NAMES}

    populated = run_cli("populate", local_workspace, str(inputs), "--group-size", "2", "--json")
    worked = run_cli("work", local_workspace, "--processor", "text", "--json")

    assert populated.returncode == 0, populated.stderr
    assert worked.returncode == 0, worked.stderr
    groups = list(WorkIndex(local_backend).iter_groups())
    assert sorted(p for g in groups for p in g.paths) == sorted(expected)
    records = [json.loads(line) for g in groups for line in local_backend.read(layout.result_key(g.hash)).body.decode("utf-8").splitlines()]
    assert {r["source"]: r["text"] for r in records} == expected


def test_a_manifest_line_of_1025_bytes_is_refused_naming_its_line_and_nothing_changes(
    s3_client, bucket, s3_workspace, busy_workspace, tmp_path, capsys
):
    manifest = tmp_path / "manifest.txt"
    manifest.write_text(f"# ok, then too long\ns3://{bucket}/in/ok.txt\ns3://{bucket}/{key_of_bytes(1025)}\n", encoding="utf-8")
    s3_client.put_object(Bucket=bucket, Key="in/ok.txt", Body=b"ok")  # every line is checked: the good one must be there
    before = objects(s3_client, bucket)

    code = cli_main(["populate", s3_workspace, f"@{manifest}"])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert f"{manifest}:3: S3 key longer than 1,024 bytes" in one_line(err, "s3wq: error: ")
    assert objects(s3_client, bucket) == before


# --- empty and corrupt manifests ---------------------------------------------------------------


EMPTY_MANIFESTS = {
    "zero-bytes.txt": b"",
    "comments-and-blanks.txt": b"# nothing to do yet\n\n   \n# still nothing\n",
    "empty.txt.gz": gzip.compress(b""),
    "empty.txt.zst": zstandard.ZstdCompressor().compress(b""),
    "zero-bytes.txt.zst": b"",
}


@pytest.mark.parametrize("name", list(EMPTY_MANIFESTS))
def test_an_empty_manifest_is_a_one_line_error_and_nothing_changes(s3_client, bucket, s3_workspace, busy_workspace, tmp_path, capsys, name):
    manifest = tmp_path / name
    manifest.write_bytes(EMPTY_MANIFESTS[name])
    before = objects(s3_client, bucket)

    code = cli_main(["populate", s3_workspace, f"@{manifest}"])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert "the sources name no paths" in one_line(err, "s3wq: error: ")
    assert objects(s3_client, bucket) == before


def manifest_lines(bucket: str, numbers: range) -> bytes:
    return "".join(f"s3://{bucket}/in/page-{n:05d}.pdf\n" for n in numbers).encode("utf-8")


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def two_zstd_frames_the_second_cut_short(bucket: str) -> bytes:
    # As a multi-frame writer (pzstd, concatenated files) leaves it when an upload or copy stops early:
    # the first 1,000 lines intact, the second 1,000 in a frame that never ends.
    compress = zstandard.ZstdCompressor().compress
    return compress(manifest_lines(bucket, range(1000))) + truncated(compress(manifest_lines(bucket, range(1000, 2000))))


CORRUPT_MANIFESTS = {
    "not-zstd.txt.zst": lambda bucket: b"s3://not/compressed at all\n",
    "truncated.txt.gz": lambda bucket: truncated(gzip.compress(manifest_lines(bucket, range(2000)))),
    "truncated.txt.zst": two_zstd_frames_the_second_cut_short,
}


@pytest.mark.parametrize("make", list(CORRUPT_MANIFESTS.values()), ids=list(CORRUPT_MANIFESTS))
def test_a_corrupt_compressed_manifest_is_a_one_line_error_and_nothing_changes(
    s3_client, bucket, s3_workspace, busy_workspace, tmp_path, capsys, request, make
):
    name = request.node.callspec.id
    manifest = tmp_path / name
    manifest.write_bytes(make(bucket))
    before = objects(s3_client, bucket)

    code = cli_main(["populate", s3_workspace, f"@{manifest}"])

    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    assert f"manifest {manifest} is unreadable" in one_line(err, "s3wq: error: ")
    assert objects(s3_client, bucket) == before


# --- events ------------------------------------------------------------------------------------


@pytest.fixture
def populate_handler(monkeypatch, s3_server, bucket):
    """The populate Lambda handler for a workspace in ``bucket``, each call a cold start without a state machine."""
    from helpers.lambda_context import LambdaContext

    from s3wq.config import ENV_AUTO_START, ENV_INPUT_LOCATIONS, ENV_STATE_MACHINE_ARN, ENV_WORKSPACE
    from s3wq.handlers import populate
    from s3wq.handlers.runtime import runtime

    monkeypatch.delenv(ENV_STATE_MACHINE_ARN, raising=False)
    monkeypatch.delenv(ENV_AUTO_START, raising=False)
    monkeypatch.setenv(ENV_WORKSPACE, f"s3://{bucket}/ws")
    monkeypatch.setenv(ENV_INPUT_LOCATIONS, f"s3://{bucket}")  # as the stack writes them for a bucket it created

    def call(event):
        runtime.cache_clear()
        return populate.handler(event, LambdaContext(30))

    yield call
    runtime.cache_clear()


def s3_event(bucket: str, encoded_key: str, event_name: str = "ObjectCreated:Put") -> dict:
    event = json.loads((EVENTS_DIR / "s3-put-manifest.json").read_text().replace(SAMPLE_EVENT_BUCKET, bucket))
    event["Records"][0]["s3"]["object"]["key"] = encoded_key
    event["Records"][0]["eventName"] = event_name
    return event


def s3_encoded(key: str) -> str:
    """A key as S3 writes it into an event notification: form-encoded, '+' for a space."""
    return quote_plus(key, safe="/")


def test_an_event_key_with_plus_percent_and_unicode_is_decoded_as_s3_encoded_it(populate_handler, s3_client, bucket, s3_backend):
    key = "ws/manifests/batch 7 + extra, 100% é 日本.txt"
    inputs = [f"s3://{bucket}/in/a+b.pdf", f"s3://{bucket}/in/100% é.pdf"]
    for path in inputs:
        s3_client.put_object(Bucket=bucket, Key=path.split("/", 3)[3], Body=b"%PDF-")
    s3_client.put_object(Bucket=bucket, Key=key, Body="\n".join(inputs).encode("utf-8"))
    encoded = s3_encoded(key)
    assert "+%2B+" in encoded and "%25" in encoded and "%C3%A9" in encoded

    [entry] = populate_handler(s3_event(bucket, encoded))["manifests"]

    assert entry["manifest"] == f"s3://{bucket}/{key}"
    assert (entry.get("error"), entry["added_paths"]) == (None, 2)
    assert sorted(p for g in WorkIndex(s3_backend).iter_groups() for p in g.paths) == sorted(inputs)


def test_an_event_for_an_empty_manifest_adds_nothing_and_changes_nothing(populate_handler, s3_client, bucket, busy_workspace):
    s3_client.put_object(Bucket=bucket, Key="ws/manifests/empty.txt", Body=b"# no inputs today\n")
    before = objects(s3_client, bucket)

    [entry] = populate_handler(s3_event(bucket, "ws/manifests/empty.txt"))["manifests"]

    assert (entry.get("error"), entry["added_paths"], entry["bad_lines"], entry["execution_started"]) == (None, 0, [], False)
    assert objects(s3_client, bucket) == before


def test_an_object_removed_event_is_ignored_and_changes_nothing(populate_handler, s3_client, bucket, busy_workspace):
    before = objects(s3_client, bucket)

    [entry] = populate_handler(s3_event(bucket, "ws/manifests/gone.txt", "ObjectRemoved:Delete"))["manifests"]

    assert entry == {"manifest": f"s3://{bucket}/ws/manifests/gone.txt", "ignored": "event ObjectRemoved:Delete"}
    assert objects(s3_client, bucket) == before


RECORDS_THAT_ARE_NOT_S3 = {
    "sqs": {"Records": [{"eventSource": "aws:sqs", "messageId": "1", "body": "{}"}]},
    "sns-carrying-no-s3-records": {"Records": [{"EventSource": "aws:sns", "Sns": {"Message": json.dumps({"AlarmName": "x"})}}]},
    "sns-message-not-json": {"Records": [{"EventSource": "aws:sns", "Sns": {"Message": "hello"}}]},
    "record-without-s3": {"Records": [{"eventName": "ObjectCreated:Put"}]},
    "records-not-a-list": {"Records": "s3://bucket/ws/manifests/a.txt"},
}


@pytest.mark.parametrize("event", list(RECORDS_THAT_ARE_NOT_S3.values()), ids=list(RECORDS_THAT_ARE_NOT_S3))
def test_records_that_are_not_s3_notifications_are_refused_as_bad_input(populate_handler, s3_client, bucket, busy_workspace, event):
    from s3wq.errors import BadInput

    before = objects(s3_client, bucket)

    with pytest.raises(BadInput):
        populate_handler(event)

    assert objects(s3_client, bucket) == before


# --- a corrupt index, through the command line on S3 ---------------------------------------------


def corrupt_catalog(s3_backend) -> str:
    s3_backend.write(layout.INDEX_CATALOG_KEY, b'{"format": "s3wq-index/1", "segments": [')
    return layout.INDEX_CATALOG_KEY


def catalog_with_hostile_numbers(s3_backend) -> str:
    # 1e999 parses as infinity, which int() cannot take: once an uncaught OverflowError.
    catalog = json.loads(s3_backend.read(layout.INDEX_CATALOG_KEY).body)
    catalog["segments"][0]["groups"] = "HOSTILE"
    s3_backend.write(layout.INDEX_CATALOG_KEY, json.dumps(catalog).replace('"HOSTILE"', "1e999").encode())
    return layout.INDEX_CATALOG_KEY


def catalog_with_a_huge_count(s3_backend) -> str:
    # More digits than Python will turn into an int.
    catalog = json.loads(s3_backend.read(layout.INDEX_CATALOG_KEY).body)
    catalog["segments"][0]["paths"] = "HUGE"
    s3_backend.write(layout.INDEX_CATALOG_KEY, json.dumps(catalog).replace('"HUGE"', "9" * 5000).encode())
    return layout.INDEX_CATALOG_KEY


def legacy_index_not_zstd(s3_backend) -> str:
    s3_backend.write(layout.LEGACY_INDEX_KEY, b"hash,path\n" + b"0" * 40 + b",s3://b/k\n")
    return layout.LEGACY_INDEX_KEY


def segment(s3_backend) -> str:
    catalog, _ = WorkIndex(s3_backend).read_catalog()
    return catalog.segments[0].key


def segment_row_without_a_hash(s3_backend) -> str:
    key = segment(s3_backend)
    s3_backend.write(key, zstandard.ZstdCompressor().compress(b"s3://b/a.pdf,s3://b/b.pdf\n"))
    return key


def segment_row_whose_hash_climbs_out(s3_backend) -> str:
    # A hash like this would put a lock outside worker_locks/ if a key were ever built from it.
    key = segment(s3_backend)
    s3_backend.write(key, zstandard.ZstdCompressor().compress(b"../../../results/x" + b"0" * 22 + b",s3://b/a.pdf\n"))
    return key


def segment_of_a_group_without_paths(s3_backend) -> str:
    key = segment(s3_backend)
    s3_backend.write(key, encode_groups([]) + zstandard.ZstdCompressor().compress(b"a" * 40 + b"\n"))
    return key


CORRUPTIONS = [
    corrupt_catalog,
    catalog_with_hostile_numbers,
    catalog_with_a_huge_count,
    legacy_index_not_zstd,
    segment_row_without_a_hash,
    segment_row_whose_hash_climbs_out,
    segment_of_a_group_without_paths,
]
COMMANDS = {
    "populate": lambda ws, bucket: ["populate", ws, f"s3://{bucket}/inputs/new.txt", "--no-check"],
    "work": lambda ws, bucket: ["work", ws, "--time-limit", "30"],
    "status": lambda ws, bucket: ["status", ws],
    "inspect": lambda ws, bucket: ["inspect", ws, "0" * 40],
}


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=[c.__name__ for c in CORRUPTIONS])
def test_a_corrupt_index_stops_every_command_with_one_line_naming_it_and_is_not_overwritten(
    s3_client, bucket, s3_workspace, s3_backend, busy_workspace, capsys, corrupt
):
    corrupt_key = corrupt(s3_backend)
    before = objects(s3_client, bucket)

    for name, command in COMMANDS.items():
        code = cli_main(command(s3_workspace, bucket))

        out, err = capsys.readouterr()
        if name == "status" and corrupt.__name__.startswith("segment_"):
            # status counts from the catalog and reads no segment (it must
            # stay fast at millions of groups): a damaged segment is found by
            # whoever loads it -- the commands above and below.
            assert code == 0, err
        else:
            assert (code, out) == (1, ""), (name, err)
            assert corrupt_key in one_line(err, "s3wq: failed: "), name
        assert objects(s3_client, bucket) == before, f"{name} changed the workspace"


# --- a garbage lock on S3 ------------------------------------------------------------------------


def test_a_garbage_lock_on_s3_is_held_until_stale_by_s3s_clock_then_taken_over(s3_client, bucket, s3_backend):
    WorkIndex(s3_backend).populate(["s3://inputs/garbage-lock.pdf"], 1)
    hash_ = layout.group_hash(["s3://inputs/garbage-lock.pdf"])
    garbage = b"\x00\xff{not a lock body"
    etag = s3_backend.create(layout.lock_key(hash_), garbage)
    written = time.monotonic()
    settings = WorkerSettings(time_limit=1, lease=1, foreign_lock_timeout=1)
    # Time enough for a foreign takeover, which checks again a moment after it (an olmocr PUT landing late).
    later = WorkerSettings(time_limit=10, lease=5, foreign_lock_timeout=1)
    calls = []

    early = Worker(s3_backend, lambda group, ctx: calls.append(ctx.attempt), settings, worker_id="early").run()

    assert (early.processed, early.conflicts, early.stopped_reason) == (0, 1, "locked_by_others")
    assert (s3_backend.read(layout.lock_key(hash_)).body, s3_backend.read(layout.lock_key(hash_)).etag) == (garbage, etag)
    rounds = 0
    while not calls and time.monotonic() - written < 10:
        rounds += 1
        time.sleep(0.2)
        late = Worker(s3_backend, lambda group, ctx: calls.append(ctx.attempt), later, worker_id=f"late-{rounds}").run()
    waited = time.monotonic() - written
    print(
        f"\ngarbage lock: held for {waited:.1f}s (foreign lock timeout 1 s, by S3's one-second clock), taken over by worker round {rounds}"
    )

    assert calls == [2]  # the garbage lock cost its unknown holder an attempt
    assert waited > settings.foreign_lock_timeout
    assert (late.processed, late.reclaimed) == (1, 1)
    assert json.loads(s3_backend.read(layout.done_key(hash_)).body)["attempt"] == 2
    assert list(s3_backend.list_keys("worker_locks/")) == []


def test_an_s3_event_delivered_through_sns_is_unwrapped_and_indexed(populate_handler, s3_client, bucket, s3_backend):
    # S3 -> SNS -> Lambda is a common fan-out; the S3 records ride in the SNS message.
    s3_client.put_object(Bucket=bucket, Key="inputs/a.txt", Body=b"a")
    s3_client.put_object(Bucket=bucket, Key="ws/manifests/via sns.txt", Body=f"s3://{bucket}/inputs/a.txt\n".encode())
    s3_event = {
        "Records": [
            {
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": bucket}, "object": {"key": "ws/manifests/via+sns.txt", "eTag": "x"}},
            }
        ]
    }
    event = {"Records": [{"EventSource": "aws:sns", "Sns": {"Message": json.dumps(s3_event)}}]}

    [entry] = populate_handler(event)["manifests"]

    assert entry["added_paths"] == 1
    assert [p for g in WorkIndex(s3_backend).iter_groups() for p in g.paths] == [f"s3://{bucket}/inputs/a.txt"]


# --- a lock with hostile numbers -----------------------------------------------------------------------


@pytest.mark.parametrize("number", ["1e999", "NaN", "-Infinity", "9" * 5000], ids=["1e999", "NaN", "-Infinity", "5000-digits"])
def test_a_lock_with_hostile_numbers_is_a_foreign_lock_to_every_command(s3_client, bucket, s3_workspace, s3_backend, capsys, number):
    WorkIndex(s3_backend).populate(["s3://inputs/hostile-lock.pdf"], 1)
    hash_ = layout.group_hash(["s3://inputs/hostile-lock.pdf"])
    body = {"owner": "x:1", "worker_id": "x", "attempt": 1, "lease_seconds": "N", "claimed_at": "", "state": "held", "write_id": "w"}
    written = time.monotonic()
    s3_backend.create(layout.lock_key(hash_), json.dumps(body).replace('"N"', number).encode())
    before = objects(s3_client, bucket)

    status_code = cli_main(["status", s3_workspace, "--json"])
    status = json.loads(capsys.readouterr().out)
    # The lock's age when status read it: at most the time since it was written, and S3's 1 s resolution.
    aged = time.monotonic() - written + 1
    inspect_code = cli_main(["inspect", s3_workspace, hash_, "--json"])
    inspected = json.loads(capsys.readouterr().out)
    work_code = cli_main(["work", s3_workspace, "--time-limit", "3", "--json"])
    report = json.loads(capsys.readouterr().out)

    assert (status_code, inspect_code, work_code) == (0, 0, 0)
    # Honoured as olmocr's locks are, for the foreign timeout: never a crash, never a lease of 1e999 s.
    assert (status["locked"], 1800 - aged <= status["wait_seconds"] <= 1804) == (1, True), status
    assert inspected["state"] == "locked" and inspected["lock"]["body"].startswith("unparsable")
    assert (report["processed"], report["stopped_reason"]) == (0, "locked_by_others")
    assert objects(s3_client, bucket) == before
