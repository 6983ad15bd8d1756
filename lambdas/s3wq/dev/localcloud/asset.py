"""What a processor folder's or an extra's functions run in the local cloud: what ``cdk deploy`` would ship, and an interpreter that sees only it.

``s3wq local demo|up --processor-dir DIR`` builds, for this machine, the asset
``cdk deploy -c processorDir=DIR`` builds for Lambda, with the same rules
(``python -m s3wq_cdk.asset_files --host``: s3wq's pinned requirements and the
folder's in one pip resolve, the runtime less the tools, the folder's files
at the root). The
functions then run it the way Lambda runs /var/task: in a venv made without
pip or site-packages, with PYTHONPATH the asset alone. A package that the dev
venv holds and the folder does not require fails here as it would on Lambda.

A built-in processor that needs an extra (``--processor ocr``) deploys its
worker as a container image whose recipe installs s3wq's requirements and the
extra's pinned file (``PROCESSOR_PROFILES`` in s3wq/processors/profiles.py says which).
Here the same files go through the same build, with no folder: the worker
runs with what its image would carry, however light the dev venv is.

pip is the slow part, so its output is cached, keyed by everything it depends
on: both requirement files, the Python version and architecture, and
s3wq_cdk/asset_files.py (the rules). The modules, s3wq's runtime and the
folder's files, are copied fresh at every deploy (``--only sources``), so
editing them needs no pip.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from s3wq.dev.localcloud.runner import TaskAsset
from s3wq.errors import BadInput
from s3wq.processors.profiles import PROCESSOR_PROFILES
from s3wq_cdk import sources

# The files of the CDK app's own build, named where s3wq_cdk names them (it loads no CDK for this).
REPO_ROOT = sources.CHECKOUT_ROOT
LAMBDAS_DIR = sources.SOURCES_ROOT
ASSET_RULES = Path(sources.__file__).with_name("asset_files.py")
S3WQ_REQUIREMENTS = sources.REQUIREMENTS
# Where the pip part is kept between local clouds (default: the cloud's own folder, removed with it).
CACHE_ENV = "S3WQ_LOCAL_ASSET_CACHE"
_COMPLETE = ".complete"
# How python -m s3wq_cdk.asset_files starts the line that says why a build failed (it names a requirement without a wheel).
_BUILD_ERROR = "s3wq_cdk.asset_files: error: "

# Run in a subprocess: the checks `cdk deploy` makes, without importing the CDK.
_CHECK = """
import json, sys
from s3wq_cdk.processor_source import ProcessorSource, ProcessorSourceError
try:
    source = ProcessorSource.open(sys.argv[1], spec=sys.argv[2])
