"""bench/doc_quality.py runs at its tiny size in the OCR venv and prints the side-by-side JSON that docs/performance.md quotes.

What is checked is the shape of the comparison, not who wins (the processor
is being rebuilt, and a shared CI machine makes any timing limit flaky):
every system has a pass rate for every test kind and document kind, over
the same tests; "before" really is the earlier revision's code; Tesseract
read text off every scan; every target is judged, as a boolean.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from .conftest import REPO_ROOT, ocr_env, once_per_session

SYSTEMS = {"ocr-after", "ocr-before", "tesseract"}
TEST_KINDS = {"present", "absent", "order", "table"}
SCANNED_KINDS = {"scan-200", "old-ocr-layer", "tesseract-layer"}


@pytest.fixture(scope="module")
def report(ocr_python, tmp_path_factory) -> dict:
    def run(_folder) -> dict:
        done = subprocess.run(
            [str(ocr_python), str(REPO_ROOT / "bench" / "doc_quality.py"), "--size", "tiny"],
            capture_output=True,
            text=True,
            timeout=900,
            env=ocr_env(),
            cwd=REPO_ROOT,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    return once_per_session(tmp_path_factory, "doc-quality-tiny", run)


def test_every_system_has_a_pass_rate_per_test_kind_and_per_document_kind(report):
    corpus = report["corpus"]
    assert set(report["systems"]) == SYSTEMS
    assert set(corpus["tests_by_kind"]) == TEST_KINDS and all(corpus["tests_by_kind"].values())
    assert SCANNED_KINDS | {"born-digital", "image-headline", "ligatures-accents"} <= set(corpus["tests_by_document_kind"])
    for name, system in report["systems"].items():
        assert set(system["by_test_kind"]) == TEST_KINDS, name
        assert set(system["by_document_kind"]) == set(corpus["tests_by_document_kind"]), name
        rates = [
            system["pass_rate"],
            system["mean_of_test_kinds"],
            *(c["pass_rate"] for c in (*system["by_test_kind"].values(), *system["by_document_kind"].values())),
        ]
        assert all(isinstance(rate, float | int) and 0 <= rate <= 1 for rate in rates), name


def test_every_system_is_judged_on_the_same_tests(report):
    corpus = report["corpus"]
    for name, system in report["systems"].items():
        assert system["tests"] == corpus["tests"], name
        assert {kind: counts["tests"] for kind, counts in system["by_test_kind"].items()} == corpus["tests_by_kind"], name
        assert {kind: counts["tests"] for kind, counts in system["by_document_kind"].items()} == corpus["tests_by_document_kind"], name
        assert system["passed"] == system["tests"] - len(system["failed_tests"]), name


def test_before_is_the_earlier_revisions_code_and_after_this_trees(report):
    systems = report["systems"]
    assert systems["ocr-after"]["system"]["s3wq"] == str(REPO_ROOT / "lambdas" / "s3wq")
    assert not systems["ocr-before"]["system"]["s3wq"].startswith(str(REPO_ROOT))
    assert report["params"]["before_revision"] == "78b2991"


def test_tesseract_reads_text_off_every_scan(report):
    tesseract = report["systems"]["tesseract"]
    assert tesseract["system"]["dpi"] == 200 and tesseract["system"]["version"].startswith("tesseract 5")
    assert not tesseract["empty_outputs"]
    for kind in SCANNED_KINDS:
        assert tesseract["by_document_kind"][kind]["passed"] > 0, kind
    assert tesseract["speed"]["core_s_per_scanned_page"] > 0


def test_the_targets_are_judged_as_booleans(report):
    targets = report["targets"]
    assert len(targets) == 6
    assert all(isinstance(t["met"], bool) for t in targets)
    speed = report["systems"]["ocr-after"]["speed"]
    assert speed["text_layer_pages"] >= 40 and speed["core_s_per_scanned_page"] > 0
