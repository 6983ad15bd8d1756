"""Tables found from geometry: rows and cells from the words' boxes and the page's ruling lines.

Ruled tables first (a grid of rules gives its cells; horizontal rules alone
give a booktabs table's extent), then tables with no rules among the words
left, found by alignment. A word is claimed by one table at most.
"""

from __future__ import annotations

from s3wq.processors.ocr.layout.model import PageWords
from s3wq.processors.ocr.layout.table_cells import PageLines, Table
from s3wq.processors.ocr.layout.table_rules import ruled_tables
from s3wq.processors.ocr.layout.table_unruled import unruled_tables

__all__ = ["Table", "find_tables"]


def find_tables(page: PageWords) -> list[Table]:
    """The tables on ``page``, top to bottom."""
    if not page.words:
        return []
    text = PageLines.of(page.words)
    tables = ruled_tables(page, text)
    free = set(range(len(page.words))).difference(*(table.words for table in tables))
    tables += unruled_tables(page, text, free)
    return sorted(tables, key=lambda table: (table.box.top, table.box.left))
