"""The deployed populate against hostile manifests: it stops with a recorded reason, in bounded time and memory.

A manifest of a few KB can decompress to gigabytes, or to millions of bad
lines; a glob can match the workspace's own keys or be repeated thousands of
times; a manifest can take longer than the invocation has. Each is driven
through the handler, against S3 over HTTP, and judged by what it leaves in the
bucket: the record under manifest_errors/, and what was indexed.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import textwrap

import pytest
import zstandard
from helpers.lambda_context import LambdaContext

from s3wq.config import ENV_AUTO_START, ENV_GROUP_SIZE
from s3wq.handlers import populate
from s3wq.handlers.runtime import runtime
from s3wq.index.manifests import DEPLOYED_MAX_MANIFEST_BYTES
from s3wq.index.sources import MAX_BAD_LINES_KEPT

from .conftest import HELPERS_DIR

# lambda_env is test_handlers' fixture (imported, so the tests' parameters redefine it: F811).
from .test_handlers import indexed_paths, manifest_event, objects

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

MB = 2**20
# Peak RSS of the child that runs populate: its imports take about 100 MB. Before the fix the
# bomb took over 1 GiB at once, and a million bad lines 876 MiB.
PEAK_RSS_LIMIT_MB = 400
# Only a guard against hanging: the assertions are on what was recorded.
HANG_GUARD_SECONDS = 60

# Runs the handler in a child, so its peak RSS is its own; the environment (workspace, endpoint) is inherited.
RUN_HANDLER = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from s3wq.handlers import populate
    from lambda_context import LambdaContext
    result = populate.handler(json.loads(sys.argv[2]), LambdaContext(900))
    # VmHWM, not ru_maxrss: Linux carries the parent's RSS into a child's ru_maxrss across fork and exec, so a
    # test process grown past the limit would fail it whatever populate took.
    peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"result": result, "peak_mb": peak_kb / 1024}))
    """
)


