"""The Lambda asset of the CDK app, built without Docker: :mod:`s3wq_cdk.asset_files`'s build, as CDK's local bundling.

CDK calls :class:`PipBundling` first (local bundling); it runs
:func:`s3wq_cdk.asset_files.build` (pip for Lambda's platform), so it works on
a machine without Docker and on any host architecture. Docker is never
needed. The tools around the runtime (the command line, the local cloud and
the local S3) are left out: they need rich and moto, which Lambda has not,
and no handler imports them (tests/infra/test_asset.py checks both).
"""

from __future__ import annotations

from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, ILocalBundling
from aws_cdk import aws_lambda as lambda_

from .asset_files import build, copy_sources, staging_folder
from .sources import S3WQ_DIR


@jsii.implements(ILocalBundling)
class PipBundling:
    def __init__(self, *, architecture: str, python_version: str):
        self.architecture = architecture
        self.python_version = python_version

    def try_bundle(self, output_dir: str, _options: object = None, **_kwargs: object) -> bool:
        build(Path(output_dir), architecture=self.architecture, python_version=self.python_version)
        return True


def lambda_code(*, runtime: lambda_.Runtime, architecture: str, bundle: bool) -> lambda_.Code:
    """The asset for every function; with ``bundle=False`` (tests, the local cloud) the runtime's modules alone, without pip.

    The local cloud runs its handlers from ``lambdas/`` itself, not from this
    asset, so leaving the tools out changes nothing there. Without bundling
    the runtime is copied by the asset's own rule (copy_sources) rather than
    taken from the folder s3wq lies in: installed, that folder is
    site-packages, which holds everything else too.
    """
    if not bundle:
        folder = staging_folder("code")
        copy_sources(folder)
        return lambda_.Code.from_asset(str(folder))
    python_version = runtime.name.removeprefix("python")
    return lambda_.Code.from_asset(
        # Never read (local bundling builds the asset by the rules, and the output is hashed); the smallest folder that names it.
        str(S3WQ_DIR),
        # Hash what is shipped, so a change to requirements.txt makes a new asset.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=runtime.bundling_image,  # never pulled: local bundling always succeeds
            local=PipBundling(architecture=architecture, python_version=python_version),
        ),
    )
