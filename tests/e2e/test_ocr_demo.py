"""``s3wq local demo --processor ocr`` from the light dev venv: the worker runs with what its container image would carry.

The dev venv holds none of the OCR stack. The local cloud builds the worker's
asset from requirements.txt and requirements-ocr.txt for this machine (pip,
cached in S3WQ_LOCAL_ASSET_CACHE), the demo's samples include scans with known
text, and the summary carries the text OCR read from one of them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from s3wq.dev.localcloud.asset import CACHE_ENV, REPO_ROOT, BuiltinExtra
from s3wq.dev.localcloud.demo_inputs import scan_lines
from tests.ocr.test_ocr_processor import MAX_CER, cer

DEMO = ["local", "demo", "--processor", "ocr", "--inputs", "8", "--workers", "2", "--json"]


@pytest.fixture(scope="session")
def ocr_asset_cache(tmp_path_factory):
    """One asset cache for the session, shared by pytest-xdist's workers: only the first build pays pip."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "s3wq-ocr-asset-cache"
    shared.mkdir(exist_ok=True)
    return shared


def test_the_dev_venv_holds_no_ocr_stack():
    # What the demo below proves rests on this: the OCR came from the worker's asset.
    for module in ("rapidocr", "onnxruntime", "PIL", "pypdfium2"):
        assert importlib.util.find_spec(module) is None, module


def test_only_a_built_in_that_needs_an_extra_runs_from_an_asset_of_its_own():
    # The default path builds nothing: no pip, the Lambdas run from lambdas/ as before.
    assert [BuiltinExtra.find(spec) for spec in ("text", "noop", "myproc:process")] == [None, None, None]
    assert BuiltinExtra.find("ocr") == BuiltinExtra("ocr", REPO_ROOT / "requirements-ocr.txt")


def test_the_ocr_demo_reads_its_scans_with_what_the_worker_image_would_carry(ocr_asset_cache):
    result = subprocess.run(
        [sys.executable, "-m", "s3wq", *DEMO],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, CACHE_ENV: str(ocr_asset_cache)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    status = summary["status"]
    assert summary["execution_status"] == "SUCCEEDED"
    assert (status["groups"], status["done"], status["failed"], status["remaining"]) == (4, 4, 0, 0)
    assert summary["unread_scans"] == []  # the scanned PDF and the PNG both gave text
    scan = summary["ocr_sample"]
    number = int(re.fullmatch(r"s3://[^/]+/inputs/scanned page (\d{4})\.(pdf|png)", scan["source"]).group(1))
    assert scan["ocr_pages"] == scan["pages"] == 1
    assert cer([scan_lines(number)], scan["text"]) <= MAX_CER, scan["text"]
