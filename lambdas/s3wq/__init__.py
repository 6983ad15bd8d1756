"""s3wq: a distributed work queue whose every bit of state lives in S3.

What users import: ``open_backend`` to reach a workspace, ``WorkIndex`` to
populate it, ``Worker`` to drain it, ``queue_status`` to count it, and the
processor contract (``Group``, ``ProcessorContext``).
"""

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
__version__ = "0.1.0"
