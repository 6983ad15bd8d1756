"""s3wq: a distributed work queue whose every bit of state lives in S3.

What users import: ``open_backend`` to reach a workspace, ``WorkIndex`` to
populate it, ``Worker`` to drain it, ``queue_status`` to count it, and the
processor contract (``Group``, ``ProcessorContext``).
"""

from .backends import open_backend
from .config import WorkerSettings
from .errors import S3wqError
from .index import Group, WorkIndex
from .processors import ProcessorContext, load_processor
from .status import queue_status
from .worker import Worker, WorkerReport

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
__version__ = "0.1.0"
