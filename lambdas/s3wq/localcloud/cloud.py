"""Start the local cloud server and deploy the stack into it."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from ..local_s3 import FAKE_CREDENTIALS, free_port
from .deploy import LocalStack, deploy, synthesize

DEFAULT_BUCKET = "s3wq-local"


class LocalCloud:
    def __init__(self, *, port: int | None = None, log_dir: Path | None = None, extra_pythonpath: tuple[str, ...] = ()):
        self.extra_pythonpath = extra_pythonpath
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._tmp = None if log_dir else tempfile.TemporaryDirectory(prefix="s3wq-localcloud-")
        self.log_dir = Path(log_dir or self._tmp.name)
        self.process: subprocess.Popen | None = None
        self.stack: LocalStack | None = None

    def env(self) -> dict[str, str]:
        return {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def start(self, timeout: float = 60.0) -> "LocalCloud":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        server_log = open(self.log_dir / "server.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "s3wq.localcloud.server", "--port", str(self.port), "--log-dir", str(self.log_dir / "lambda")]
            + [arg for path in self.extra_pythonpath for arg in ("--pythonpath", path)],
            stdout=server_log,
            stderr=server_log,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the local cloud exited with code {self.process.returncode}; see {self.log_dir / 'server.log'}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the local cloud did not answer on {self.endpoint} within {timeout:.0f}s")

    def deploy(self, context: dict[str, Any] | None = None, *, bucket_name: str = DEFAULT_BUCKET) -> LocalStack:
        template = synthesize(context or {})
        self.stack = deploy(template, endpoint=self.endpoint, bucket_name=bucket_name)
        return self.stack

    def client(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            config=Config(retries={"mode": "standard", "max_attempts": 8}),
        )

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> "LocalCloud":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
