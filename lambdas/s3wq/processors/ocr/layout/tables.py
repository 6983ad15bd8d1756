"""Tables found from geometry: rows and cells from the words' boxes and the page's ruling lines."""

from __future__ import annotations

from dataclasses import dataclass

from s3wq.processors.ocr.layout.model import Box, PageWords


@dataclass(frozen=True)
class Table:
    """A table on the page: its box, its cells' texts row by row, and which of the page's words (by index) it holds."""

    box: Box
    rows: list[list[str]]
    words: frozenset[int]


def find_tables(page: PageWords) -> list[Table]:
    """The tables on ``page``. (Placeholder: finds none yet.)"""
    return []
