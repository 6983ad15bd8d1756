"""Run ``s3wq work`` as separate processes, the way a fleet of workers runs it, and read what they left."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

# Generous: eight workers, moto_server and pytest share two cores.
WORKER_TIMEOUT_SECONDS = 150


def run_workers(
    workspace: str,
    count: int,
    *,
    processor: str,
    env: Mapping[str, str],
    log_dir: Path,
    extra_args: Sequence[str] = (),
) -> list[dict]:
    """Start ``count`` workers at once, wait for all, and return their JSON reports.

    Output goes to files rather than pipes so that a chatty worker can never
    block on a full pipe while the test waits for another one.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    try:
        for i in range(count):
            command = [
                sys.executable,
                "-m",
                "s3wq",
                "work",
                workspace,
                "--worker-id",
                f"w{i}",
                "--json",
                "--processor",
                processor,
                *extra_args,
            ]
            with open(log_dir / f"w{i}.out", "wb") as out, open(log_dir / f"w{i}.err", "wb") as err:
                procs.append(subprocess.Popen(command, env=dict(env), stdout=out, stderr=err))
        codes = [p.wait(timeout=WORKER_TIMEOUT_SECONDS) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    reports = [json.loads(out.read_text()) if (out := log_dir / f"w{i}.out").stat().st_size else {} for i in range(count)]
    # A worker exits 1 when it recorded failed groups, and 0 otherwise.
    failures = {
        f"w{i}": (log_dir / f"w{i}.err").read_text() for i, code in enumerate(codes) if code != (1 if reports[i].get("failed") else 0)
    }
    assert not failures, f"workers exited with the wrong code: {failures}"
    return reports


def recorded_calls(record_dir: Path) -> Counter:
    """How many times each group hash was processed, from the recording processor's files."""
    return Counter(path.name.split(".", 1)[0] for path in record_dir.iterdir())
