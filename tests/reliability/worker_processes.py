"""``s3wq work`` processes as a user starts them, and whether a process still runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen
    out: Path
    err: Path

    def wait(self, timeout: float = 90) -> int:
        return self.process.wait(timeout=timeout)

    def report(self) -> dict:
        return json.loads(self.out.read_text())

    def stderr(self) -> str:
        return self.err.read_text()


def start_worker(workspace: str, name: str, *args: str, processor: str, env: dict, log_dir: Path) -> WorkerProcess:
    """``s3wq work WORKSPACE --worker-id NAME --json --processor PROCESSOR ARGS...`` in its own process, its output in ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out, err = log_dir / f"{name}.out", log_dir / f"{name}.err"
    command = [sys.executable, "-m", "s3wq", "work", workspace, "--worker-id", name, "--json", "--processor", processor, *args]
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen(command, env=env, stdout=stdout, stderr=stderr)
    return WorkerProcess(name, process, out, err)


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs: a zombie nobody has reaped yet runs nothing."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False
