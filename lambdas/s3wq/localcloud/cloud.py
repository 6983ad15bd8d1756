"""Start the local cloud server and deploy the stack into it."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from ..local_s3 import LocalServer
from .deploy import LocalStack, deploy, synthesize

DEFAULT_BUCKET = "s3wq-local"


class LocalCloud(LocalServer):
    name = "local cloud"

    def __init__(
        self, *, port: int | None = None, log_dir: Path | None = None, extra_pythonpath: tuple[str, ...] = (), keep_logs: bool = False
    ):
        super().__init__(port)
        self.extra_pythonpath = extra_pythonpath
        # keep_logs: the Lambdas' logs outlive the cloud (`local up`: read them after Ctrl-C).
        self._tmp = None if log_dir or keep_logs else tempfile.TemporaryDirectory(prefix="s3wq-localcloud-")
        if log_dir is None:
            log_dir = Path(tempfile.mkdtemp(prefix="s3wq-localcloud-")) if keep_logs else Path(self._tmp.name)
        self.log_dir = Path(log_dir)
        self.stack: LocalStack | None = None

    def command(self) -> list[str]:
        extra = [arg for path in self.extra_pythonpath for arg in ("--pythonpath", path)]
        return [sys.executable, "-m", "s3wq.localcloud.server", "--port", str(self.port), "--log-dir", str(self.log_dir / "lambda"), *extra]

    def output(self) -> Any:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return open(self.log_dir / "server.log", "ab")

    def deploy(self, context: dict[str, Any] | None = None, *, bucket_name: str = DEFAULT_BUCKET) -> LocalStack:
        """Synthesize the CDK app with ``context`` and deploy the template here."""
        self.stack = deploy(synthesize(context or {}), endpoint=self.endpoint, bucket_name=bucket_name)
        return self.stack

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        if self._tmp is not None:
            self._tmp.cleanup()
