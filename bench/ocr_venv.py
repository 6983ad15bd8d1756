"""The OCR venv, ``.venv-ocr/`` at the repository root: s3wq with its ``ocr`` extra at the tested versions, never in ``.venv/``.

``make ocr-venv`` (or ``python3 bench/ocr_venv.py``) builds it; the OCR
tests (tests/ocr/), ``bench/ocr.py`` and ``bench/doc_quality.py`` use it.
pip installs requirements.txt and requirements-ocr.txt (the exact pins the
worker image installs too) and requirements-bench.txt (what only the
benchmarks need: reportlab, which draws the document corpus), then s3wq
itself from this checkout (``--no-deps -e .``), so
``.venv-ocr/bin/s3wq work WS --processor ocr`` runs. It is rebuilt only when
those files or the Python version change (a stamp records them), and builds
take turns under a file lock, so pytest-xdist's workers build it once.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
import sys
import time
from pathlib import Path

# The one place bench/ computes the repository root: common.py takes it from here, as this module imports no sibling.
REPO_ROOT = Path(__file__).resolve().parent.parent
OCR_VENV = REPO_ROOT / ".venv-ocr"
# requirements-bench.txt: what only the document-quality benchmark needs (reportlab, to draw its corpus), beside the extra.
REQUIREMENTS = (REPO_ROOT / "requirements.txt", REPO_ROOT / "requirements-ocr.txt", REPO_ROOT / "requirements-bench.txt")
PIP_TIMEOUT_SECONDS = 900


class BuildFailed(Exception):
    """pip could not build the venv; the message is pip's last line."""


def stamp() -> str:
    digest = hashlib.sha256(f"python {sys.version_info[:2]}\n".encode())
    for path in (*REQUIREMENTS, REPO_ROOT / "pyproject.toml"):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _pip(python: Path, *args: str) -> None:
    command = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=PIP_TIMEOUT_SECONDS, cwd=REPO_ROOT)
    except subprocess.CalledProcessError as exc:
        last = (exc.stderr or "").strip().splitlines()[-1:] or [f"pip exited {exc.returncode}"]
        raise BuildFailed(f"could not build .venv-ocr (pip needs the package registry): {last[0]}") from None
    except subprocess.TimeoutExpired:
        raise BuildFailed(f"could not build .venv-ocr: pip took more than {PIP_TIMEOUT_SECONDS} s") from None


def ensure() -> Path:
    """The Python of .venv-ocr/, built (or rebuilt, when a requirement file changed) if need be; raise BuildFailed."""
    OCR_VENV.mkdir(exist_ok=True)
    python = OCR_VENV / "bin" / "python"
    stamp_file = OCR_VENV / ".installed"
    with open(OCR_VENV / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = stamp()
        if python.exists() and stamp_file.exists() and stamp_file.read_text() == wanted:
            return python
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(OCR_VENV)], check=True, capture_output=True)
        _pip(python, *(arg for path in REQUIREMENTS for arg in ("-r", str(path))))
        _pip(python, "--no-deps", "-e", str(REPO_ROOT))
        stamp_file.write_text(wanted)
        (OCR_VENV / ".build-seconds").write_text(f"{time.perf_counter() - started:.1f}\n")
        return python


def main() -> int:
    try:
        python = ensure()
    except BuildFailed as exc:
        print(f"ocr_venv: error: {exc}", file=sys.stderr)
        return 1
    print(f"{python.parent / 's3wq'}: s3wq with the ocr extra (requirements-ocr.txt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
