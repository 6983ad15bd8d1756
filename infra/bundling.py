"""The Lambda asset, built without Docker: ``lambdas/`` plus ``requirements.txt`` installed for Lambda's platform.

CDK calls :class:`PipBundling` first (local bundling); it runs pip with
``--platform``/``--python-version``/``--only-binary=:all:``, so it works on a
machine without Docker and on any host architecture. Docker is never needed.
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


def build(target: Path, *, architecture: str, python_version: str) -> None:
    """Install the pinned requirements for Lambda into ``target`` and copy the handlers beside them."""
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
            "--platform", _PLATFORMS[architecture], "--implementation", "cp", "--python-version", python_version,
            "--only-binary=:all:", "--target", str(target), "--requirement", str(REQUIREMENTS),
        ],
        check=True,
    )  # fmt: skip
    for package in PACKAGES:
        shutil.copytree(LAMBDAS_DIR / package, target / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)
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
    """The asset for every function; with ``bundle=False`` (tests) just ``lambdas/`` as it is."""
    if not bundle:
        return lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=["**/__pycache__", "*.egg-info"])
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
