"""The Lambda runtime every function runs on, and the worker's handler: named once, for the functions, the image and the assets."""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_

# The newest Python runtime this aws-cdk-lib offers.
RUNTIME = lambda_.Runtime.PYTHON_3_14
PYTHON_VERSION = RUNTIME.name.removeprefix("python")
WORKER_HANDLER = "s3wq.handlers.worker.handler"
