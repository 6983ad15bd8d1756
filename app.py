#!/usr/bin/env python3
"""CDK app: ``cdk synth`` / ``cdk deploy`` (settings from context, see s3wq_cdk/settings.py and docs/deploy.md)."""

import sys
from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

# From a checkout, as `cdk synth` runs it, without an install: the constructs
# (s3wq_cdk, in infra/) and the library they read their environment-variable
# names and key layout from (s3wq, in lambdas/), so the two cannot drift apart.
sys.path.insert(0, str(Path(__file__).resolve().parent / "lambdas"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "infra"))

from s3wq_cdk.errors import PREFIX, DeployError
from s3wq_cdk.settings import DeploySettings
from s3wq_cdk.stack import S3wqStack

app = cdk.App()
stack_name = app.node.try_get_context("stackName") or "S3wq"
try:
    # A bad -c setting or processor folder, or the worker's zip that pip could not build here: one line naming it
    # (as in any app, s3wq_cdk/errors.py), and exit 2, as s3wq's commands do for the user's mistake.
    S3wqStack(app, stack_name, settings=DeploySettings.from_context(app), description="s3wq: an S3-only distributed work queue")
except DeployError as exc:
    print(f"{PREFIX}{exc}", file=sys.stderr)
    sys.exit(2)
cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
app.synth()
