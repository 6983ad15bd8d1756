"""The OCR tests' own venv, ``.venv-ocr/`` at the repo root: the heavy ``ocr`` extra is installed there only, never in .venv.

It is built from requirements.txt and requirements-ocr.txt with pip, from
the package registry (CI gets it this way too), and reused while its stamp
matches those files. pytest-xdist's workers take turns under a file lock, so
one builds and the others find it built. A failed build fails the tests that
need it in one line; it never turns into a skip.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
OCR_VENV = REPO_ROOT / ".venv-ocr"
REQUIREMENTS = (REPO_ROOT / "requirements.txt", REPO_ROOT / "requirements-ocr.txt")
HERE = Path(__file__).resolve().parent
PIP_TIMEOUT = 900


def requirements_stamp() -> str:
    digest = hashlib.sha256(f"python {sys.version_info[:2]}\n".encode())
    for path in REQUIREMENTS:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _build(python: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(OCR_VENV)], check=True, capture_output=True, text=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, *(arg for path in REQUIREMENTS for arg in ("-r", str(path)))],
        check=True,
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT,
    )


@pytest.fixture(scope="session")
def ocr_python() -> Path:
    """The Python of .venv-ocr/, built (or rebuilt, when a requirement file changed) if need be."""
    OCR_VENV.mkdir(exist_ok=True)
    python = OCR_VENV / "bin" / "python"
    stamp = OCR_VENV / ".installed"
    with open(OCR_VENV / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = requirements_stamp()
        if python.exists() and stamp.exists() and stamp.read_text() == wanted:
            return python
        started = time.perf_counter()
        try:
            _build(python)
        except subprocess.CalledProcessError as exc:
            last = (exc.stderr or "").strip().splitlines()[-1:] or [f"exit {exc.returncode}"]
            pytest.fail(f"could not build .venv-ocr (pip needs the package registry): {last[0]}", pytrace=False)
        except subprocess.TimeoutExpired:
            pytest.fail(f"could not build .venv-ocr: pip took more than {PIP_TIMEOUT} s", pytrace=False)
        stamp.write_text(wanted)
        (OCR_VENV / ".build-seconds").write_text(f"{time.perf_counter() - started:.1f}\n")
        return python


def ocr_env(**extra: str) -> dict[str, str]:
    """The environment of a child in the OCR venv: s3wq from this tree (lambdas/), nothing of .venv's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PYTHONPATH": str(REPO_ROOT / "lambdas"), **extra}


def run_in_ocr_venv(python: Path, script: str, *args: str, timeout: float = 300, **env: str) -> dict:
    """Run one of this folder's scripts in the OCR venv; its JSON output."""
    result = subprocess.run([str(python), str(HERE / script), *args], capture_output=True, text=True, timeout=timeout, env=ocr_env(**env))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def once_per_session(tmp_path_factory, name: str, make) -> dict:
    """``make(folder)``'s JSON, made by the first xdist worker that asks in a folder all the session's workers share.

    OCR is the cost of these tests: each worker running the same pages would
    only multiply it.
    """
    base = tmp_path_factory.getbasetemp()
    # Each pytest-xdist worker has its own basetemp in the session's folder; without xdist, basetemp is the session's.
    session_folder = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = session_folder / f"s3wq-{name}"
    shared.mkdir(exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "result.json"
        if not done.exists():
            done.write_text(json.dumps(make(shared)))
        return json.loads(done.read_text())


@pytest.fixture(scope="session")
def scans(ocr_python, tmp_path_factory) -> tuple[Path, dict]:
    """The generated inputs (scans.py) in a folder, and each one's known lines per page."""
    made = once_per_session(
        tmp_path_factory,
        "ocr-inputs",
        lambda folder: {"folder": str(folder), "known": run_in_ocr_venv(ocr_python, "scans.py", str(folder))},
    )
    return Path(made["folder"]), made["known"]
