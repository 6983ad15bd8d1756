"""Deployment settings from CDK context: a bad value stops the synth, naming the setting."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from stack_under_test import cdk_json_context

from infra.settings import DeploySettings


@pytest.mark.parametrize(
    "name, value",
    [
        ("maxWorkers", 5000),
        ("maxWorkers", "5000"),  # `cdk synth -c maxWorkers=5000` passes a string
        ("workerTimeoutSeconds", 1000),
        ("workerTimeoutSeconds", "1000"),
        ("architecture", "sparc"),
        ("workspacePrefix", "../x"),
    ],
)
def test_bad_context_value_names_the_setting(name, value):
    with pytest.raises(ValueError, match=name):
        DeploySettings.from_context(cdk.App(context={name: value}))


def test_cdk_json_context_is_valid():
    settings = DeploySettings.from_context(cdk.App(context=cdk_json_context()))
    assert settings.bundling is True
    assert settings.architecture == "arm64"
