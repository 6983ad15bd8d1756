"""Parent side of local Lambda invocations: one process per invocation, killed at the function's timeout.

Each invocation runs the real handler from ``lambdas/`` in a fresh Python
process with a Lambda-like environment (the function's variables, its name,
memory and timeout, and AWS_ENDPOINT_URL pointing back at the local cloud).
A process per invocation is what makes the hard kill at the timeout possible
and what keeps a crashing processor from taking the cloud down with it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from s3wq.dev.local_s3 import FAKE_CREDENTIALS

# Lambda times an invocation from the end of its init (Python's start and
# the handler module's imports), and ends an init that takes longer than 10 s.
# The child says when its init is done; its clock and this process's kill
# both start then, so a handler is never killed while its own context says it
# has time left. The local limit is more generous than Lambda's: here dozens
# of inits share a couple of cores.
INIT_LIMIT_SECONDS = 60.0
# Invocations run at once, at most; the rest wait for a slot (where Lambda
# would throttle them and Step Functions retry). A process each: a thousand
# at once would not fit in this machine's memory.
CONCURRENCY_ENV = "S3WQ_LOCAL_LAMBDA_CONCURRENCY"
DEFAULT_CONCURRENCY = 64


@dataclass(frozen=True)
class Invocation:
    function_name: str
    handler: str
    timeout: float
    memory_mb: int
    environment: dict


@dataclass(frozen=True)
class Outcome:
    payload: bytes
    function_error: bool


# The child side, run by path when the functions run from an asset: it is not in the asset, and
# ``-m`` would need s3wq.dev on the path, the dev tree that the asset must not see.
INVOKE_SCRIPT = Path(__file__).resolve().with_name("invoke.py")


@dataclass(frozen=True)
class TaskAsset:
    """What the functions run from instead of ``lambdas/``: an interpreter with nothing installed, and the asset's folders."""

    python: str
    path: tuple[str, ...]


