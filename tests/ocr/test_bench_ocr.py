"""bench/ocr.py runs at a tiny size in the OCR venv, as docs/performance.md says every benchmark does, and prints the JSON it quotes.

Nothing is timed (a shared CI machine would make a limit flaky): what is
checked is that one clean page is read back, the text layer is exact, the
cost model carries its stated assumption and anchors, and every target is
judged.
"""

from __future__ import annotations

import json
import subprocess

from .conftest import REPO_ROOT, ocr_env


def test_the_ocr_benchmark_runs_at_a_tiny_size_and_prints_its_json(ocr_python):
    tiny = [
        "--pages",
        "1",
        "--conditions",
        "clean,noise",
        "--dpi",
        "150",
        "--headline-dpi",
        "150",
        "--text-pages",
        "5",
        "--memory-mb",
        "1769",
    ]
    run = subprocess.run(
        [str(ocr_python), str(REPO_ROOT / "bench" / "ocr.py"), *tiny],
        capture_output=True,
        text=True,
        timeout=300,
        env=ocr_env(),
        cwd=REPO_ROOT,
    )

    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    cell, _noisy = report["scans"]
    assert (cell["condition"], cell["scan_dpi"], cell["pages"]) == ("clean", 150, 1)
    assert cell["cer"] <= 0.05 and cell["cpu_s_per_page"] > 0
    assert report["text_layer"]["exact_pages"] == 5
    assert report["engine"]["params_over_rapidocr_defaults"]["Det.limit_side_len"] == 1280  # the processor's own setting
    assert any("ASSUMED" in line for line in report["cost_model"]["assumptions"])
    assert {anchor["name"] for anchor in report["cost_model"]["anchors"]} >= {
        "olmocr (7B VLM on GPUs)",
        "Amazon Textract DetectDocumentText",
    }
    assert report["targets"] and all(isinstance(t["met"], bool) for t in report["targets"])
