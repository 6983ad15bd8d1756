"""s3wq: a distributed work queue whose every bit of state lives in S3.

What users import: ``open_backend`` to reach a workspace, ``WorkIndex`` to
populate it, ``Worker`` to drain it, ``queue_status`` to count it, and the
processor contract (``Group``, ``ProcessorContext``).

What ships to Lambda: this package less its tools. The runtime is
``store/``, ``protocol/``, ``index/``, ``processors/``, ``host/``,
``worker/``, ``ops/``, ``handlers/`` and the top-level modules; ``cli/``
(the command line), ``dev/`` (the local cloud and the local S3, the
``s3wq[local]`` extra) and ``__main__.py`` stay out, because no handler
imports them. The rule is s3wq_cdk's (``NOT_SHIPPED`` in
``s3wq_cdk/sources.py``), which every asset is built by, and
tests/infra/test_asset.py checks that the asset holds what the handlers
import and none of the tools.
"""

from importlib import metadata as _metadata

from s3wq.config import WorkerSettings
from s3wq.errors import S3wqError
from s3wq.index import WorkIndex
from s3wq.model import Group
from s3wq.ops.status import queue_status
from s3wq.processors import ProcessorContext, load_processor
from s3wq.store import open_backend
from s3wq.worker import Worker, WorkerReport

__all__ = [
    "Group",
    "ProcessorContext",
    "S3wqError",
    "WorkIndex",
    "Worker",
    "WorkerReport",
    "WorkerSettings",
    "load_processor",
    "open_backend",
    "queue_status",
]


def __getattr__(name: str) -> str:
    # The version has one place, pyproject.toml, as the installed distribution reports it; looked up when asked
    # (s3wq --version), not at import, which every handler's cold start pays.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return _metadata.version("s3wq")
    except _metadata.PackageNotFoundError:  # not installed: the Lambda asset, or a checkout on PYTHONPATH alone
        return "0+unknown"
