"""What the local demo counts as a scan read: every scan it uploaded gave OCR'd text, or the demo fails naming it."""

from __future__ import annotations

from s3wq.dev.localcloud.demo_inputs import Results, scan_lines

BUCKET = "demo"
KEYS = ["inputs/scanned page 0001.pdf", "inputs/scanned page 0005.png", "inputs/scanned page 0009.pdf"]


def record(key: str, text: str | None, error: str | None = None) -> tuple[str, dict]:
    pages = [{"page": 1, "method": "ocr", "confidence": 0.99, "dpi": 200, "seconds": 1.0}]
    return "results/out.jsonl", {"source": f"s3://{BUCKET}/{key}", "text": text, "error": error, "metadata": {"pages": pages}}


def test_a_scan_with_no_record_empty_text_or_an_error_is_named_and_a_read_one_is_the_sample():
    empty = "OCR found no text on page 1 of 1 (a blank page, or no print on it?)"
    results = Results(backend=None, records=[record(KEYS[0], " \n"), record(KEYS[1], None, empty)])
    assert results.unread_scans(KEYS, BUCKET) == [
        f"{KEYS[0]}: OCR read no text",
        f"{KEYS[1]}: {empty}",
        f"{KEYS[2]}: no result record",
    ]
    assert results.ocr_sample() is None


def test_the_sample_scans_text_is_a_title_and_the_sample_words():
    lines = scan_lines(9)
    assert lines[0] == "Scanned page 9, no text layer." and len(lines) >= 2 and all(line.strip() for line in lines)
