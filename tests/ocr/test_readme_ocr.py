"""The README's "OCR a folder of scans", run exactly as written, in a shell's environment, from the repository root.

The block builds ``.venv-ocr/`` with ``make ocr-venv`` (the fixture has
built it already, so that step finds it up to date, as a second run would),
activates it, writes the sample scans into a scratch folder and OCRs them
with ``s3wq work --processor ocr``. The assertions are on what it left:
every group done, and each scan's text read within the CER the OCR tests
hold the processor to, every page OCR'd.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from e2e.test_first_hour import README, REPO_ROOT, counts_line, files_under, readme_block, shell_environment

from s3wq.dev.samples import SAMPLE_SCANS

from .test_ocr_processor import MAX_CER, cer

MARKER = "<!-- ocr-folder -->"


def test_readme_ocr_quick_start_runs_as_written(ocr_python, tmp_path):
    block = readme_block(README.read_text(encoding="utf-8"), MARKER)
    home, scratch = tmp_path / "home", tmp_path / "tmp"
    for folder in (home, scratch):
        folder.mkdir()

    run = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + block],
        cwd=REPO_ROOT,
        env=shell_environment(home, scratch),
        capture_output=True,
        text=True,
        timeout=600,
    )
    shown = f"--- block ---\n{block}--- stdout ---\n{run.stdout}--- stderr ---\n{run.stderr[-3000:]}"
    assert run.returncode == 0, f"the OCR quick start exited {run.returncode}\n{shown}"

    results = files_under(scratch, r"output_[0-9a-f]{40}\.jsonl")
    assert results, f"no result objects anywhere under the scratch folder\n{shown}"
    records = {Path(r["source"]).name: r for result in results for r in map(json.loads, result.read_text().splitlines())}
    assert sorted(records) == sorted(SAMPLE_SCANS), shown
    for name, pages in SAMPLE_SCANS.items():
        record = records[name]
        assert "error" not in record, record
        assert [page["method"] for page in record["metadata"]["pages"]] == ["ocr"] * len(pages)
        assert cer(pages, record["text"]) <= MAX_CER, record["text"]
    status = counts_line(run.stdout)
    assert status["done"] == status["groups"] >= 1 and status["failed"] == status["remaining"] == 0, run.stdout
