"""What a Lambda asset holds, and how it is built, without the CDK: s3wq's runtime, its pinned requirements, a processor folder.

One set of rules for every place that builds one: the CDK app's zip
(:mod:`s3wq_cdk.bundling`), the container image's recipe
(:mod:`s3wq_cdk.image_recipe`) and the local cloud, which runs ``python -m
s3wq_cdk.asset_files --host`` to build the asset for this machine (a
subprocess that loads no CDK, so it starts in a fraction of a second).
pip runs with ``--platform``/``--python-version``/``--only-binary=:all:``,
so it works on a machine without Docker and on any host architecture.
"""

from __future__ import annotations

import atexit
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .errors import DeployError
from .processor_source import ProcessorSource
from .sources import NOT_SHIPPED, PACKAGES, REQUIREMENTS, SOURCES_ROOT

# botocore ships the models of every AWS service (about 30 MB); the handlers
# talk to these only. Dropping the rest keeps the zip small without giving up
# a pinned SDK.
BOTOCORE_SERVICES_USED = ("s3", "stepfunctions", "sts", "xray")
# zstandard ships a C and a CFFI backend; the default import policy loads the C one.
UNUSED_FILES = ("zstandard/_cffi*.so",)

# Wheels Lambda's Python 3.12+ runtimes load: Amazon Linux 2023 has glibc 2.34. pip takes a
# --platform literally (no older glibc implied), so each manylinux level is named, the oldest
# first: pip prefers the earlier, so s3wq's own pins keep their manylinux2014 wheels, and a
# processor's newer ones (numpy 2.4 ships manylinux_2_27/2_28 only) are found too.
_GLIBC_LEVELS = ("manylinux2014", "manylinux_2_28", "manylinux_2_34")
_MACHINES = {"arm64": "aarch64", "x86_64": "x86_64"}
_PLATFORMS = {architecture: tuple(f"{level}_{machine}" for level in _GLIBC_LEVELS) for architecture, machine in _MACHINES.items()}


