"""The record of one input the ``ocr`` processor writes: its text, Markdown, per-page text and offsets, and who made it.

Its fields, for a reader of ``text`` from before (``id``, ``source``,
``text``, ``metadata`` with ``pages``, ``error``) keep their meaning; ``text``
is now the document's body in reading order, furniture left out. Added:

* ``markdown``: the document as Markdown (headings, lists, tables);
* ``attributes.pdf_page_numbers``: ``[start, end, page]`` for each page, the
  character offsets of its text in ``text``, as olmocr's Dolma documents give
  them (a page with no text has ``start == end``);
* in each ``metadata.pages`` entry: ``route`` and ``reason`` (how the page
  was read, and why), ``flags`` (``low_confidence``, ``handwriting``),
  ``furniture`` (the headers, footers, page numbers and banners left out of
  the body, each ``{"kind", "text"}``), ``tables`` and ``equations`` (how
  many of each the page's body holds);
* ``metadata.processor``: the processor's name, version, engine and settings.

docs/processors.md ("The ocr record") shows one.
"""

from __future__ import annotations

import functools
import importlib.metadata
from typing import Any

from s3wq.processors.ocr.layout.document import DocumentLayout
from s3wq.processors.ocr.layout.model import BlockKind, PageLayout
from s3wq.processors.ocr.settings import OcrSettings

PROCESSOR_NAME = "ocr"


@functools.cache
def processor_account(settings: OcrSettings) -> dict[str, Any]:
    """Who made a record: the processor, s3wq's version, the engine's, and the settings that shape what it reads."""
    return {
        "name": PROCESSOR_NAME,
        "version": importlib.metadata.version("s3wq") if _installed("s3wq") else "unknown",
        "engine": f"rapidocr {importlib.metadata.version('rapidocr')}" if _installed("rapidocr") else "rapidocr",
        "settings": {
            "mode": settings.mode.value,
            "scripts": sorted(script.value for script in settings.scripts),
            "dpi": settings.dpi,
            "max_pixels": settings.max_pixels,
            "max_pages": settings.max_pages,
        },
    }


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def page_account(page: PageLayout) -> dict[str, Any]:
    """What layout found on one page, for its ``metadata.pages`` entry."""
    return {
        "furniture": [{"kind": item.kind.value, "text": item.text} for item in page.furniture],
        "tables": sum(1 for block in page.blocks if block.kind is BlockKind.TABLE),
        "equations": page.equations,
    }


def document_fields(document: DocumentLayout, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The record's ``text``, ``markdown`` and ``attributes`` from ``document``; each page's layout added to its entry."""
    by_number = {page.number: page for page in document.pages}
    for entry in entries:
        page = by_number.get(entry["page"])
        if page is not None:
            entry.update(page_account(page))
    return {
        "text": document.text or None,
        "markdown": document.markdown,
        "attributes": {"pdf_page_numbers": [list(span) for span in document.page_spans]},
    }
