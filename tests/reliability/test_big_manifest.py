"""A 100 MB manifest is read as a stream: memory stays flat however big it is. Peak RSS is measured in a child process.

Reading is bounded; indexing is not, by design: populate holds the new paths
in memory to deduplicate, sort and group them. Its cost per manifest byte is
measured and bounded here, at 10 MB x S3WQ_RELIABILITY_SCALE.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from .scale import scale

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="peak RSS is read from Linux's /proc")

MB = 2**20
STREAM_SIZE = 100 * MB
# What reading a manifest of any size may add to the reader's peak RSS: buffers, not lines.
STREAM_GROWTH_LIMIT_MB = 32
# Populate keeps each new path as a str in a list, a set and a sorted list:
# about 3 bytes per manifest byte (3.4 measured at 10 MB, 3.0 at 100 MB).
POPULATE_BYTES_PER_MANIFEST_BYTE = 5

# Peak RSS after start-up: the kernel's high-water mark, reset once imports are done
# (writing 5 to /proc/self/clear_refs), so an import's transient peak cannot hide the run's.
MEASURE = """
import re

def _status_mb(field):
    with open("/proc/self/status") as status:
        return int(re.search(field + r":\\s+(\\d+)", status.read()).group(1)) / 1024

def start_measuring():
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return _status_mb("VmRSS")

def peak_mb():
    return _status_mb("VmHWM")
"""

READ_MANIFEST = (
    MEASURE
    + """
import json, sys
from s3wq.store import make_s3_client
from s3wq.index.manifests import iter_manifest

client = make_s3_client()
baseline = start_measuring()
lines = sum(1 for _ in iter_manifest(sys.argv[1], lambda: client))
print(json.dumps({"lines": lines, "baseline_mb": baseline, "peak_mb": peak_mb()}))
"""
)

POPULATE = (
    MEASURE
    + """
import json, sys, time
import s3wq.cli

baseline = start_measuring()
started = time.monotonic()
code = s3wq.cli.main(sys.argv[1:])
figures = {"exit": code, "baseline_mb": baseline, "peak_mb": peak_mb(), "seconds": round(time.monotonic() - started, 1)}
print(json.dumps(figures), file=sys.stderr)
"""
)


def write_manifest(path: Path, size: int, compressed: Path | None = None) -> int:
    """Distinct S3 paths, about 75 bytes a line, up to ``size`` bytes; optionally a zstd copy alongside. Return the line count."""
    written = lines = 0
    with open(path, "wb") as plain, open(compressed or os.devnull, "wb") as raw:
        zstd = zstandard.ZstdCompressor().stream_writer(raw) if compressed else None
        while written < size:
            chunk = "".join(
                f"s3://input-bucket/scans/batch-{n // 1000:05d}/page-{n:09d}.pdf\n" for n in range(lines, lines + 10000)
            ).encode()
            plain.write(chunk)
            if zstd:
                zstd.write(chunk)
            written += len(chunk)
            lines += 10000
        if zstd:
            zstd.flush(zstandard.FLUSH_FRAME)
    return lines


def child(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300, env=os.environ.copy())


def test_a_100_mb_manifest_streams_from_disk_and_from_s3_in_bounded_memory(s3_client, bucket, tmp_path):
    plain, compressed = tmp_path / "big.txt", tmp_path / "big.txt.zst"
    lines = write_manifest(plain, STREAM_SIZE, compressed)
    s3_client.upload_file(str(compressed), bucket, "manifests/big.txt.zst")
    sizes = {"plain_mb": round(plain.stat().st_size / MB, 1), "zst_mb": round(compressed.stat().st_size / MB, 2)}

    try:
        runs = {"local .txt": child(READ_MANIFEST, str(plain)), "s3 .txt.zst": child(READ_MANIFEST, f"s3://{bucket}/manifests/big.txt.zst")}
    finally:
        plain.unlink()
        compressed.unlink()

    figures = {}
    for name, run in runs.items():
        assert run.returncode == 0, run.stderr
        doc = json.loads(run.stdout)
        figures[name] = {"lines": doc["lines"], "peak_rss_growth_mb": round(doc["peak_mb"] - doc["baseline_mb"], 1)}
    print(f"\n100 MB manifest, streamed: {json.dumps({**sizes, **figures})}")
    for name, doc in figures.items():
        assert doc["lines"] == lines, name
        assert doc["peak_rss_growth_mb"] < STREAM_GROWTH_LIMIT_MB, name


def test_populate_memory_grows_with_the_paths_it_indexes_at_a_bounded_rate(tmp_path):
    manifest = tmp_path / "manifest.txt"
    lines = write_manifest(manifest, 10 * MB * scale())
    manifest_mb = manifest.stat().st_size / MB

    run = child(POPULATE, "populate", str(tmp_path / "ws"), f"@{manifest}", "--group-size", "100", "--no-check", "--json")

    assert run.returncode == 0, run.stderr
    figures = json.loads(run.stderr.strip().splitlines()[-1])
    assert figures["exit"] == 0
    assert json.loads(run.stdout)["added_paths"] == lines
    growth = figures["peak_mb"] - figures["baseline_mb"]
    print(
        f"\npopulate of a {manifest_mb:.0f} MB manifest ({lines} paths): peak RSS +{growth:.0f} MB "
        f"({growth / manifest_mb:.1f} bytes per manifest byte, {growth * MB / lines:.0f} per path), {figures['seconds']} s"
    )
    assert growth <= POPULATE_BYTES_PER_MANIFEST_BYTE * manifest_mb
