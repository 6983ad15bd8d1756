"""The wheel users install: built with the sdist, installed with ``[ocr,cdk,local]`` into a venv of its own, and used there.

``python -m build`` makes the sdist, then the wheel from the sdist, so a file
the sdist lacks is missing from the wheel too. The venv sees no checkout: no
PYTHONPATH, run from a scratch folder, so ``s3wq`` and ``s3wq_cdk`` are the
installed ones. pip is held to the repository's pins (a constraints file made
from requirements*.txt), so it takes what the other tiers use, from its
cache. Building and installing need the package registry (setuptools for the
build, the pins for the venv) and fail without it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import REPO_ROOT

PINNED = ("requirements.txt", "requirements-dev.txt", "requirements-ocr.txt")
# What s3wq_cdk reads from its package data: the pins its assets install (s3wq_cdk/sources.py).
SHIPPED_PINS = ("requirements.txt", "requirements-ocr.txt")
PIP_TIMEOUT_SECONDS = 900

pytestmark = pytest.mark.timeout(1800)

USER_APP = """\
import aws_cdk as cdk
from s3wq_cdk import DeploySettings, S3wqQueue


class Scans(cdk.Stack):
    def __init__(self, scope, construct_id):
        super().__init__(scope, construct_id)
        S3wqQueue(self, "Queue", settings=DeploySettings.from_context(self, max_workers=20))


app = cdk.App()
Scans(app, "Scans")
app.synth()
"""


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONSAFEPATH")}
    return {**env, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1", **extra}


def _run(command: list[str], *, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(command, cwd=cwd, env=env or _clean_env(), capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{command[:3]} failed:\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _constraints(folder: Path) -> Path:
    """The pins of requirements*.txt as constraints: names and versions alone (pip takes no extras or includes there)."""
    lines = []
    for name in PINNED:
        for line in (REPO_ROOT / name).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                lines.append(re.sub(r"\[[^\]]*\]", "", line))
    path = folder / "constraints.txt"
    path.write_text("\n".join(sorted(set(lines))) + "\n")
    return path


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    # By the test session's own interpreter and environment (build is pinned in requirements-dev.txt).
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO_ROOT)], cwd=out, timeout=PIP_TIMEOUT_SECONDS, env=dict(os.environ))
    (wheel,) = out.glob("s3wq-*.whl")
    (sdist,) = out.glob("s3wq-*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A venv of its own with the wheel and its three extras; its bin/ folder."""
    folder = tmp_path_factory.mktemp("wheel-venv")
    _run([sys.executable, "-m", "venv", str(folder / "venv")], cwd=folder)
    python = folder / "venv" / "bin" / "python"
    _run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--constraint", str(_constraints(folder)),
         f"s3wq[ocr,cdk,local] @ {dist['wheel'].as_uri()}"],
        cwd=folder,
        timeout=PIP_TIMEOUT_SECONDS,
    )  # fmt: skip
    return python.parent


def test_the_wheel_ships_both_packages_typed_with_the_checkouts_pins(dist):
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = set(wheel.namelist())
        for name in SHIPPED_PINS:
            assert wheel.read(f"s3wq_cdk/requirements/{name}") == (REPO_ROOT / name).read_bytes(), (
                f"the wheel's {name} is not the checkout's"
            )
    assert {"s3wq/py.typed", "s3wq_cdk/py.typed", "s3wq/cli/__init__.py", "s3wq/dev/localcloud/deploy.py"} <= names
    modules = {p.relative_to(REPO_ROOT / folder).as_posix() for folder in ("lambdas", "infra") for p in (REPO_ROOT / folder).rglob("*.py")}
    assert modules - names == set(), "modules of the checkout missing from the wheel"


def test_the_sdist_holds_the_pins_and_py_typed(dist):
    with tarfile.open(dist["sdist"]) as sdist:
        members = {member.name.split("/", 1)[1]: member for member in sdist.getmembers() if "/" in member.name}
        for name in SHIPPED_PINS:
            member = members[f"infra/s3wq_cdk/requirements/{name}"]
            assert member.isfile(), f"{name} is in the sdist as a link, not as the file"
            assert sdist.extractfile(member).read() == (REPO_ROOT / name).read_bytes()
    assert {"lambdas/s3wq/py.typed", "infra/s3wq_cdk/py.typed", "pyproject.toml"} <= members.keys()


def test_the_installed_command_line_populates_works_and_counts_a_local_folder(venv, tmp_path):
    s3wq = str(venv / "s3wq")
    assert "populate" in _run([s3wq, "--help"], cwd=tmp_path)
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for index in range(3):
        (inputs / f"{index}.txt").write_text(f"input {index}\n")
    _run([s3wq, "populate", "ws", "inputs", "--group-size", "2"], cwd=tmp_path)
    _run([s3wq, "work", "ws"], cwd=tmp_path)
    status = _run([s3wq, "status", "ws"], cwd=tmp_path)
    assert re.search(r"\bdone=2\b", status) and re.search(r"\bfailed=0\b", status), status
    assert len(list((tmp_path / "ws" / "results").glob("*"))) == 2


def test_a_user_app_importing_s3wq_cdk_synthesizes_from_the_wheel_with_its_pins(venv, tmp_path):
    """Bundling on: the zip is built by pip for Lambda's platform from the pins the wheel carries, with no checkout."""
    (tmp_path / "app.py").write_text(USER_APP)
    outdir = tmp_path / "cdk.out"
    env = _clean_env(CDK_OUTDIR=str(outdir), CDK_CONTEXT_JSON=json.dumps({}))
    _run([str(venv / "python"), "app.py"], cwd=tmp_path, env=env, timeout=PIP_TIMEOUT_SECONDS)
    template = json.loads((outdir / "Scans.template.json").read_text())
    handlers = {r["Properties"].get("Handler") for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"}
    assert "s3wq.handlers.worker.handler" in handlers
    assets = json.loads((outdir / "Scans.assets.json").read_text())
    (code,) = [outdir / a["source"]["path"] for a in assets["files"].values() if a["source"].get("packaging") == "zip"]
    assert (code / "s3wq" / "handlers" / "worker.py").is_file() and (code / "boto3").is_dir()
    assert not (code / "s3wq" / "cli").exists() and not (code / "s3wq" / "dev").exists()
