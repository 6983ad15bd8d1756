"""pyarrow for ``s3wq export --to FILE.parquet`` in the tests and bench/export.py: ``.export-deps/`` at the repository root.

pip installs the ``parquet`` extra's one line of pyproject.toml (``pyarrow==...``, which needs nothing else) into the
folder with ``--target``, never into .venv: whoever runs s3wq export to Parquet puts the folder on PYTHONPATH (a child
process), so .venv's own tests see no pyarrow. It is reinstalled only when that line or the Python version changes (a
stamp records them), and installs take turns under a file lock, so pytest-xdist's workers install it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import tomllib
from pathlib import Path

from ocr_venv import REPO_ROOT

DEPS_DIR = REPO_ROOT / ".export-deps"
PIP_TIMEOUT_SECONDS = 900


class InstallFailed(Exception):
    """pip could not install the extra; the message is pip's last line."""


def parquet_requirements() -> list[str]:
    with open(REPO_ROOT / "pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["project"]["optional-dependencies"]["parquet"])


def ensure() -> Path:
    """The folder holding pyarrow, installed (or reinstalled, when the pin changed) if need be; raise InstallFailed."""
    DEPS_DIR.mkdir(exist_ok=True)
    requirements = parquet_requirements()
    wanted = hashlib.sha256(f"python {sys.version_info[:2]}\n{requirements}".encode()).hexdigest()
    stamp_file = DEPS_DIR / ".installed"
    with open(DEPS_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp_file.exists() and stamp_file.read_text() == wanted:
            return DEPS_DIR
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--upgrade"]
        try:
            subprocess.run(
                [*command, "--target", str(DEPS_DIR), *requirements],
                check=True,
                capture_output=True,
                text=True,
                timeout=PIP_TIMEOUT_SECONDS,
            )
        except subprocess.CalledProcessError as exc:
            last = (exc.stderr or "").strip().splitlines()[-1:] or [f"pip exited {exc.returncode}"]
            raise InstallFailed(f"could not install {' '.join(requirements)} (pip needs the package registry): {last[0]}") from None
        except subprocess.TimeoutExpired:
            raise InstallFailed(f"could not install {' '.join(requirements)}: pip took more than {PIP_TIMEOUT_SECONDS} s") from None
        stamp_file.write_text(wanted)
        return DEPS_DIR


if __name__ == "__main__":
    try:
        print(ensure())
    except InstallFailed as exc:
        print(f"export_deps: error: {exc}", file=sys.stderr)
        sys.exit(1)
