"""The tables of a system's output, as grids of cell texts: Markdown pipe tables and HTML tables (a cell spanning columns repeats).

A table test asks whether the cell reading A has B to its right, under it,
at the head of its column or at the start of its row, in any of them.
"""

from __future__ import annotations

import re
from enum import StrEnum
from html.parser import HTMLParser

from doc_matching import same_cell

Grid = list[list[str]]
_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?$")


class Relation(StrEnum):
    RIGHT = "right"
    DOWN = "down"
    TOP_HEADING = "top_heading"
    LEFT_HEADING = "left_heading"


def markdown_tables(text: str) -> list[Grid]:
    """Runs of lines that start with ``|``, separator rows dropped, each row's cells between its pipes."""
    tables: list[Grid] = []
    current: Grid = []
    for line in [*text.splitlines(), ""]:
        stripped = line.strip()
        if stripped.startswith("|"):
            if not _SEPARATOR.match(stripped):
                current.append([cell.strip() for cell in stripped.strip("|").split("|")])
        elif current:
            tables.append(current)
            current = []
    return tables


class _HtmlTables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: list[Grid] = []
        self.open: list[Grid] = []  # nested tables: the innermost last
        self.cell: list[str] | None = None
        self.span = 1

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.open.append([])
        elif tag == "tr" and self.open:
            self.open[-1].append([])
        elif tag in ("td", "th") and self.open:
            if not self.open[-1]:
                self.open[-1].append([])
            self.cell = []
            span = dict(attrs).get("colspan") or "1"
            self.span = int(span) if span.isdigit() else 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.open:
            self.open[-1][-1].extend([" ".join("".join(self.cell).split())] * max(1, self.span))
            self.cell = None
        elif tag == "table" and self.open:
            self.tables.append([row for row in self.open.pop() if row])

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def html_tables(text: str) -> list[Grid]:
    parser = _HtmlTables()
    parser.feed(text)
    parser.close()
    return parser.tables


def neighbour(grid: Grid, row: int, column: int, relation: Relation) -> str | None:
    """The cell in ``relation`` to (row, column), or None past the grid's edge."""
    target = {
        Relation.RIGHT: (row, column + 1),
        Relation.DOWN: (row + 1, column),
        Relation.TOP_HEADING: (0, column),
        Relation.LEFT_HEADING: (row, 0),
    }[relation]
    r, c = target
    if (r, c) == (row, column) or r >= len(grid) or c >= len(grid[r]):
        return None
    return grid[r][c]


def holds(cell: str, relation: Relation, other: str, output: str) -> bool:
    """Whether some table of ``output`` has a cell reading ``cell`` whose ``relation`` cell reads ``other``."""
    for grid in (*markdown_tables(output), *html_tables(output)):
        for r, row in enumerate(grid):
            for c, text in enumerate(row):
                if same_cell(cell, text):
                    found = neighbour(grid, r, c, relation)
                    if found is not None and same_cell(other, found):
                        return True
    return False
