"""Start the local cloud server and deploy the stack into it."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Self

from s3wq.dev.local_s3 import LocalServer
from s3wq.dev.localcloud.deploy import LocalStack, deploy, synthesize

DEFAULT_BUCKET = "s3wq-local"


class LocalCloud(LocalServer):
    """The local cloud's server; everything it writes is under one folder of the temp directory, removed when it stops.

    The logs (``server.log``, and ``lambda/`` with one file per function) go
    to ``log_dir`` when given, to a new folder of the temp directory that is
    kept with ``keep_logs``, and otherwise to the folder that is removed.
    """

    name = "local cloud"
    own_session = True

    def __init__(
        self, *, port: int | None = None, log_dir: Path | None = None, extra_pythonpath: tuple[str, ...] = (), keep_logs: bool = False
    ):
        super().__init__(port)
        self.extra_pythonpath = extra_pythonpath
        self._tmp = tempfile.TemporaryDirectory(prefix="s3wq-localcloud-")
        self.keeps_logs = log_dir is not None or keep_logs
        self._made_log_dir = log_dir is None and keep_logs
        if log_dir is None:
            log_dir = Path(tempfile.mkdtemp(prefix="s3wq-localcloud-logs-")) if keep_logs else Path(self._tmp.name) / "logs"
        self.log_dir = Path(log_dir)
        self.stack: LocalStack | None = None

    def command(self) -> list[str]:
        extra = [arg for path in self.extra_pythonpath for arg in ("--pythonpath", path)]
        folders = ["--log-dir", str(self.log_dir / "lambda"), "--scratch-dir", str(Path(self._tmp.name) / "invocations")]
        return [sys.executable, "-m", "s3wq.dev.localcloud.server", "--port", str(self.port), *folders, *extra]

    def output(self) -> Any:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return open(self.log_dir / "server.log", "ab")

    def deploy(self, context: dict[str, Any] | None = None, *, bucket_name: str = DEFAULT_BUCKET) -> LocalStack:
        """Synthesize the CDK app with ``context`` and deploy the template here."""
        self.stack = deploy(synthesize(context or {}), endpoint=self.endpoint, bucket_name=bucket_name)
        return self.stack

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self._tmp.cleanup()  # no `with` block to do it
            if self._made_log_dir and not any(self.log_dir.iterdir()):
                self.log_dir.rmdir()  # refused before the server wrote a line (the port is taken): nothing to keep
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            super().__exit__(*exc)
        finally:
            self._tmp.cleanup()
