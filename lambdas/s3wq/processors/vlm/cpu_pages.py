"""Pages read by the CPU path (the ``ocr`` processor's reader and layout), for ``auto``'s first reading and for the
fallbacks of pages the model could not read.

A page's CPU text is its Markdown (layout.markdown's ``page_markdown``: headings, lists, tables), as the model's
answer is Markdown, so that a document mixing the two routes reads as one. Furniture is left out as ``ocr`` leaves it
out: the whole input is laid out at once for ``auto``, so that running headers repeated across its pages are seen.
"""

from __future__ import annotations

import time

from s3wq.errors import InputNotFound
from s3wq.processors.builtins import ExtractionFailed
from s3wq.processors.context import ProcessorContext
from s3wq.processors.ocr.decoding import Decoder, OutOfTime
from s3wq.processors.ocr.layout.document import read_document as lay_out
from s3wq.processors.ocr.layout.markdown import page_markdown
from s3wq.processors.ocr.layout.model import PageWords, Source
from s3wq.processors.ocr.pages import PageRead, PageReader
from s3wq.processors.ocr.record import page_account
from s3wq.processors.ocr.routing import Route
from s3wq.processors.ocr.settings import OcrSettings
from s3wq.processors.ocr.time_shares import Share, TimeShares, stopped
from s3wq.processors.vlm.documents import Document, PageSlot

_UNKNOWN_PAGE_SIZE = (612.0, 792.0)  # a page that gave no words still has its place: a letter page, in points


def read_with_cpu(
    decoder: Decoder, settings: OcrSettings, doc: Document, pages: int, shares: TimeShares, share: Share
) -> list[tuple[PageSlot, PageRead]]:
    """The open input's first ``pages`` read and laid out, within ``share``: a slot for each, added to ``doc``."""
    reader = PageReader(decoder, settings)
    reads: list[PageRead] = []
    for index in range(pages):
        if not shares.page_fits(share):
            doc.problems.append(stopped(index, doc.count, share))
            break
        started = time.perf_counter()
        try:
            read = reader.read(index, until=share.until)
        except OutOfTime:
            doc.problems.append(stopped(index, doc.count, share, decoding=index + 1))
            break
        read.entry["seconds"] = round(time.perf_counter() - started, 3)
        reads.append(read)
        shares.page_took(time.perf_counter() - started)
    layout = lay_out([read.words or PageWords(read.number, *_UNKNOWN_PAGE_SIZE, (), Source.OCR) for read in reads])
    slots = []
    for read, page in zip(reads, layout.pages):
        entry = {**read.entry, **page_account(page)}
        slot = PageSlot(read.number, entry, cpu_text=page_markdown(page) or None, cpu_read=True)
        slot.blank = entry.get("route") == Route.BLANK.value
        slot.problem = read.problem or (f"page {read.number}: OCR found no text on it" if read.empty and not slot.blank else None)
        doc.slots.append(slot)
        slots.append((slot, read))
    return slots


def reread_with_cpu(ctx: ProcessorContext, decoder: Decoder, settings: OcrSettings, doc: Document, until: float) -> None:
    """The fallbacks of ``doc``: its pages the model could not read, read by the CPU path (the input opened again)."""
    wanted = [slot for slot in doc.slots if slot.wants_fallback()]
    kind = "pdf" if doc.facts.get("content_type") == "application/pdf" else "image"
    try:
        decoder.open(ctx.read_input(doc.path), kind, until=until)
    except (InputNotFound, ExtractionFailed, OutOfTime) as exc:
        for slot in wanted:
            slot.problem = f"page {slot.number}: the model could not read it, nor could the CPU path ({exc or 'out of time'})"
        return
    reader = PageReader(decoder, settings)
    for position, slot in enumerate(wanted):
        try:
            read = reader.read(slot.number - 1, until=until)
        except (OutOfTime, ExtractionFailed) as exc:
            for late in wanted[position:]:
                late.problem = (
                    f"page {late.number}: the model could not read it, and the CPU path ran out of time or failed ({exc or 'out of time'})"
                )
            return
        page = lay_out([read.words or PageWords(read.number, *_UNKNOWN_PAGE_SIZE, (), Source.OCR)]).pages[0]
        slot.cpu_text, slot.cpu_read = page_markdown(page) or None, True
        slot.entry["cpu_route"] = read.entry.get("route")
        doc.fall_back(slot, str(slot.entry.get("model_error") or "the model gave no answer"))
        if read.problem:
            slot.problem = read.problem
