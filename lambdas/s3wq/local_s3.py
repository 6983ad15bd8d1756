"""An S3 endpoint on a loopback port: a ``moto_server`` process, for the demo and the tests.

It is a separate process spoken to over HTTP, so everything s3wq does against
it -- conditional writes, retries, concurrency between worker processes -- is
the same code path as against AWS.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any

# moto accepts any credentials; real-looking names keep botocore from
# searching ~/.aws and the instance metadata service.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalS3:
    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        """Environment variables that point any AWS SDK or CLI at this endpoint."""
        return {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def start(self, timeout: float = 30.0) -> "LocalS3":
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with code {self.process.returncode} (is moto[server] installed?)")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.endpoint} within {timeout:.0f}s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def client(self) -> Any:
        """An S3 client on this endpoint (credentials passed explicitly, environment untouched)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            config=Config(retries={"mode": "standard", "max_attempts": 8}, max_pool_connections=32),
        )

    def __enter__(self) -> "LocalS3":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def apply_env(server: LocalS3) -> None:
    """Point this process (and the processes it starts) at ``server``."""
    os.environ.update(server.env())
