"""Tables found from geometry: rows and cells from the words' boxes and the page's ruling lines.

Ruled tables first (a grid of rules gives its cells; horizontal rules alone
give a booktabs table's extent), then tables with no rules among the words
left, found by alignment. A word is claimed by one table at most.
"""

from __future__ import annotations

from s3wq.processors.ocr.layout.model import PageWords
from s3wq.processors.ocr.layout.table_cells import Table, cell_gap_ems, lines_of
from s3wq.processors.ocr.layout.table_rules import ruled_tables
from s3wq.processors.ocr.layout.table_unruled import unruled_tables

__all__ = ["Table", "find_tables"]


def find_tables(page: PageWords) -> list[Table]:
    """The tables on ``page``, top to bottom."""
    if not page.words:
        return []
    free = set(range(len(page.words)))
    gap_ems = cell_gap_ems(page.words, lines_of(page.words, free))
    tables = ruled_tables(page, free, gap_ems)
    for table in tables:
        free -= table.words
    tables += unruled_tables(page, free, gap_ems)
    return sorted(tables, key=lambda table: (table.box.top, table.box.left))
