"""The Lambda asset, built without Docker: the runtime of ``lambdas/s3wq`` plus ``requirements.txt`` installed for Lambda's platform.

CDK calls :class:`PipBundling` first (local bundling); it runs pip with
``--platform``/``--python-version``/``--only-binary=:all:``, so it works on a
machine without Docker and on any host architecture. Docker is never needed.
The tools around the runtime (the command line, the local cloud and the
local S3) are left out: they need rich and moto, which Lambda has not, and
no handler imports them (tests/infra/test_asset.py checks both).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

REPO_ROOT = Path(__file__).resolve().parent.parent
LAMBDAS_DIR = REPO_ROOT / "lambdas"
REQUIREMENTS = REPO_ROOT / "requirements.txt"
PACKAGES = ("s3wq",)
# Relative to LAMBDAS_DIR: what is not shipped, because no handler runs it.
NOT_SHIPPED = ("s3wq/cli", "s3wq/dev", "s3wq/__main__.py")

# botocore ships the models of every AWS service (about 30 MB); the handlers
# talk to these only. Dropping the rest keeps the zip small without giving up
# a pinned SDK.
BOTOCORE_SERVICES_USED = ("s3", "stepfunctions", "sts", "xray")
# zstandard ships a C and a CFFI backend; the default import policy loads the C one.
UNUSED_FILES = ("zstandard/_cffi*.so",)

_PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}


def prune(target: Path) -> None:
    data = target / "botocore" / "data"
    if data.is_dir():
        for service in data.iterdir():
            if service.is_dir() and service.name not in BOTOCORE_SERVICES_USED:
                shutil.rmtree(service)
    for pattern in UNUSED_FILES:
        for path in target.glob(pattern):
            path.unlink()
    for cache in list(target.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def _unshipped(directory: str, names: list[str]) -> set[str]:
    """For shutil.copytree: the names in ``directory`` (under LAMBDAS_DIR) that stay out of the asset."""
    where = Path(directory).relative_to(LAMBDAS_DIR)
    return {name for name in names if name == "__pycache__" or name.endswith(".pyc") or (where / name).as_posix() in NOT_SHIPPED}


def build(target: Path, *, architecture: str, python_version: str) -> None:
    """Install the pinned requirements for Lambda into ``target`` and copy the runtime (handlers included) beside them."""
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
            "--platform", _PLATFORMS[architecture], "--implementation", "cp", "--python-version", python_version,
            "--only-binary=:all:", "--target", str(target), "--requirement", str(REQUIREMENTS),
        ],
        check=True,
    )  # fmt: skip
    for package in PACKAGES:
        shutil.copytree(LAMBDAS_DIR / package, target / package, ignore=_unshipped, dirs_exist_ok=True)
    prune(target)


@jsii.implements(ILocalBundling)
class PipBundling:
    def __init__(self, *, architecture: str, python_version: str):
        self.architecture = architecture
        self.python_version = python_version

    def try_bundle(self, output_dir: str, _options: object = None, **_kwargs: object) -> bool:
        build(Path(output_dir), architecture=self.architecture, python_version=self.python_version)
        return True


def lambda_code(*, runtime: lambda_.Runtime, architecture: str, bundle: bool) -> lambda_.Code:
    """The asset for every function; with ``bundle=False`` (tests, the local cloud) the runtime in ``lambdas/`` as it is.

    The local cloud runs its handlers from ``lambdas/`` itself, not from this
    asset, so leaving the tools out changes nothing there.
    """
    if not bundle:
        return lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=["**/__pycache__", "*.egg-info", *NOT_SHIPPED])
    python_version = runtime.name.removeprefix("python")
    return lambda_.Code.from_asset(
        str(LAMBDAS_DIR),
        # Hash what is shipped, so a change to requirements.txt makes a new asset.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=runtime.bundling_image,  # never pulled: local bundling always succeeds
            local=PipBundling(architecture=architecture, python_version=python_version),
        ),
    )
