"""Venvs of s3wq on the other CPython versions this machine has, for tests that must hold on the deployed worker's Python too.

The deployed worker runs the newest Python runtime aws-cdk-lib offers (3.14
at the time of writing), whose multiprocessing differs from 3.11's (its
default start method on Linux is forkserver). Where an interpreter of a
newer minor version is here -- ``python3.N`` on PATH, or one of pyenv's --
:func:`venv_for` builds ``.venv-py3.N/`` at the repository root with s3wq's
pinned runtime requirements and the command line (rich), and s3wq itself
from this checkout (``--no-deps -e .``), as ``make install`` builds
``.venv/``; it is rebuilt only when those files change (a stamp records
them), one build at a time (a file lock, for pytest-xdist's workers).
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import REPO_ROOT

# The minor versions tried, newest first: the deployed worker's, then the newest the tests can reach.
MINORS = (14, 13, 12)
PIP_TIMEOUT_SECONDS = 600


def interpreters() -> dict[str, Path]:
    """``"3.N": path`` of every CPython of MINORS found here, newer than the one running the tests."""
    found: dict[str, Path] = {}
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    for minor in MINORS:
        if (3, minor) <= sys.version_info[:2]:
            continue
        # pyenv's own builds before PATH: its shim for a version not selected only says so.
        candidates = [
            *sorted(glob.glob(f"{pyenv_root}/versions/3.{minor}.*/bin/python3.{minor}"), reverse=True),
            shutil.which(f"python3.{minor}"),
        ]
        for candidate in candidates:
            if candidate and "/shims/" not in candidate and os.access(candidate, os.X_OK):
                found[f"3.{minor}"] = Path(candidate)
                break
    return found


def _stamp(python: Path) -> str:
    digest = hashlib.sha256(str(python).encode())
    for name in ("requirements.txt", "requirements-dev.txt", "pyproject.toml"):
        digest.update((REPO_ROOT / name).read_bytes())
    return digest.hexdigest()


def _rich_pin() -> str:
    """rich as requirements-dev.txt pins it: the command line's one dependency beyond the runtime's."""
    return next(line.strip() for line in (REPO_ROOT / "requirements-dev.txt").read_text().splitlines() if line.startswith("rich=="))


class VenvFailed(Exception):
    """pip could not build the venv (the message is its last line): the registry is needed once."""


def venv_for(version: str, python: Path) -> Path:
    """The Python of ``.venv-py{version}/``, built if need be; raise VenvFailed."""
    venv = REPO_ROOT / f".venv-py{version}"
    venv_python = venv / "bin" / "python"
    # Beside the venv, not in it: the build clears the venv's folder.
    with open(REPO_ROOT / f".venv-py{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = _stamp(python)
        stamp = venv / ".installed"
        if venv_python.exists() and stamp.exists() and stamp.read_text() == wanted:
            return venv_python
        steps = [
            [str(python), "-m", "venv", "--clear", str(venv)],
            [str(venv_python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", "requirements.txt", _rich_pin()],
            [str(venv_python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "-e", "."],
        ]
        for step in steps:
            try:
                subprocess.run(step, check=True, capture_output=True, text=True, timeout=PIP_TIMEOUT_SECONDS, cwd=REPO_ROOT)
            except subprocess.CalledProcessError as exc:
                said = [line for line in (exc.stderr or "").splitlines() if line.strip() and not line.startswith("WARNING")]
                raise VenvFailed(f"could not build {venv.name}: {' / '.join(said[-3:]) or f'exit {exc.returncode}'}") from None
        stamp.write_text(wanted)
    return venv_python
