"""The worker's code: the shared zip, a zip with the processor folder, or a container image when a zip cannot hold it.

The rule (docs/deploy.md, "Your processor on Lambda"):

* no ``processorDir`` and no image asked for: the worker shares the zip of
  populate and status (s3wq alone);
* ``processorDir``: a zip of its own, built at synth with the folder's files
  and requirements (``asset_files.build``); when that folder is over Lambda's
  250 MB unzipped limit, the worker becomes the container image instead, and
  a warning on the function says so with the size;
* ``workerImage=true``, or a built-in processor whose extra needs it (``ocr``):
  the container image (``image_recipe``).

Populate and status never run the processor, so they keep the zip of s3wq
alone whatever the worker gets. Building the worker's zip here (not as CDK
bundling) is what lets the synth measure it before choosing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from aws_cdk import Annotations
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .asset_files import build, copy_sources, staging_folder, tree_size
from .image_recipe import stage_image_recipe
from .processor_source import ProcessorSource
from .runtime import WORKER_HANDLER
from .settings import DeploySettings
from .sources import REQUIREMENTS, requirements_file

# Lambda's quota for a function's deployment package, unzipped (layers included): 250 MB.
LAMBDA_ZIP_LIMIT_BYTES = 250 * 1024 * 1024
PLATFORMS = {"arm64": ecr_assets.Platform.LINUX_ARM64, "x86_64": ecr_assets.Platform.LINUX_AMD64}
TOO_BIG_WARNING = "s3wq:workerAssetTooBigForZip"


def worker_image_code(settings: DeploySettings, *, python_version: str) -> lambda_.DockerImageCode:
    """The image asset: the recipe staged from the settings' processor; built by ``cdk deploy``, never by the synth."""
    profile = settings.profile
    recipe = stage_image_recipe(
        staging_folder("worker-image"),
        architecture=settings.architecture,
        python_version=python_version,
        processor=settings.processor_source(),
        extra_requirements=requirements_file(profile.requirements_file) if profile is not None else None,
    )
    # The handler in the template too (ImageConfig), not only in the Dockerfile's CMD: whoever reads the template sees it.
    return lambda_.DockerImageCode.from_image_asset(str(recipe), platform=PLATFORMS[settings.architecture], cmd=[WORKER_HANDLER])


# Built folders by what went into them: a second synth in one process (two
# stacks of an app, the tests) reuses the pip build instead of repeating it.
_BUILT: dict[tuple, Path] = {}


def _fingerprint(source: ProcessorSource) -> str:
    digest = hashlib.sha256()
    for relative in source.files():
        digest.update(relative.as_posix().encode() + b"\0" + (source.directory / relative).read_bytes() + b"\0")
    return digest.hexdigest()


def _processor_zip(source: ProcessorSource, settings: DeploySettings, *, python_version: str) -> Path:
    """The worker's zip folder: built for Lambda with pip when bundling is on, the sources alone otherwise (tests)."""
    key = (source.directory, settings.architecture, python_version, settings.bundling, _fingerprint(source), REQUIREMENTS.read_bytes())
    if key not in _BUILT or not _BUILT[key].is_dir():
        folder = staging_folder("worker-zip")
        if settings.bundling:
            build(folder, architecture=settings.architecture, python_version=python_version, processor=source)
        else:
            copy_sources(folder, processor=source)
        _BUILT[key] = folder
    return _BUILT[key]


def worker_code(
    scope: Construct, settings: DeploySettings, *, shared: lambda_.Code, python_version: str
) -> lambda_.Code | lambda_.DockerImageCode:
    """The worker's code by the rule above; ``scope`` carries the warning when a zip would be too big."""
    if settings.needs_image:
        return worker_image_code(settings, python_version=python_version)
    source = settings.processor_source()
    if source is None:
        return shared
    folder = _processor_zip(source, settings, python_version=python_version)
    # Only a built folder tells the size Lambda would see: without bundling it holds no requirements.
    size = tree_size(folder) if settings.bundling else 0
    if size >= LAMBDA_ZIP_LIMIT_BYTES:  # Lambda takes a package smaller than the limit, not one at it
        Annotations.of(scope).add_warning_v2(
            TOO_BIG_WARNING,
            f"the worker's asset with processorDir is {size / 2**20:.0f} MB unzipped, over Lambda's 250 MB for a zip: "
            "the worker is a container image, built by `cdk deploy` with Docker",
        )
        return worker_image_code(settings, python_version=python_version)
    return lambda_.Code.from_asset(str(folder))
