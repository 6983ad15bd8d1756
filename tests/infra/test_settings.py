"""Deployment settings from CDK context: a bad value stops the synth, naming the setting."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import aws_cdk as cdk
import pytest
from stack_under_test import cdk_json_context
from support import REPO_ROOT

from s3wq import config as s3wq_config
from s3wq_cdk.settings import CONTEXT_KEYS, DeploySettings


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


@pytest.mark.parametrize(
    "context, problem",
    [
        ({"processor": "ocr", "ocrMode": "fast"}, "ocrMode='fast': expected one of auto, force, text-layer"),
        ({"processor": "ocr", "ocrLang": "english"}, "ocrLang='english': expected language codes"),
        ({"ocrMode": "force"}, "ocrMode and ocrLang are the ocr processor's settings; processor is 'text'"),
    ],
)
def test_a_bad_ocr_setting_stops_the_synth_in_the_settings_words(context, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        DeploySettings.from_context(cdk.App(context=context))


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


@pytest.mark.parametrize(
    "context, problem",
    [
        ({"groupTimeoutSeconds": 0}, "groupTimeoutSeconds must be from 0.5 to 890"),
        ({"groupTimeoutSeconds": "-5"}, "groupTimeoutSeconds must be from 0.5 to 890"),
        ({"groupTimeoutSeconds": "nan"}, "groupTimeoutSeconds must be from 0.5 to 890"),
        ({"groupTimeoutSeconds": "inf"}, "groupTimeoutSeconds must be from 0.5 to 890"),
        ({"groupTimeoutSeconds": "ten"}, "'groupTimeoutSeconds'"),
        # Longer than a run can last in the invocation: the worker's own deadline would always stop it first.
        ({"groupTimeoutSeconds": 895}, "groupTimeoutSeconds must be from 0.5 to 890 \\(workerTimeoutSeconds 900"),
        (
            {"groupTimeoutSeconds": 291, "workerTimeoutSeconds": 300},
            "groupTimeoutSeconds must be from 0.5 to 290 \\(workerTimeoutSeconds 300",
        ),
    ],
)
def test_a_bad_group_timeout_stops_the_synth(context, problem):
    with pytest.raises(ValueError, match=problem):
        DeploySettings.from_context(cdk.App(context=context))


@pytest.mark.parametrize("context, seconds", [({}, None), ({"groupTimeoutSeconds": "60"}, 60.0), ({"groupTimeoutSeconds": 890}, 890.0)])
def test_a_group_timeout_within_the_worker_timeout_is_kept(context, seconds):
    assert DeploySettings.from_context(cdk.App(context=context)).group_timeout_seconds == seconds


@pytest.mark.parametrize(
    "context, problem",
    [
        ({"maxInputBytes": 0}, "maxInputBytes must be from 1 to the worker's memory"),
        ({"maxInputBytes": "-5"}, "maxInputBytes must be from 1"),
        ({"maxInputBytes": "64M"}, "'maxInputBytes'"),
        # Past the worker's memory: such an input could never be held, so the cap would guard nothing.
        (
            {"maxInputBytes": 512 * 2**20 + 1, "workerMemoryMb": 512},
            "maxInputBytes must be from 1 to the worker's memory \\(536870912 bytes\\)",
        ),
    ],
)
def test_a_bad_input_size_cap_stops_the_synth(context, problem):
    with pytest.raises(ValueError, match=problem):
        DeploySettings.from_context(cdk.App(context=context))


@pytest.mark.parametrize("context, cap", [({}, s3wq_config.DEFAULT_MAX_INPUT_BYTES), ({"maxInputBytes": "1000"}, 1000)])
def test_an_input_size_cap_is_kept_and_defaults_to_the_runtime_s(context, cap):
    assert DeploySettings.from_context(cdk.App(context=context)).max_input_bytes == cap


def test_cdk_json_holds_feature_flags_and_no_setting():
    """A default lives in infra/settings.py alone; repeated in cdk.json it would read as set, and no processor could choose it."""
    assert not set(cdk_json_context()) & set(CONTEXT_KEYS)
    assert all(key.startswith("@aws-cdk/") for key in cdk_json_context())


def test_a_processor_outside_the_asset_without_its_folder_stops_the_synth():
    """The zip ships s3wq alone: mymod:fn would not import on Lambda unless processorDir ships it."""
    with pytest.raises(ValueError, match=r"processor 'mymod:process' is not in the worker's asset: .*-c processorDir=FOLDER"):
        DeploySettings.from_context(cdk.App(context={"processor": "mymod:process"}))
    # The runtime's own modules are in it; with bundling off (the local cloud, these tests) a path supplies it.
    assert DeploySettings.from_context(cdk.App(context={"processor": "s3wq.processors.builtins:text"})).processor
    assert DeploySettings.from_context(cdk.App(context={"processor": "mymod:process", "bundling": False})).processor


def test_a_bad_setting_stops_app_py_in_one_line_with_exit_2(tmp_path):
    """`cdk synth -c maxWorkers=0` prints what is wrong, not a traceback."""
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"maxWorkers": 0}), "CDK_OUTDIR": str(tmp_path)}
    synth = subprocess.run([sys.executable, str(REPO_ROOT / "app.py")], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)

    assert synth.returncode == 2, synth.stderr
    assert "Traceback" not in synth.stderr
    [error] = [line for line in synth.stderr.splitlines() if line.startswith("s3wq: error: ")]
    assert error.startswith("s3wq: error: maxWorkers must be between 1 and 10000, got 0"), synth.stderr


def test_a_processor_folder_that_would_replace_boto3_stops_app_py_in_one_line_with_exit_2(tmp_path):
    """The issue's synth: a boto3/ in the folder replaced the pinned boto3 in the worker's zip."""
    folder = tmp_path / "myproc"
    (folder / "boto3").mkdir(parents=True)
    (folder / "boto3" / "__init__.py").write_text("")
    (folder / "mymod.py").write_text("def process(group, ctx):\n    pass\n")
    context = {"processor": "mymod:process", "processorDir": str(folder)}
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path / "out")}
    synth = subprocess.run([sys.executable, str(REPO_ROOT / "app.py")], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)

    assert synth.returncode == 2, synth.stderr
    assert "Traceback" not in synth.stderr
    [error] = [line for line in synth.stderr.splitlines() if line.startswith("s3wq: error: ")]
    assert error == f"s3wq: error: processorDir {str(folder)!r}: boto3/ would shadow boto3, which s3wq needs; rename it", synth.stderr


def test_a_worker_zip_pip_cannot_build_stops_app_py_in_one_line_with_exit_2(tmp_path):
    """The zip is built at synth: pip's failure is one line naming the requirement, not a traceback (offline here: no wheel at all)."""
    folder = tmp_path / "myproc"
    folder.mkdir()
    (folder / "mymod.py").write_text("def process(group, ctx):\n    pass\n")
    context = {"processor": "mymod:process", "processorDir": str(folder)}
    env = {
        **os.environ,
        "CDK_CONTEXT_JSON": json.dumps(context),
        "CDK_OUTDIR": str(tmp_path / "out"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(tmp_path),  # no wheel in it
    }
    synth = subprocess.run([sys.executable, str(REPO_ROOT / "app.py")], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)

    assert synth.returncode == 2, synth.stderr
    assert "Traceback" not in synth.stderr
    [error] = [line for line in synth.stderr.splitlines() if line.startswith("s3wq: error: ")]
    assert error.startswith("s3wq: error: pip found no wheel of boto3==") and "the build installs wheels only" in error, synth.stderr
