"""Deployment settings from CDK context: a bad value stops the synth, naming the setting."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from stack_under_test import cdk_json_context

from infra.settings import DeploySettings


@pytest.mark.parametrize(
    "name, value",
    [
        ("maxWorkers", 10001),
        ("maxWorkers", "10001"),  # `cdk synth -c maxWorkers=10001` passes a string
        ("workerReservedConcurrency", 0),
        ("workerTimeoutSeconds", 1000),
        ("workerTimeoutSeconds", "1000"),
        ("architecture", "sparc"),
        ("workspacePrefix", "../x"),
        ("kmsKeyArns", '["arn:aws:kms:us-east-1:123456789012:alias/mine"]'),
        ("kmsKeyArns", "[1, 2]"),
    ],
)
def test_bad_context_value_names_the_setting(name, value):
    with pytest.raises(ValueError, match=name):
        DeploySettings.from_context(cdk.App(context={name: value}))


def test_cdk_json_context_is_valid():
    settings = DeploySettings.from_context(cdk.App(context=cdk_json_context()))
    assert settings.bundling is True
    assert settings.architecture == "arm64"


@pytest.mark.parametrize("entry", ["shared-bucket", "shared-bucket/", "shared-bucket/runs", "shared-bucket/runs/s3wq"])
def test_an_input_prefix_that_contains_the_manifest_prefix_stops_the_synth(entry):
    context = {"bucketName": "shared-bucket", "workspacePrefix": "runs/s3wq", "inputBuckets": [entry]}
    with pytest.raises(ValueError, match="contains the manifest prefix runs/s3wq/manifests/"):
        DeploySettings.from_context(cdk.App(context=context))


@pytest.mark.parametrize("entry", ["shared-bucket/scans", "shared-bucket/runs/s3wq-inputs", "other-bucket"])
def test_an_input_prefix_beside_the_workspace_is_accepted(entry):
    context = {"bucketName": "shared-bucket", "workspacePrefix": "runs/s3wq", "inputBuckets": [entry]}
    assert DeploySettings.from_context(cdk.App(context=context)).input_buckets
