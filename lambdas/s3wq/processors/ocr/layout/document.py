"""A document's pages laid out, their furniture lifted, and what a record holds of them: text, per-page spans, Markdown.

The spans are olmocr's Dolma ``attributes.pdf_page_numbers``: one
``[start, end, page number]`` per page, in order, character offsets into
``text`` with ``end`` exclusive. They are contiguous and cover the text: the
separator after a page's text belongs to that page's span, as olmocr counts
the newline it puts after every page but the last. So
``text[start:end]`` is the page's text followed by its separator, and a page
with no text has an empty span (and no separator of its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from s3wq.processors.ocr.layout.blocks import assign_levels
from s3wq.processors.ocr.layout.furniture import strip_furniture
from s3wq.processors.ocr.layout.markdown import page_markdown
from s3wq.processors.ocr.layout.model import PageLayout, PageWords
from s3wq.processors.ocr.layout.page import read_layout

# Between pages as between paragraphs: a page's last paragraph and the next page's first are two paragraphs.
PAGE_SEPARATOR = "\n\n"

PageSpan = tuple[int, int, int]  # (start, end, page number), as olmocr's pdf_page_numbers


@dataclass(frozen=True)
class DocumentLayout:
    """Every page's layout, in order, and the document's body text, page spans and Markdown made of them."""

    pages: list[PageLayout]

    @cached_property
    def _texts(self) -> tuple[str, list[PageSpan]]:
        texts = [page.text for page in self.pages]
        last = max((i for i, text in enumerate(texts) if text), default=-1)
        parts: list[str] = []
        spans: list[PageSpan] = []
        start = 0
        for index, (page, text) in enumerate(zip(self.pages, texts)):
            part = text + PAGE_SEPARATOR if text and index < last else text
            parts.append(part)
            spans.append((start, start + len(part), page.number))
            start += len(part)
        return "".join(parts), spans

    @property
    def text(self) -> str:
        """The body text of every page, in order, ``PAGE_SEPARATOR`` between pages."""
        return self._texts[0]

    @property
    def page_spans(self) -> list[PageSpan]:
        """``(start, end, page number)`` of each page's text (and the separator after it) in ``text``."""
        return self._texts[1]

    @cached_property
    def markdown(self) -> str:
        """The document as Markdown, a blank line between pages as between blocks."""
        return PAGE_SEPARATOR.join(text for text in (page_markdown(page) for page in self.pages) if text)


def read_document(pages: Sequence[PageWords]) -> DocumentLayout:
    """Every page laid out, then the furniture lifted over the whole document and the headings levelled across it."""
    layouts = [read_layout(page) for page in pages]
    strip_furniture(layouts)
    assign_levels(block for layout in layouts for block in layout.blocks)
    return DocumentLayout(layouts)
