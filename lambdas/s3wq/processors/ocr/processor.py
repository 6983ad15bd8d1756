"""The ``ocr`` processor: one JSON line per input with its text and, per page, how it was read.

A PDF page with a text layer gives that text; any other page, and every
page of a PNG, JPEG or TIFF, is OCR'd. One page is in memory at a time. An
input that cannot be read (missing, encrypted, corrupt, unsupported), one
with more pages than the cap, one with a page the engine fails on, and one
with a scanned page on which OCR found no text are input errors: the record
says why and keeps the text that was read, and the group still completes, as
with ``text``.

Each input is read within bounds that fit the worker, so that no input can
sink its group: it is opened and decoded in the decoder (decoding.py), a
process under a memory cap, while the engine stays here, loaded once; and
it is read within its share of the run's time (time_shares.py), so that the
result, with every input's record, is written before the run ends. An input
past either bound is an input error that names the bound.
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
from s3wq.processors.ocr.cleaning import clean_text
from s3wq.processors.ocr.decoding import IMAGE_TYPES, Decoder, OutOfTime, sniffed_image_type
from s3wq.processors.ocr.engine import load_engine
from s3wq.processors.ocr.layout.document import read_document as lay_out
from s3wq.processors.ocr.layout.model import PageWords, Source
from s3wq.processors.ocr.pages import PageRead, PageReader
from s3wq.processors.ocr.record import document_fields, processor_account
from s3wq.processors.ocr.settings import ENV_MAX_PAGES, OcrSettings, current_settings
from s3wq.processors.ocr.time_shares import Share, TimeShares, not_opened, not_reached, stopped

# A page that gave no words still has its place (and its span) in the document: a letter page's size in points.
_UNKNOWN_PAGE_SIZE = (612.0, 792.0)


@dataclass
class Reading:
    """What one input of ``count`` pages gave, page by page: each page read, the pages with no text, and why it fell short."""

    pages: list[PageRead] = field(default_factory=list)
    plain_text: str | None = None  # a text file's text, as `text` gives it
    empty: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    count: int = 0
    stop: str | None = None  # why it was read no further (its share of the run's time ran out), said first

    def add(self, read: PageRead, started: float) -> None:
        """Account for one page read, timed from ``started``."""
        if read.problem:
            # This page's error; the input's other pages, and the group's other inputs, are still read.
            self.problems.append(read.problem)
        elif read.empty:
            self.empty.append(read.number)
        read.entry["seconds"] = round(time.perf_counter() - started, 3)
        self.pages.append(read)

    def error(self) -> str | None:
        """The input error, or None when every page gave text."""
        found = list(self.problems)
        if self.empty:
            found.insert(0, f"OCR found no text on {pages_named(self.empty, self.count)} (a blank page, or no print on it?)")
        if self.stop:
            found.insert(0, self.stop)
        return "; ".join(found) or None

    def fields(self, settings: OcrSettings) -> dict[str, Any]:
        """The record's text, Markdown and page offsets, from the pages' words laid out as one document."""
        if self.plain_text is not None:
            return {"text": clean_text(self.plain_text, settings.scripts) or None}
        words = [read.words or PageWords(read.number, *_UNKNOWN_PAGE_SIZE, (), Source.OCR) for read in self.pages]
        return document_fields(lay_out(words), [read.entry for read in self.pages])


def prepare(name: str = "ocr") -> None:
    """Everything a first group would fail on, done before it: the settings parsed, the engine built, the decoder started once."""
    settings = current_settings()
    load_engine()
    with Decoder(settings) as decoder:
        decoder.start()  # and ended: a process left running now would be the host's, not a run's, and never ended


def _read_pages(decoder: Decoder, reading: Reading, shares: TimeShares, share: Share, ctx: ProcessorContext) -> None:
    """The open input's pages, up to the page cap, while ``share`` holds another page; each page read counted done (``ctx``)."""
    count, settings = reading.count, decoder.settings
    reader = PageReader(decoder, settings)
    for index in range(min(count, settings.max_pages)):
        if not shares.page_fits(share):
            reading.stop = stopped(index, count, share)
            return
        started = time.perf_counter()
        try:
            read = reader.read(index, until=share.until)
        except OutOfTime:
            reading.stop = stopped(index, count, share, decoding=index + 1)
            return
        reading.add(read, started)
        ctx.pages_done(1)
        shares.page_took(time.perf_counter() - started)
    if count > settings.max_pages:
        reading.problems.append(f"{count} pages, more than {ENV_MAX_PAGES}={settings.max_pages}: the first {settings.max_pages} read")


def read_document(
    data: bytes, content_type: str, reading: Reading, decoder: Decoder, shares: TimeShares, share: Share, ctx: ProcessorContext
) -> None:
    """Fill ``reading`` from one PDF or image within ``share``. Raise ExtractionFailed for one that cannot be read."""
    if content_type == "application/pdf":
        kind = "pdf"
    elif content_type in IMAGE_TYPES:
        kind = "image"
    elif content_type.startswith("text/") or content_type == "application/json":
        # A folder of scans often holds a note or a listing beside them: its text, as `text` gives it, with no pages.
        reading.plain_text = text_of(data)
        return
    else:
        raise ExtractionFailed(f"unsupported content type {content_type}: the ocr processor reads PDFs, PNG, JPEG, TIFF and text files")
    try:
        reading.count = decoder.open(data, kind, until=share.until)
    except OutOfTime:
        reading.stop = not_opened(share)
        return
    _read_pages(decoder, reading, shares, share, ctx)


def _record(group: Group, position: int, ctx: ProcessorContext, decoder: Decoder, shares: TimeShares) -> dict[str, Any]:
    path = group.paths[position]
    record: dict[str, Any] = {"id": f"{group.hash}:{position}", "source": path, "text": None}
    share = shares.next()
    if share.seconds <= 0:
        ctx.record_input_error(path, not_reached())
        return {**record, "metadata": {}, "error": not_reached()}
    try:
        data = ctx.read_input(path)
    except InputNotFound as exc:
        ctx.record_input_error(path, str(exc))
        return {**record, "metadata": {}, "error": str(exc)}
    content_type = sniffed_image_type(data) or content_type_of(path, data)
    reading = Reading()
    try:
        read_document(data, content_type, reading, decoder, shares, share, ctx)
        error = reading.error()
    except ExtractionFailed as exc:
        # Why it stopped, then what the pages before it gave.
        error = "; ".join([str(exc), *filter(None, [reading.error()])])
    record.update(reading.fields(decoder.settings))
    metadata = {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "content_type": content_type,
        "pages": [read.entry for read in reading.pages],
        "processor": processor_account(decoder.settings),
    }
    if error:
        # Not an empty success: status counts it, and the record says why text is missing.
        ctx.record_input_error(path, error)
        record["error"] = error
    return {**record, "metadata": metadata}


def ocr(group: Group, ctx: ProcessorContext) -> None:
    """The text of each input (PDF, PNG, JPEG, TIFF; a text file as it is), OCR'd where it has no text layer, into one JSON line per input.

    A storage failure raises, so the attempt is retried; anything wrong with
    one input is that input's error record. The decoder is ended before the
    result is written: nothing the run started outlives it.
    """
    shares = TimeShares(ctx.remaining_seconds(), len(group.paths))
    with Decoder(current_settings()) as decoder:
        records = [_record(group, position, ctx, decoder, shares) for position in range(len(group.paths))]
    ctx.write_result(records)
