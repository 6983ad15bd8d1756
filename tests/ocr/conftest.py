"""The OCR tests run in ``.venv-ocr/`` at the repo root: the heavy ``ocr`` extra is installed there only, never in .venv.

bench/ocr_venv.py builds it (as ``make ocr-venv`` does) from
requirements.txt and requirements-ocr.txt with pip, from the package
registry (CI gets it this way too), and reuses it while its stamp matches
those files. A failed build fails the tests that need it in one line; it
never turns into a skip.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest
from support import REPO_ROOT

HERE = Path(__file__).resolve().parent


def _ocr_venv_module():
    spec = importlib.util.spec_from_file_location("ocr_venv", REPO_ROOT / "bench" / "ocr_venv.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def ocr_python() -> Path:
    """The Python of .venv-ocr/ (bench/ocr_venv.py, what ``make ocr-venv`` runs), built if need be."""
    ocr_venv = _ocr_venv_module()
    try:
        return ocr_venv.ensure()
    except ocr_venv.BuildFailed as exc:
        pytest.fail(str(exc), pytrace=False)


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