def run_handler_in_child(event: dict) -> tuple[dict, float]:
    done = subprocess.run(
        [sys.executable, "-c", RUN_HANDLER, str(HELPERS_DIR), json.dumps(event)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return figures["result"], figures["peak_mb"]


def record(s3_client, bucket: str, name: str) -> dict:
    return json.loads(s3_client.get_object(Bucket=bucket, Key=f"ws/manifest_errors/{name}.json")["Body"].read())


def zstd_bomb(size: int) -> bytes:
    """``size`` bytes of 'a' (no newline: one long line), compressed at zstd's best: a few tens of KB."""
    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=19).stream_writer(out, closefd=False) as writer:
        block = b"a" * MB
        for _ in range(size // MB):
            writer.write(block)
    return out.getvalue()


def test_a_zstd_manifest_that_decompresses_past_the_cap_is_refused_as_a_whole_in_bounded_memory(lambda_env, s3_client, bucket):
    lambda_env(**{ENV_AUTO_START: "false"})
    bomb = zstd_bomb(DEPLOYED_MAX_MANIFEST_BYTES + 64 * MB)
    assert len(bomb) < 64 * 1024
    key = "ws/manifests/bomb.txt.zst"
    s3_client.put_object(Bucket=bucket, Key=key, Body=bomb)

    result, peak_mb = run_handler_in_child(manifest_event(bucket, key))

    [entry] = result["manifests"]
    assert "manifest larger than 1,073,741,824 bytes decompressed" in entry["error"]
    doc = record(s3_client, bucket, "bomb.txt.zst")
    assert doc["bad_line_count"] == 1 and doc["bad_lines"][0]["line"] == 0
    assert "manifest larger than 1,073,741,824 bytes decompressed" in doc["bad_lines"][0]["reason"]
    assert not objects(s3_client, bucket, "ws/index/")
    assert peak_mb < PEAK_RSS_LIMIT_MB


def test_a_million_bad_lines_are_all_counted_the_first_kept_and_memory_stays_bounded(lambda_env, s3_client, bucket):
    lambda_env(**{ENV_AUTO_START: "false"})
    lines = 1_000_000
    body = gzip.compress(b"/x\n" * lines, compresslevel=9)
    assert len(body) < 8 * 1024
    key = "ws/manifests/bad.txt.gz"
    s3_client.put_object(Bucket=bucket, Key=key, Body=body)

    result, peak_mb = run_handler_in_child(manifest_event(bucket, key))

    [entry] = result["manifests"]
    assert entry["bad_line_count"] == lines and len(entry["bad_lines"]) == MAX_BAD_LINES_KEPT
    doc = record(s3_client, bucket, "bad.txt.gz")
    assert doc["bad_line_count"] == lines
    assert [b["line"] for b in doc["bad_lines"]] == list(range(1, MAX_BAD_LINES_KEPT + 1))
    assert peak_mb < PEAK_RSS_LIMIT_MB


def test_a_glob_repeated_on_many_lines_is_listed_once(lambda_env, s3_client, bucket, s3_backend):
    lambda_env(**{ENV_AUTO_START: "false", ENV_GROUP_SIZE: 5})
    inputs = {f"s3://{bucket}/inputs/doc-{n:02d}.txt" for n in range(12)}
    for path in inputs:
        s3_client.put_object(Bucket=bucket, Key=path.split("/", 3)[3], Body=b"x")
    key = "ws/manifests/globs.txt"
    s3_client.put_object(Bucket=bucket, Key=key, Body=f"s3://{bucket}/inputs/*.txt\n".encode() * 200)
    listings = []
    # Counted as they go out over HTTP: botocore's own event, on the client the handler uses.
    runtime().s3.meta.events.register("before-call.s3.ListObjectsV2", lambda **_: listings.append(1))

    [entry] = populate.handler(manifest_event(bucket, key), LambdaContext(30))["manifests"]

    assert entry.get("error") is None and entry["added_paths"] == len(inputs)
    assert indexed_paths(s3_backend) == inputs
    assert len(listings) == 1


def test_a_glob_over_the_workspace_bucket_does_not_index_the_workspaces_own_keys(lambda_env, s3_client, bucket, s3_backend):
    lambda_env(**{ENV_AUTO_START: "false", ENV_GROUP_SIZE: 5})
    inputs = {f"s3://{bucket}/inputs/doc-{n}.txt" for n in range(3)}
    for path in inputs:
        s3_client.put_object(Bucket=bucket, Key=path.split("/", 3)[3], Body=b"x")
    s3_client.put_object(Bucket=bucket, Key="ws/results/output_0.jsonl", Body=b"{}")
    key = "ws/manifests/everything.txt"
    s3_client.put_object(Bucket=bucket, Key=key, Body=f"s3://{bucket}/*\n".encode())

    [entry] = populate.handler(manifest_event(bucket, key), LambdaContext(30))["manifests"]

    assert entry.get("error") is None
    assert indexed_paths(s3_backend) == inputs
    # Run again over the index it wrote: still only the inputs.
    s3_client.put_object(Bucket=bucket, Key="ws/manifests/again.txt", Body=f"s3://{bucket}/*\n".encode())
    [again] = populate.handler(manifest_event(bucket, "ws/manifests/again.txt"), LambdaContext(30))["manifests"]
    assert (again.get("error"), again["added_paths"]) == (None, 0)
    assert indexed_paths(s3_backend) == inputs


def test_populate_out_of_time_stops_with_a_recorded_reason_and_indexes_nothing(lambda_env, s3_client, bucket):
    lambda_env(**{ENV_AUTO_START: "false"})
    s3_client.put_object(Bucket=bucket, Key="inputs/doc.txt", Body=b"x")
    key = "ws/manifests/slow.txt"
    s3_client.put_object(Bucket=bucket, Key=key, Body=f"s3://{bucket}/inputs/doc.txt\n".encode() * 10)

    # No time left at all: the first line read is past the deadline, however fast the machine.
    [entry] = populate.handler(manifest_event(bucket, key), LambdaContext(0))["manifests"]

    assert "populate ran out of time" in entry["error"]
    doc = record(s3_client, bucket, "slow.txt")
    assert [b["line"] for b in doc["bad_lines"]] == [0]
    assert "populate ran out of time" in doc["bad_lines"][0]["reason"] and "nothing indexed" in doc["bad_lines"][0]["reason"]
    assert not objects(s3_client, bucket, "ws/index/")
