"""What ``s3wq local demo`` uploads, and what it shows of the results.

The samples are text files and PDFs with a text layer; with an OCR processor
(``--processor ocr``) they include scans with known text too: pages of pixels
with no text layer, one scanned PDF and one PNG in every SCAN_EVERY inputs.
Drawing a scan needs Pillow, which the dev venv need not hold: the OCR
worker's asset holds it, so the scans are drawn by the asset's interpreter,
with s3wq's sample writers (s3wq.dev.samples) from lambdas/ on its path.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from s3wq.dev.localcloud.asset import LAMBDAS_DIR
from s3wq.dev.localcloud.runner import TaskAsset
from s3wq.dev.samples import make_pdf, sample_text
from s3wq.store import Backend

# Processors the samples include scans for: the ones that read them.
OCR_PROCESSORS = ("ocr",)
# With scans, of every SCAN_EVERY inputs: these positions are a scanned PDF and a PNG of a scan.
SCAN_EVERY = 8
SCAN_PDF_AT, SCAN_PNG_AT = 1, 5
SCAN_DPI = 200
SCAN_PNG_INCHES = (8.5, 3.0)  # a slip, not a page: the lines fit, and OCR reads fewer blank pixels
_WORDS_PER_LINE = 7
OCR_METHOD = "ocr"  # a page's method in the ocr processor's record when it was read from pixels

# Run by the asset's interpreter: {path: lines} on stdin, each a one-page scan at SCAN_DPI.
_DRAW_SCANS = f"""
import json, sys
from pathlib import Path
from s3wq.dev.samples import draw_scan, make_scan_pdf
for path, lines in json.load(sys.stdin).items():
    if path.endswith(".pdf"):
        Path(path).write_bytes(make_scan_pdf([lines], dpi={SCAN_DPI}))
    else:
        draw_scan(lines, dpi={SCAN_DPI}, inches={SCAN_PNG_INCHES!r}).save(path, dpi=({SCAN_DPI}, {SCAN_DPI}))
"""


def scan_lines(number: int) -> list[str]:
    """The known text of sample scan ``number``, line by line: what OCR should read back."""
    words = sample_text(number).split("\n", 1)[1].split()
    chunks = [words[i : i + _WORDS_PER_LINE] for i in range(0, len(words), _WORDS_PER_LINE)]
    return [f"Scanned page {number}, no text layer.", *(" ".join(chunk) for chunk in chunks)]


def _key(number: int, with_scans: bool) -> str:
    if with_scans and number % SCAN_EVERY == SCAN_PDF_AT:
        return f"inputs/scanned page {number:04d}.pdf"
    if with_scans and number % SCAN_EVERY == SCAN_PNG_AT:
        return f"inputs/scanned page {number:04d}.png"
    if number % 4 == 3:
        return f"inputs/scan {number:04d}, page 1.pdf"
    return f"inputs/doc {number:04d}, part {number % 3}.txt"


def upload_samples(s3: Any, bucket: str, count: int, *, draw_scans_with: TaskAsset | None = None) -> list[str]:
    """Every fourth input a PDF, the rest text, scans among them when ``draw_scans_with`` is given; the scans' keys.

    Names with spaces and commas, as real archives have them.
    """
    keys = [_key(number, draw_scans_with is not None) for number in range(count)]
    scans = {number: key for number, key in enumerate(keys) if key.startswith("inputs/scanned ")}
    bodies = _draw_scans(draw_scans_with, scans) if scans and draw_scans_with is not None else {}
    for number, key in enumerate(keys):
        if number in bodies:
            body = bodies[number]
        elif key.endswith(".pdf"):
            body = make_pdf([[f"Sample PDF {number}, page 1."], sample_text(number).splitlines()])
        else:
            body = sample_text(number).encode()
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    return list(scans.values())


def _draw_scans(asset: TaskAsset, scans: dict[int, str]) -> dict[int, bytes]:
    with tempfile.TemporaryDirectory(prefix="s3wq-demo-scans-") as folder:
        # File names made here from the numbers, never from a key.
        paths = {number: os.path.join(folder, f"{number}{Path(key).suffix}") for number, key in scans.items()}
        # lambdas/ for s3wq.dev.samples (not in the asset), then the asset's packages for Pillow.
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join([str(LAMBDAS_DIR), *asset.path[1:]])}
        lines = json.dumps({paths[number]: scan_lines(number) for number in scans})
        result = subprocess.run(
            [asset.python, "-P", "-c", _DRAW_SCANS], input=lines, env=env, capture_output=True, text=True, check=False, cwd=folder
        )
        if result.returncode != 0:
            raise RuntimeError(f"the sample scans could not be drawn: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
        return {number: Path(path).read_bytes() for number, path in paths.items()}


def manifest_sources(bucket: str, with_scans: bool) -> list[str]:
    sources = [f"s3://{bucket}/inputs/*.txt", f"s3://{bucket}/inputs/*.pdf"]
    return [*sources, f"s3://{bucket}/inputs/*.png"] if with_scans else sources


@dataclass(frozen=True)
class Results:
    """The records of a run's result objects, each with the key of the object that holds it."""

    backend: Backend
    records: list[tuple[str, dict]]

    @classmethod
    def read(cls, backend: Backend, keys: list[str]) -> Results:
        records = [(key, json.loads(line)) for key in keys for line in backend.read(key).body.decode("utf-8").splitlines()]
        return cls(backend, records)

    def pdf_sample(self) -> dict | None:
        """A PDF whose text came from its text layer (not a scan read by OCR)."""
        for key, record in self.records:
            metadata = record.get("metadata", {})
            if metadata.get("content_type") == "application/pdf" and not record.get("error") and not _ocr_pages(record):
                return {
                    "result": f"{self.backend.uri}/{key}",
                    "source": metadata.get("Source-File", record["source"]),  # olmocr's Dolma: its source is "olmocr"
                    "pages": _page_count(metadata),
                    "text": record["text"][:160],
                }
        return None

    def ocr_sample(self) -> dict | None:
        """A scan read by OCR, its text whole: the pages, and their mean confidence and seconds."""
        for key, record in self.records:
            pages = _ocr_pages(record)
            if pages and (record.get("text") or "").strip():
                confidences = [page["confidence"] for page in pages if page.get("confidence") is not None]
                return {
                    "result": f"{self.backend.uri}/{key}",
                    "source": record["source"],
                    "pages": _page_count(record["metadata"]),
                    "ocr_pages": len(pages),
                    "confidence": round(sum(confidences) / len(confidences), 3) if confidences else None,
                    "seconds": round(sum(page.get("seconds") or 0 for page in pages), 2),
                    "text": record["text"],
                }
        return None

    def unread_scans(self, scan_keys: list[str], bucket: str) -> list[str]:
        """Why each scan uploaded gave no OCR'd text: no record of it, an error, or empty text."""
        by_source = {record["source"]: record for _, record in self.records}
        problems = []
        for key in scan_keys:
            record = by_source.get(f"s3://{bucket}/{key}")
            if record is None:
                problems.append(f"{key}: no result record")
            elif not (record.get("text") or "").strip():
                problems.append(f"{key}: {record.get('error') or 'OCR read no text'}")
        return problems


def _ocr_pages(record: dict) -> list[dict]:
    pages = record.get("metadata", {}).get("pages")
    return [page for page in pages if page.get("method") == OCR_METHOD] if isinstance(pages, list) else []


def _page_count(metadata: dict) -> int | None:
    """``text`` records a count, ``ocr`` a list with an entry per page."""
    pages = metadata.get("pages")
    return len(pages) if isinstance(pages, list) else pages
