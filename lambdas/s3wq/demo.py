"""``s3wq demo``: the whole job on one machine against an embedded local S3.

It starts a local S3 endpoint, uploads sample documents and a manifest,
populates the workspace from the manifest, drains it with several worker
*processes* (each its own ``s3wq work``), and shows progress and a summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .backends import S3Backend
from .index import WorkIndex
from .local_s3 import LocalS3
from .samples import make_pdf, sample_text
from .queue import queue_status
from .sources import SourceExpander

BUCKET = "s3wq-demo"
WORKSPACE = f"s3://{BUCKET}/workspace"
MANIFEST_KEY = "workspace/manifests/demo-manifest.txt"



def upload_samples(s3, count: int) -> None:
    """Every fourth input a PDF, the rest text; names with spaces and commas, as real archives have them."""
    for number in range(count):
        if number % 4 == 3:
            body = make_pdf([[f"Sample PDF {number}, page 1."], sample_text(number).splitlines()])
            key = f"inputs/scan {number:04d}, page 1.pdf"
        else:
            body = sample_text(number).encode()
            key = f"inputs/doc {number:04d}, part {number % 3}.txt"
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)


def run_demo(*, workers: int, inputs: int, group_size: int, processor: str, as_json: bool) -> int:
    say = (lambda *a: None) if as_json else (lambda *a: print(*a, flush=True))
    with LocalS3() as server:
        say(f"local S3 endpoint: {server.endpoint}")
        s3 = server.client()
        s3.create_bucket(Bucket=BUCKET)
        upload_samples(s3, inputs)
        manifest = f"# demo manifest: one source per line\ns3://{BUCKET}/inputs/*.txt\ns3://{BUCKET}/inputs/*.pdf\n"
        s3.put_object(Bucket=BUCKET, Key=MANIFEST_KEY, Body=manifest.encode())
        say(f"uploaded {inputs} documents and s3://{BUCKET}/{MANIFEST_KEY}")

        backend = S3Backend(s3_client=s3, bucket=BUCKET, prefix="workspace")
        paths = SourceExpander(s3).expand([f"@s3://{BUCKET}/{MANIFEST_KEY}"]).paths
        populated = WorkIndex(backend).populate(paths, group_size)
        say(f"populated {populated.added_paths} paths into {populated.added_groups} groups")

        env = {**os.environ, **server.env()}
        started = time.monotonic()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "s3wq", "work", WORKSPACE, "--worker-id", f"demo-{i}", "--worker-index", str(i), "--workers", str(workers),
                 "--processor", processor, "--time-limit", "120", "--json"],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(workers)
        ]
        say(f"started {workers} worker processes")
        while any(p.poll() is None for p in procs):
            status = queue_status(backend)
            elapsed = time.monotonic() - started
            say(f"  {elapsed:5.1f}s  done {status['done']}/{status['groups']}  failed {status['failed']}  locked {status['locked']}  pending {status['pending']}")
            time.sleep(0.5)
        reports = [json.loads(p.stdout.read() or "{}") for p in procs]
        codes = [p.wait() for p in procs]
        elapsed = time.monotonic() - started
        status = queue_status(backend)
        sample = None
        result_keys = list(backend.list_keys("results/"))
        for key in result_keys:
            records = [json.loads(line) for line in backend.read(key).body.decode().splitlines()]
            pdfs = [r for r in records if r.get("metadata", {}).get("content_type") == "application/pdf"]
            if pdfs or (records and sample is None):
                sample = {"key": f"{WORKSPACE}/{key}", "record": (pdfs or records)[0]}
            if pdfs:
                break

    summary = {"status": status, "seconds": round(elapsed, 2), "workers": reports, "worker_exit_codes": codes, "results": len(result_keys), "sample_result": sample}
    ok = status["remaining"] == 0 and status["failed"] == 0 and not any(codes)
    if as_json:
        print(json.dumps(summary))
    else:
        say(f"\n{'worker':<10}{'processed':>10}{'failed':>8}{'conflicts':>10}  stopped")
        for r in reports:
            say(f"{r.get('worker_id', '?'):<10}{r.get('processed', 0):>10}{r.get('failed', 0):>8}{r.get('conflicts', 0):>10}  {r.get('stopped_reason', '?')}")
        say(f"\n{status['done']}/{status['groups']} groups done, {status['failed']} failed, in {elapsed:.1f}s; {len(result_keys)} result files")
        if sample:
            say(f"sample result {sample['key']}:\n  {json.dumps(sample['record'])[:300]}")
        say("demo " + ("succeeded" if ok else "FAILED"))
    return 0 if ok else 1
