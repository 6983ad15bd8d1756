"""The s3wq stack of this repository's CDK app (app.py): a thin Stack around one :class:`s3wq_cdk.queue.S3wqQueue`."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from .queue import S3wqQueue
from .settings import DeploySettings

# CDK leaves a construct id of "Default" out of the logical IDs below it, so
# the stack's resources keep the IDs they had before the construct existed
# (tests/infra/test_logical_ids.py): an update replaces nothing.
QUEUE_ID = "Default"


class S3wqStack(Stack):
    """Exposes ``queue``, and its parts as before: ``settings``, ``storage``, ``functions``, ``orchestration``, ``monitoring``."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: DeploySettings, **kwargs):
        super().__init__(scope, construct_id, **kwargs)
        self.queue = S3wqQueue(self, QUEUE_ID, settings=settings)
        self.settings = settings
        self.storage = self.queue.storage
        self.functions = self.queue.functions
        self.orchestration = self.queue.orchestration
        self.monitoring = self.queue.monitoring