class LambdaRunner:
    def __init__(
        self,
        *,
        endpoint: str,
        lambdas_dir: Path,
        log_dir: Path,
        extra_pythonpath: tuple[str, ...] = (),
        scratch_dir: Path | None = None,
        asset: TaskAsset | None = None,
    ):
        self.endpoint = endpoint
        self.lambdas_dir = lambdas_dir
        # Where a processor outside lambdas/ can be found (tests); a deployed
        # function would carry it in its asset instead.
        self.extra_pythonpath = extra_pythonpath
        self.asset = asset
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Each invocation's working folder, under the cloud's own folder when
        # it has one: the cloud removes that even when this server is killed
        # before an invocation could remove its own.
        self.scratch_dir = scratch_dir
        if scratch_dir is not None:
            scratch_dir.mkdir(parents=True, exist_ok=True)
        self.invocations = 0
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(int(os.environ.get(CONCURRENCY_ENV) or DEFAULT_CONCURRENCY))

    def _environment(self, invocation: Invocation) -> dict:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "LANG": "C.UTF-8",
            **FAKE_CREDENTIALS,
            "AWS_REGION": FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_LAMBDA_FUNCTION_NAME": invocation.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(invocation.memory_mb),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(int(invocation.timeout)),
            "AWS_EXECUTION_ENV": "AWS_Lambda_python_local",
            "_HANDLER": invocation.handler,
            "PYTHONPATH": os.pathsep.join([str(self.lambdas_dir), *self.extra_pythonpath]),
            "PYTHONUNBUFFERED": "1",
        }
        if self.asset is not None:
            # The asset alone, as Lambda puts /var/task on sys.path; PYTHONSAFEPATH
            # (-P) reaches the processor host's own processes too.
            env.update({"PYTHONPATH": os.pathsep.join(self.asset.path), "PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"})
        env.update({k: str(v) for k, v in invocation.environment.items()})
        # No X-Ray daemon here: tracing would only fail to send.
        env["POWERTOOLS_TRACE_DISABLED"] = "true"
        return env

    def _bootstrap(self) -> list[str]:
        if self.asset is None:
            return [sys.executable, "-m", "s3wq.dev.localcloud.invoke"]
        return [self.asset.python, "-P", str(INVOKE_SCRIPT)]

    def invoke(self, invocation: Invocation, event: bytes) -> Outcome:
        """Run the handler, once a slot is free; an unhandled error or a timeout comes back as Lambda reports them."""
        with self._slots:
            return self._invoke(invocation, event)

    def _invoke(self, invocation: Invocation, event: bytes) -> Outcome:
        with self._lock:
            self.invocations += 1
            number = self.invocations
        log_path = self.log_dir / f"{invocation.function_name}.log"
        with tempfile.TemporaryDirectory(prefix="s3wq-invoke-", dir=self.scratch_dir) as scratch:
            result_file = Path(scratch) / "result.json"
            with open(log_path, "ab") as log:
                log.write(f"--- invocation {number} ---\n".encode())
                log.flush()
                ready_read, ready_write = os.pipe()
                try:
                    proc = subprocess.Popen(
                        [
                            *self._bootstrap(),
                            invocation.handler,
                            str(invocation.timeout),
                            str(result_file),
                            str(os.getpid()),
                            str(ready_write),
                        ],
                        stdin=subprocess.PIPE,
                        stdout=log,
                        stderr=log,
                        env=self._environment(invocation),
                        cwd=scratch,
                        pass_fds=(ready_write,),
                    )
                finally:
                    os.close(ready_write)
                with os.fdopen(ready_read, "rb") as ready:
                    timed_out = _run(proc, event, ready, invocation.timeout)
                if timed_out:
                    log.write(f"{timed_out}\n".encode())
                    error = {"errorType": "Sandbox.Timedout", "errorMessage": timed_out}
                    return Outcome(json.dumps(error).encode(), True)
            if not result_file.exists():
                error = {
                    "errorType": "Runtime.ExitError",
                    "errorMessage": f"RequestId: {number} Error: Runtime exited with code {proc.returncode}",
                }
                return Outcome(json.dumps(error).encode(), True)
            outcome = json.loads(result_file.read_text(encoding="utf-8"))
        if "error" in outcome:
            # Lambda logs an unhandled error too: an asynchronous invocation (an S3 event) has no caller to read it.
            with open(log_path, "a", encoding="utf-8") as log:
                error = outcome["error"]
                log.write(f"[ERROR] {error.get('errorType')}: {error.get('errorMessage')}\n{''.join(error.get('stackTrace') or [])}")
            return Outcome(json.dumps(outcome["error"]).encode(), True)
        return Outcome(json.dumps(outcome["result"]).encode(), False)

    def invoke_async(self, invocation: Invocation, event: bytes) -> None:
        """As Lambda's Event invocation type: accepted now, run in the background."""
        threading.Thread(target=self.invoke, args=(invocation, event), daemon=True, name=f"async-{invocation.function_name}").start()


def _run(proc: subprocess.Popen, event: bytes, ready: Any, timeout: float) -> str | None:
    """Feed ``event`` to the invocation and wait for it: None when it ended, else why it was killed.

    The timeout runs from when the child reports its init done (a byte on
    ``ready``); a child that exits before that (an import error) is not timed.
    """
    assert proc.stdin is not None
    try:
        proc.stdin.write(event)
        proc.stdin.close()
    except BrokenPipeError:  # it ended before reading the event: its exit code says how
        pass
    readable, _, _ = select.select([ready], [], [], INIT_LIMIT_SECONDS)
    if not readable:
        _kill(proc)
        return f"Init timed out after {INIT_LIMIT_SECONDS:.2f} seconds"
    ready.read(1)  # b"" (EOF) when the child ended without reporting: nothing to time
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return f"Task timed out after {timeout:.2f} seconds"
    return None


def _kill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()
