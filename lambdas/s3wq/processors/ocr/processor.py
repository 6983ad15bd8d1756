"""The ``ocr`` processor: one JSON line per input with its text and, per page, how it was read.

A PDF page with a text layer gives that text; any other page, and every
page of a PNG, JPEG or TIFF, is OCR'd. One page is in memory at a time. An
input that cannot be read (missing, encrypted, corrupt, unsupported), one
with more pages than the cap, one with a page the engine fails on, and one
with a scanned page on which OCR found no text are input errors: the record
says why and keeps the text that was read, and the group still completes, as
with ``text``.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from s3wq.errors import InputNotFound
from s3wq.model import Group
from s3wq.processors.builtins import ExtractionFailed, content_type_of, pages_named, text_of
from s3wq.processors.context import ProcessorContext
from s3wq.processors.ocr.engine import PageNotRead, load_engine, read_page
from s3wq.processors.ocr.images import IMAGE_TYPES, ImagePages, ScannedPage, sniffed_image_type
from s3wq.processors.ocr.pdf_pages import PdfPages, TextLayerPage
from s3wq.processors.ocr.settings import ENV_MAX_PAGES, OcrSettings, current_settings

TEXT_LAYER = "text_layer"
OCR = "ocr"


@dataclass
class Reading:
    """What one input gave, page by page: the text, each page's account, the pages OCR found empty, and why it fell short."""

    texts: list[str] = field(default_factory=list)
    pages: list[dict[str, Any]] = field(default_factory=list)
    empty: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, page: TextLayerPage | ScannedPage, started: float) -> None:
        """Read ``page`` (OCR it if it is scanned) and account for it, timed from ``started``."""
        if isinstance(page, TextLayerPage):
            self.texts.append(page.text)
            entry = {"page": page.number, "method": TEXT_LAYER, "confidence": None, "dpi": None}
        else:
            entry = {"page": page.number, "method": OCR, "confidence": None, "dpi": page.dpi}
            try:
                reading = read_page(page.pixels)
            except PageNotRead as exc:
                # This page's error; the input's other pages, and the group's other inputs, are still read.
                self.problems.append(f"page {page.number}: {exc}")
            else:
                self.texts.append("\n".join(reading.lines))
                if not reading.lines:
                    self.empty.append(page.number)
                entry["confidence"] = reading.confidence
        self.pages.append({**entry, "seconds": round(time.perf_counter() - started, 3)})

    def error(self, count: int) -> str | None:
        """The input error of an input of ``count`` pages, or None when every page gave text."""
        found = list(self.problems)
        if self.empty:
            found.insert(0, f"OCR found no text on {pages_named(self.empty, count)} (a blank page, or no print on it?)")
        return "; ".join(found) or None


def prepare() -> None:
    """Everything a first group would fail on, done before it: the settings parsed, the engine checked and built."""
    current_settings()
    load_engine()


def _read_pages(source: PdfPages | ImagePages, settings: OcrSettings, reading: Reading) -> None:
    if isinstance(source, PdfPages):
        pages = source.pages(settings.max_pages, settings.dpi, settings.max_pixels)
    else:
        pages = source.pages(settings.max_pages, settings.max_pixels)
    try:
        started = time.perf_counter()
        for page in pages:
            reading.add(page, started)
            started = time.perf_counter()
    finally:
        source.close()
    if source.count > settings.max_pages:
        reading.problems.append(
            f"{source.count} pages, more than {ENV_MAX_PAGES}={settings.max_pages}: the first {settings.max_pages} read"
        )


def read_document(data: bytes, content_type: str, settings: OcrSettings, reading: Reading) -> int:
    """Fill ``reading`` from one PDF or image; its page count. Raise ExtractionFailed for one that cannot be read."""
    if content_type == "application/pdf":
        source: PdfPages | ImagePages = PdfPages(data)
    elif content_type in IMAGE_TYPES:
        source = ImagePages(data)
    elif content_type.startswith("text/") or content_type == "application/json":
        # A folder of scans often holds a note or a listing beside them: its text, as `text` gives it, with no pages.
        reading.texts.append(text_of(data))
        return 0
    else:
        raise ExtractionFailed(f"unsupported content type {content_type}: the ocr processor reads PDFs, PNG, JPEG, TIFF and text files")
    _read_pages(source, settings, reading)
    return source.count


def _record(group: Group, position: int, path: str, ctx: ProcessorContext, settings: OcrSettings) -> dict[str, Any]:
    record: dict[str, Any] = {"id": f"{group.hash}:{position}", "source": path, "text": None}
    try:
        data = ctx.read_input(path)
    except InputNotFound as exc:
        ctx.record_input_error(path, str(exc))
        return {**record, "metadata": {}, "error": str(exc)}
    content_type = sniffed_image_type(data) or content_type_of(path, data)
    reading = Reading()
    metadata = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_type": content_type, "pages": reading.pages}
    try:
        count = read_document(data, content_type, settings, reading)
        error = reading.error(count)
    except ExtractionFailed as exc:
        error = str(exc)
    if reading.texts:
        record["text"] = "\n".join(reading.texts)
    if error:
        # Not an empty success: status counts it, and the record says why text is missing.
        ctx.record_input_error(path, error)
        record["error"] = error
    return {**record, "metadata": metadata}


def ocr(group: Group, ctx: ProcessorContext) -> None:
    """The text of each input (PDF, PNG, JPEG, TIFF; a text file as it is), OCR'd where it has no text layer, into one JSON line per input.

    A storage failure raises, so the attempt is retried; anything wrong with
    one input is that input's error record.
    """
    settings = current_settings()
    ctx.write_result([_record(group, position, path, ctx, settings) for position, path in enumerate(group.paths)])