except ProcessorSourceError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
requirements = source.requirements
print(json.dumps({"directory": str(source.directory), "requirements": None if requirements is None else str(requirements)}))
"""


@dataclass(frozen=True)
class ProcessorFolder:
    """A processor folder checked as ``cdk deploy`` checks it, and its requirements, if it has any."""

    directory: Path
    spec: str
    requirements: Path | None

    @classmethod
    def check(cls, directory: str | Path, spec: str) -> ProcessorFolder:
        """Raise BadInput naming the problem in one line (a missing folder or module, a file that may not ship, a requirement line)."""
        _need_source_tree("--processor-dir")
        result = subprocess.run(
            # From the checkout's root: a relative folder is the caller's, so it goes absolute first.
            [sys.executable, "-c", _CHECK, str(Path(directory).expanduser().absolute()), spec],
            cwd=REPO_ROOT,
            env=_child_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            # Its words are the CDK context's (processorDir); here the flag is --processor-dir.
            message = (result.stderr.strip().splitlines() or ["the processor folder could not be checked"])[-1]
            raise BadInput(message.replace("processorDir", "--processor-dir", 1))
        found = json.loads(result.stdout)
        requirements = None if found["requirements"] is None else Path(found["requirements"])
        return cls(Path(found["directory"]), spec, requirements)

    @property
    def label(self) -> str:
        return f"--processor-dir {self.directory}"

    def bundling_args(self) -> list[str]:
        return ["--processor-dir", str(self.directory), "--processor", self.spec]

    def deploy_context(self) -> dict[str, str]:
        return {"processor": self.spec, "processorDir": str(self.directory)}


@dataclass(frozen=True)
class BuiltinExtra:
    """A built-in processor whose extra only its worker image carries (``ocr``): s3wq's runtime and requirements, and the extra's pins."""

    spec: str
    requirements: Path

    @classmethod
    def find(cls, spec: str) -> BuiltinExtra | None:
        """The extra ``spec`` needs, or None for every other processor (no subprocess then: the default path stays as it is)."""
        profile = PROCESSOR_PROFILES.get(spec)  # every built-in that needs an extra has one (loading.EXTRA_PROCESSORS)
        if profile is None:
            return None
        _need_source_tree(f"--processor {spec}")
        return cls(spec, sources.requirements_file(profile.requirements_file))

    @property
    def label(self) -> str:
        return f"--processor {self.spec} ({self.requirements.name})"

    def bundling_args(self) -> list[str]:
        return ["--requirements", str(self.requirements)]

    def deploy_context(self) -> dict[str, str]:
        return {"processor": self.spec}


# What the local cloud runs its functions from, when not from lambdas/ and the dev venv.
AssetSource = ProcessorFolder | BuiltinExtra


def _child_env() -> dict[str, str]:
    """This process's environment, with the s3wq_cdk and s3wq it runs first on PYTHONPATH: the child builds with the same code."""
    path = [str(ASSET_RULES.parent.parent), str(LAMBDAS_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _need_source_tree(flag: str) -> None:
    if REPO_ROOT is None:
        raise BadInput(f"{flag} needs s3wq's source tree (infra/ beside lambdas/), as the local cloud does")


def build_task_asset(source: AssetSource, *, into: Path, cache: Path) -> TaskAsset:
    """The asset for ``source`` under ``into`` (its modules, fresh) and ``cache`` (its requirements and the interpreter, reused)."""
    cache.mkdir(parents=True, exist_ok=True)
    requirements = _requirements(source, cache)
    code = into / "task"
    if code.exists():
        shutil.rmtree(code)
    _asset_files(code, source, "sources")
    # The modules first, then their requirements: a file of a processor folder wins over a package's, as at the asset's root.
    return TaskAsset(python=str(_bare_python(cache)), path=(str(code), str(requirements / "site")))


def _asset_files(target: Path, source: AssetSource, part: str) -> None:
    """One part of the asset (``requirements`` or ``sources``) into ``target``, by the rules ``cdk deploy`` builds with (no CDK loaded)."""
    command = [sys.executable, "-m", "s3wq_cdk.asset_files", "--target", str(target), "--host", "--only", part, *source.bundling_args()]
    result = subprocess.run(command, cwd=REPO_ROOT, env=_child_env(), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise BadInput(f"the asset for {source.label} could not be built: {_error_line(result.stderr)}")


def _requirements_key(source: AssetSource) -> str:
    digest = hashlib.sha256(type(source).__name__.encode())  # a folder's build keeps botocore whole, an extra's prunes it
    for path in (S3WQ_REQUIREMENTS, source.requirements, ASSET_RULES):
        digest.update(b"\0" + (path.read_bytes() if path is not None else b""))
    digest.update(f"{sys.version_info.major}.{sys.version_info.minor}-{os.uname().machine}".encode())
    return digest.hexdigest()[:20]


def _requirements(source: AssetSource, cache: Path) -> Path:
    """``cache/requirements-KEY/site``: what pip installed for the asset, pruned as the asset is."""
    entry = cache / f"requirements-{_requirements_key(source)}"
    if (entry / _COMPLETE).exists():
        return entry
    partial = Path(tempfile.mkdtemp(prefix=f"{entry.name}-", dir=cache))
    try:
        _asset_files(partial / "site", source, "requirements")
        (partial / _COMPLETE).touch()
        try:
            partial.rename(entry)
        except OSError:
            if not (entry / _COMPLETE).exists():  # not another deploy's build of the same entry: a real failure
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return entry


def _error_line(stderr: str) -> str:
    """The line of a child's stderr that says what went wrong (the build's own error, else pip's last ERROR, else its last line).

    The jsii banner is left out.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.lstrip("b'").startswith("!!")]
    own = [line.removeprefix(_BUILD_ERROR) for line in lines if line.startswith(_BUILD_ERROR)]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (own or errors or lines or ["it failed and said nothing"])[-1]


def _bare_python(cache: Path) -> Path:
    """A venv made without pip: Python's standard library and nothing else, as Lambda's runtime has it before the asset."""
    venv = cache / f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    partial = Path(tempfile.mkdtemp(prefix=f"{venv.name}-", dir=cache))
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(partial / "venv")], check=True, capture_output=True)
        try:
            (partial / "venv").rename(venv)
        except OSError:
            if not python.exists():  # not made by another deploy meanwhile: a real failure
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return python


# Run by the asset's interpreter: the processor loaded as the worker's processor host loads it.
_LOAD = """
import sys
from s3wq.errors import ProcessorNotFound
from s3wq.processors import load_processor
try:
    load_processor(sys.argv[1])
except ProcessorNotFound as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


def check_loads(asset: TaskAsset, spec: str, environment: Mapping[str, str] | None = None) -> None:
    """Raise BadInput naming the problem when ``spec`` does not load from ``asset`` (a function misspelt, a requirement missing).

    ``environment``: the worker's own variables (a processor's settings), which its ``prepare()`` checks.
    """
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(asset.path), "PYTHONSAFEPATH": "1", **(environment or {})}
    result = subprocess.run([asset.python, "-c", _LOAD, spec], env=env, capture_output=True, text=True, check=False, cwd=asset.path[0])
    if result.returncode != 0:
        raise BadInput((result.stderr.strip().splitlines() or [f"processor {spec!r} does not load from its asset"])[-1])