def prune(target: Path, *, keep_all_services: bool = False) -> None:
    data = target / "botocore" / "data"
    if data.is_dir() and not keep_all_services:
        for service in data.iterdir():
            if service.is_dir() and service.name not in BOTOCORE_SERVICES_USED:
                shutil.rmtree(service)
    for pattern in UNUSED_FILES:
        for path in target.glob(pattern):
            path.unlink()
    for cache in list(target.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def _unshipped(directory: str, names: list[str]) -> set[str]:
    """For shutil.copytree: the names in ``directory`` (under SOURCES_ROOT) that stay out of the asset."""
    where = Path(directory).relative_to(SOURCES_ROOT)
    return {name for name in names if name == "__pycache__" or name.endswith(".pyc") or (where / name).as_posix() in NOT_SHIPPED}


# pip's last words when no file of a requirement fits: wheels only, for the platforms named (or none at all).
_NO_DISTRIBUTION_RE = re.compile(r"No matching distribution found for (\S+)")


class AssetBuildError(DeployError, RuntimeError):
    """pip could not install the asset's requirements for the target platform; the message names a requirement without a wheel."""


def host_platform() -> tuple[str, str]:
    """(architecture, python version) of this machine: what the local cloud builds its asset for."""
    machine = platform.machine().lower()
    return ("arm64" if machine in ("aarch64", "arm64") else "x86_64"), f"{sys.version_info.major}.{sys.version_info.minor}"


def install_requirements(target: Path, requirement_files: list[Path], *, architecture: str, python_version: str) -> None:
    """One pip resolve of every file for the platform, wheels only, so a conflict between them fails here, not at run time."""
    files = [arg for path in requirement_files for arg in ("--requirement", str(path))]
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        *(arg for platform_tag in _PLATFORMS[architecture] for arg in ("--platform", platform_tag)),
        "--implementation", "cp", "--python-version", python_version,
        "--only-binary=:all:", "--target", str(target), *files,
    ]  # fmt: skip
    result = subprocess.run(command, check=False, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(result.stderr)  # pip's own words stay shown; the error below says what they mean here
    if result.returncode == 0:
        return
    where = f"Lambda's platform ({_PLATFORMS[architecture][-1]}, Python {python_version})"
    if missing := _NO_DISTRIBUTION_RE.search(result.stderr):
        raise AssetBuildError(
            f"pip found no wheel of {missing.group(1)} for {where}: the build installs wheels only (pip --only-binary=:all:), "
            "so a package published only as source cannot ship; build a wheel of it for that platform and unpack it "
            "into the processor folder, or require a version that has wheels"
        )
    names = ", ".join(path.name if path == REQUIREMENTS else str(path) for path in requirement_files)
    said = [line.strip() for line in result.stderr.splitlines() if line.startswith("ERROR:")]
    raise AssetBuildError(f"pip could not install {names} for {where}" + (f" ({said[-1]})" if said else ""))


def install(
    target: Path, *, architecture: str, python_version: str, processor: ProcessorSource | None = None, extra: tuple[Path, ...] = ()
) -> None:
    """What pip installs into an asset, pruned: the pinned requirements, a processor folder's and ``extra`` files in one resolve.

    With a ``processor`` folder botocore keeps every service's model: the
    processor may call any AWS service. ``extra``: more pinned files for the
    same resolve (a built-in's extra, requirements-ocr.txt, as its worker
    image installs it).
    """
    extra = (*extra, *([processor.requirements] if processor is not None and processor.requirements is not None else []))
    install_requirements(target, [REQUIREMENTS, *extra], architecture=architecture, python_version=python_version)
    prune(target, keep_all_services=processor is not None)


def build(
    target: Path, *, architecture: str, python_version: str, processor: ProcessorSource | None = None, extra: tuple[Path, ...] = ()
) -> None:
    """The whole asset in ``target``: :func:`install`, then the runtime (handlers included) and the processor folder's files beside it.

    The folder's files go to the asset's root, where Lambda's ``sys.path`` finds them.
    """
    install(target, architecture=architecture, python_version=python_version, processor=processor, extra=extra)
    copy_sources(target, processor=processor)


def copy_sources(target: Path, *, processor: ProcessorSource | None = None) -> None:
    """The runtime (the installed ``s3wq`` less NOT_SHIPPED) into ``target``, and the processor folder's files at its root."""
    for package in PACKAGES:
        shutil.copytree(SOURCES_ROOT / package, target / package, ignore=_unshipped, dirs_exist_ok=True)
    if processor is not None:
        processor.copy_into(target)


def staging_folder(kind: str) -> Path:
    """A folder for this synth only: CDK copies an asset into the cloud assembly when the function is created."""
    folder = Path(tempfile.mkdtemp(prefix=f"s3wq-{kind}-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def tree_size(folder: Path) -> int:
    """Bytes of every file under ``folder``: what Lambda counts against its 250 MB unzipped limit."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink())


def main(argv: list[str] | None = None) -> int:
    """``python -m s3wq_cdk.asset_files --target DIR [--processor-dir D --processor mod:fn] [--requirements F] [--host] [--only PART]``: build an asset folder.

    The local cloud builds its functions' asset this way for this machine
    (``--host``), so a processor runs there with what the asset carries; it
    keeps the pip part (``--only requirements``) between deploys and copies
    the modules (``--only sources``) fresh each time.
    """
    import argparse

    assert main.__doc__ is not None
    parser = argparse.ArgumentParser(prog="python -m s3wq_cdk.asset_files", description=main.__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, type=Path, help="an empty folder to build into")
    parser.add_argument("--processor-dir", type=Path, help="a processor folder to ship beside s3wq")
    parser.add_argument("--processor", help="module:function in --processor-dir")
    parser.add_argument("--requirements", type=Path, action="append", default=[], help="a pinned file to install too (a built-in's extra)")
    parser.add_argument("--architecture", default="arm64", choices=sorted(_PLATFORMS))
    parser.add_argument("--host", action="store_true", help="for this machine's architecture and Python, not Lambda's")
    parser.add_argument("--only", choices=("requirements", "sources"), help="one part: what pip installs, or the modules")
    args = parser.parse_args(argv)
    if args.host:
        architecture, python_version = host_platform()
    else:
        from .runtime import PYTHON_VERSION  # the CDK's runtime name: only for Lambda's own platform

        architecture, python_version = args.architecture, PYTHON_VERSION
    try:
        processor = None if args.processor_dir is None else ProcessorSource.open(args.processor_dir, spec=args.processor or "")
        extra = tuple(args.requirements)
        if args.only == "sources":
            copy_sources(args.target, processor=processor)
        elif args.only == "requirements":
            install(args.target, architecture=architecture, python_version=python_version, processor=processor, extra=extra)
        else:
            build(args.target, architecture=architecture, python_version=python_version, processor=processor, extra=extra)
    except (ValueError, AssetBuildError) as exc:
        print(f"s3wq_cdk.asset_files: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
