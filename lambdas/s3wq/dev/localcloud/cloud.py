"""Start the local cloud server and deploy the stack into it."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Self

from s3wq.dev.local_s3 import LocalServer
from s3wq.dev.localcloud.asset import CACHE_ENV, AssetSource, build_task_asset, check_loads
from s3wq.dev.localcloud.deploy import LocalStack, deploy, synthesize
from s3wq.dev.localcloud.runner import TaskAsset
from s3wq.processors.vlm.settings import ENV_ENDPOINT

DEFAULT_BUCKET = "s3wq-local"


class LocalCloud(LocalServer):
    """The local cloud's server; everything it writes is under one folder of the temp directory, removed when it stops.

    The logs (``server.log``, and ``lambda/`` with one file per function) go
    to ``log_dir`` when given, to a new folder of the temp directory that is
    kept with ``keep_logs``, and otherwise to the folder that is removed.

    With a ``processor`` (a processor folder, or a built-in whose extra its
    worker image carries), the functions run from the asset built for it
    (:mod:`s3wq.dev.localcloud.asset`), isolated from this process's packages;
    the pip part of that asset is kept in ``asset_cache`` (default: the
    S3WQ_LOCAL_ASSET_CACHE folder, else this cloud's own folder).

    ``vlm_endpoint`` is the model's endpoint for ``--processor vlm`` or ``auto``: deployed as ``-c vlmEndpoint``,
    and in the environment the processor is checked to load in (its ``prepare()`` needs it).
    """

    name = "local cloud"
    own_session = True

    def __init__(
        self,
        *,
        port: int | None = None,
        log_dir: Path | None = None,
        extra_pythonpath: tuple[str, ...] = (),
        keep_logs: bool = False,
        processor: AssetSource | None = None,
        asset_cache: Path | None = None,
        check_processor: bool = False,
        vlm_endpoint: str | None = None,
    ):
        super().__init__(port)
        self.extra_pythonpath = extra_pythonpath
        self.processor = processor
        self._tmp = tempfile.TemporaryDirectory(prefix="s3wq-localcloud-")
        # Absolute: the functions import from it whatever their working folder.
        self.asset_cache = Path(asset_cache or os.environ.get(CACHE_ENV) or Path(self._tmp.name) / "asset-cache").absolute()
        self.asset: TaskAsset | None = None
        # The command line refuses a processor that does not load before the server starts; the tests see it fail in a Lambda.
        self.check_processor = check_processor
        self.keeps_logs = log_dir is not None or keep_logs
        self._made_log_dir = log_dir is None and keep_logs
        if log_dir is None:
            log_dir = Path(tempfile.mkdtemp(prefix="s3wq-localcloud-logs-")) if keep_logs else Path(self._tmp.name) / "logs"
        self.log_dir = Path(log_dir)
        self.stack: LocalStack | None = None
        self.vlm_endpoint = vlm_endpoint

    def command(self) -> list[str]:
        extra = [arg for path in self.extra_pythonpath for arg in ("--pythonpath", path)]
        folders = ["--log-dir", str(self.log_dir / "lambda"), "--scratch-dir", str(Path(self._tmp.name) / "invocations")]
        if self.asset is not None:
            extra = ["--task-python", self.asset.python, *(arg for path in self.asset.path for arg in ("--task-path", path))]
        return [sys.executable, "-m", "s3wq.dev.localcloud.server", "--port", str(self.port), *folders, *extra]

    def start(self, timeout: float = 60.0) -> Self:
        """Build the processor's asset first, when there is one: a requirement pip cannot install stops it before the server starts."""
        if self.processor is not None and self.asset is None:
            asset = build_task_asset(self.processor, into=Path(self._tmp.name), cache=self.asset_cache)
            if self.check_processor:
                environment = {ENV_ENDPOINT: self.vlm_endpoint} if self.vlm_endpoint else None  # what prepare() checks
                check_loads(asset, self.processor.spec, environment)
            self.asset = asset
        return super().start(timeout)

    def output(self) -> Any:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return open(self.log_dir / "server.log", "ab")

    def deploy(self, context: dict[str, Any] | None = None, *, bucket_name: str = DEFAULT_BUCKET) -> LocalStack:
        """Synthesize the CDK app with ``context`` (the asset's ``processor``, and a folder's ``processorDir``, added) and deploy the template here."""
        context = dict(context or {})
        if self.processor is not None:
            context.update(self.processor.deploy_context())
        if self.vlm_endpoint:
            context["vlmEndpoint"] = self.vlm_endpoint
        self.stack = deploy(synthesize(context), endpoint=self.endpoint, bucket_name=bucket_name)
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
