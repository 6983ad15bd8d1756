"""Page furniture: running headers and footers, page numbers and banners, lifted out of a document's body."""

from __future__ import annotations

from s3wq.processors.ocr.layout.model import PageLayout


def strip_furniture(pages: list[PageLayout]) -> None:
    """Move each page's furniture from its blocks to its ``furniture``, in place. (Placeholder: moves nothing yet.)"""
