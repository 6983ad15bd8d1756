"""The worker's zip with a processor folder, built as ``cdk synth`` builds it: pip for Lambda's platform (needs the package registry).

One build per module: the folder's module and its third-party requirement
(attrs) beside s3wq's runtime and requirements, and nothing of s3wq's tools.
Over Lambda's 250 MB the worker becomes the container image, with a warning;
the limit is lowered here to see that without building 250 MB.
``pytest -s`` shows the asset's size.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Annotations, Match
from stack_under_test import PROCESSOR_DIR, PROCESSOR_SPEC
from test_asset import assert_holds_the_runtime_alone

from s3wq_cdk import worker_code as worker_code_module
from s3wq_cdk.asset_files import tree_size
from s3wq_cdk.functions import RUNTIME
from s3wq_cdk.settings import DeploySettings
from s3wq_cdk.worker_code import TOO_BIG_WARNING, worker_code

PYTHON = RUNTIME.name.removeprefix("python")
SETTINGS = DeploySettings(processor=PROCESSOR_SPEC, processor_dir=str(PROCESSOR_DIR), bundling=True)
# Of s3wq's tools and tests, none of which a worker runs.
DEV_TOOLS = ("moto", "rich", "pytest", "ruff", "cfnlint", "aws_cdk", "cdk_nag")


def worker(stack: cdk.Stack) -> lambda_.Code | lambda_.DockerImageCode:
    return worker_code(stack, SETTINGS, shared=lambda_.Code.from_inline("shared"), python_version=PYTHON)


@pytest.fixture(scope="module")
def built() -> Path:
    code = worker(cdk.Stack(cdk.App(), "Zip"))
    assert isinstance(code, lambda_.AssetCode), f"expected the zip, got {type(code).__name__}"
    return Path(code.path)


def test_the_zip_holds_the_users_module_and_its_requirement_and_no_tool(built, tmp_path):
    assert (built / "wordcount.py").read_bytes() == (PROCESSOR_DIR / "wordcount.py").read_bytes()
    assert (built / "attrs" / "__init__.py").is_file() and (built / "attr").is_dir()
    assert list(built.glob("attrs-25.4.0.dist-info")), "attrs is not at the pinned version"
    assert_holds_the_runtime_alone(built)
    assert [name for name in DEV_TOOLS if (built / name).exists()] == []
    zipped = Path(shutil.make_archive(str(tmp_path / "worker"), "zip", root_dir=built))
    print(f"worker zip with {PROCESSOR_DIR.name}/: {tree_size(built):,} bytes unzipped, {zipped.stat().st_size:,} zipped")


def test_over_lambdas_zip_limit_the_worker_is_the_image_with_a_warning(built, monkeypatch):
    monkeypatch.setattr(worker_code_module, "LAMBDA_ZIP_LIMIT_BYTES", tree_size(built) - 1)
    stack = cdk.Stack(cdk.App(), "TooBig")
    cdk.CfnWaitConditionHandle(stack, "Placeholder")  # a stack with no resource is a template warning, noise here
    assert isinstance(worker(stack), lambda_.DockerImageCode)  # the same build, reused: no second pip run
    warnings = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("over Lambda's 250 MB for a zip"))
    assert len(warnings) == 1 and TOO_BIG_WARNING in warnings[0].entry.data
