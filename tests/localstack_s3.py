"""LocalStack's S3 on a loopback port, without Docker: the store of the optional LocalStack tier.

``S3WQ_TEST_STORE=localstack`` makes the session's S3 endpoint this server
instead of the moto one (see conftest.py; ``make test-localstack`` sets it).

LocalStack's Docker image runs ``python -m localstack.runtime.main``, the
runtime's entry point; installed from PyPI (``localstack-core[base-runtime]``)
it runs the same way straight on the host. Its CLI's ``localstack start``
would start the Docker image instead. The runtime needs Python 3.13 and
packages that clash with ours (it pins boto3 to its own release), so it runs
as a child process from its own venv, and the tests keep theirs.

What it is told, and why:

* ``GATEWAY_LISTEN``: its one HTTP port, on loopback (default 0.0.0.0:4566).
* ``SERVICES=s3`` and ``EAGER_SERVICE_LOADING=1``: load S3 alone, before the
  health check says it runs, so the first test does not pay for the loading.
* ``DNS_ADDRESS=0``: no DNS server (it would bind port 53 on every address).
* ``DISABLE_EVENTS=1``: no usage analytics sent out.
* ``SKIP_SSL_CERT_DOWNLOAD=1``: a self-signed certificate made locally
  instead of one downloaded at start.
* ``FILESYSTEM_ROOT`` and ``XDG_CACHE_HOME``: a temporary directory for its
  state and its plugin index, rather than its own package directory and the
  user's home.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from s3wq.dev.local_s3 import LocalServer

STORE_ENV = "S3WQ_TEST_STORE"
PYTHON_ENV = "S3WQ_LOCALSTACK_PYTHON"
# The tier's venv, as `make test-localstack` creates it.
DEFAULT_PYTHON = Path(__file__).resolve().parent.parent / ".venv-localstack" / "bin" / "python"
HEALTH_PATH = "/_localstack/health"


class LocalStackS3(LocalServer):
    """LocalStack's S3 runtime as a child process of ``python``: a venv with requirements-localstack.txt installed.

    By default, the Python that ``S3WQ_LOCALSTACK_PYTHON`` names, else the tier's venv.
    LocalStack 2026.3 checks If-None-Match and If-Match on PUT in one step with
    the write, and answers a DELETE with If-Match with 501 NotImplemented (the
    backend raises ConditionalDeleteUnsupported; support.deletes_on_a_condition).
    """

    name = "LocalStack S3"

    def __init__(self, python: str | os.PathLike | None = None, port: int | None = None):
        super().__init__(port)
        self.python = str(python or os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON)
        self._state_dir: tempfile.TemporaryDirectory | None = None

    @property
    def log_path(self) -> Path:
        assert self._state_dir is not None
        return Path(self._state_dir.name) / "localstack.log"

    def command(self) -> list[str]:
        return [self.python, "-m", "localstack.runtime.main"]

    def runtime_env(self, state_dir: str) -> dict[str, str]:
        # Nothing of the session's AWS settings: LocalStack's own clients must not be pointed anywhere.
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        return {
            **env,
            "GATEWAY_LISTEN": f"127.0.0.1:{self.port}",
            "SERVICES": "s3",
            "EAGER_SERVICE_LOADING": "1",
            "DNS_ADDRESS": "0",
            "DISABLE_EVENTS": "1",
            "SKIP_SSL_CERT_DOWNLOAD": "1",
            "FILESYSTEM_ROOT": os.path.join(state_dir, "filesystem"),
            "XDG_CACHE_HOME": os.path.join(state_dir, "cache"),
        }

    def start(self, timeout: float = 120.0) -> LocalStackS3:
        if not Path(self.python).exists():
            raise RuntimeError(f"no Python for LocalStack at {self.python}: run `make test-localstack`, or set {PYTHON_ENV}")
        self._check_port_free()
        self._state_dir = tempfile.TemporaryDirectory(prefix="s3wq-localstack-")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.runtime_env(self._state_dir.name), cwd=self._state_dir.name
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.name} exited with code {self.process.returncode}:\n{self._log_tail()}")
            if self._s3_running():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the {self.name} did not answer on {self.endpoint} within {timeout:.0f}s:\n{self._log_tail()}")

    def _s3_running(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}{HEALTH_PATH}", timeout=1) as response:
                return json.load(response).get("services", {}).get("s3") in ("running", "available")
        except (OSError, ValueError):
            return False

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        super().stop()
        if self._state_dir is not None:
            self._state_dir.cleanup()
            self._state_dir = None
