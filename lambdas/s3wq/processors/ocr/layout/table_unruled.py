"""Tables with no ruling lines, found by alignment alone.

Rows are lines; cells are runs of words split by gaps well above a word
gap. Lines of two short cells or more that follow one another closely, in
the same stretch of the page's width, are chained into a candidate; a
candidate is a table when at least ``MIN_ROWS`` of its rows have two cells
and at least ``MIN_ALIGNED`` of its columns line up.

What looks like a table but is not is told by the length of its lines: a
column of prose fills its width with long lines (a long cell ends a run of
cells, and closes any candidate above it in the same stretch), a table's
cells are short. So two-column prose is two long cells a line, a
hanging-indent list a marker and a long cell; and short ones are told by
what their first column holds (list markers, "Label:").
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from s3wq.processors.ocr.layout.model import Box, PageWords
from s3wq.processors.ocr.layout.table_cells import (
    Cell,
    CellLine,
    Column,
    PageLines,
    Table,
    aligned_columns,
    columns_of,
    rows_of,
    spanned,
    sub_line,
    words_in,
)

MIN_ROWS = 3  # rows of two cells or more, the header's included
MIN_ALIGNED = 2  # columns whose cells line up
LONG_CELL_WORDS = 7  # a cell of this many words is a line of prose, not a table's cell
LONG_CELL_SHARE = 0.4  # ... and so is one this wide, as a share of the page's text
TEXT_SHARE = 0.5  # the page's text is judged at least this share of its width wide (a page of a few short lines is not narrow)
ROW_REACH = 2.5  # lines further apart than this many line heights are not rows of one table
SAME_STRETCH = 0.5  # a line's cells continue a candidate when they share this much of the narrower width
PROSE_CELL_WORDS = 4  # a column whose cells hold this many words on average ...
PROSE_FILL = 0.7  # ... and fill this much of its width, most of them, is a column of prose
LIST_MARKER = re.compile(r"^(?:[•◦▪‣∙·*\u2013\u2014-]|\(?(?:\d{1,3}|[a-zA-Z]|[ivxlcdmIVXLCDM]{1,5})[.)])$")


@dataclass
class _Candidate:
    """Lines chained so far: the runs of short cells that may be a table's rows."""

    lines: list[CellLine] = field(default_factory=list)

    @property
    def bottom(self) -> float:
        return self.lines[-1].box.bottom

    def stretch(self) -> tuple[float, float]:
        """Its left and right, as most of its rows have them: a stray cell of a neighbouring column does not widen it."""
        rows = [line for line in self.lines if len(line.cells) > 1] or self.lines
        return statistics.median(r.box.left for r in rows), statistics.median(r.box.right for r in rows)


def unruled_tables(page: PageWords, text: PageLines, free: set[int]) -> list[Table]:
    """The tables with no ruling lines among the ``free`` words (indexes) of ``page``, whose lines are ``text``."""
    lines = text.cells(free.__contains__)
    if not lines:
        return []
    text_width = Box.around(line.box for line in lines).width
    long_width = LONG_CELL_SHARE * max(text_width, TEXT_SHARE * page.width)

    def is_long(cell: Cell) -> bool:
        return len(cell.words) >= LONG_CELL_WORDS or cell.box.width >= long_width

    tables = []
    for candidate in _candidates(lines, is_long):
        if (table := _table_of(page, candidate.lines)) is not None:
            tables.append(table)
    return tables


def _candidates(lines: Sequence[CellLine], is_long: Callable[[Cell], bool]) -> Iterator[_Candidate]:
    """Runs of short cells chained line by line; a candidate ends when a line of prose crosses it or nothing follows it."""
    open_: list[_Candidate] = []
    for line in lines:
        reach = ROW_REACH * line.box.height
        yield from (c for c in open_ if line.box.top - c.bottom > reach)
        open_ = [c for c in open_ if line.box.top - c.bottom <= reach]
        for run, long in _runs(line, is_long):
            if long:
                yield from (c for c in open_ if _shared(run.box, c.stretch()) > 0)
                open_ = [c for c in open_ if _shared(run.box, c.stretch()) <= 0]
                continue
            best = max(open_, key=lambda c: _shared(run.box, c.stretch()), default=None)
            if best is not None and _shared(run.box, best.stretch()) >= SAME_STRETCH * min(run.box.width, _width(best.stretch())):
                best.lines.append(run)
            elif len(run.cells) > 1:
                open_.append(_Candidate([run]))
    yield from open_


def _runs(line: CellLine, is_long: Callable[[Cell], bool]) -> Iterator[tuple[CellLine, bool]]:
    """The line's runs of short cells, and each long cell alone: (cells, whether it is a long cell)."""
    run: list[Cell] = []
    for cell in line.cells:
        if is_long(cell):
            if run:
                yield sub_line(run), False
            run = []
            yield sub_line([cell]), True
        else:
            run.append(cell)
    if run:
        yield sub_line(run), False


def _shared(box: Box, stretch: tuple[float, float]) -> float:
    return min(box.right, stretch[1]) - max(box.left, stretch[0])


def _width(stretch: tuple[float, float]) -> float:
    return stretch[1] - stretch[0]


def _table_of(page: PageWords, chained: Sequence[CellLine]) -> Table | None:
    """The table these chained lines make, if they make one."""
    lines = _trimmed(chained)
    if sum(1 for line in lines if len(line.cells) > 1) < MIN_ROWS:
        return None
    lines = _without_strays(lines)
    columns = columns_of(lines)
    if len(columns) < 2 or aligned_columns(lines, columns, MIN_ROWS) < MIN_ALIGNED:
        return None
    if _reads_as_prose(lines, columns) or _reads_as_a_list(lines, columns):
        return None
    claimed = words_in(lines)
    return Table(Box.around(page.words[i].box for i in claimed), rows_of(lines, columns), claimed)


def _trimmed(lines: Sequence[CellLine]) -> list[CellLine]:
    """The lines without the one-cell lines above the first row and below the last (a caption, a note), which are not rows."""
    rows = [i for i, line in enumerate(lines) if len(line.cells) > 1]
    return list(lines[rows[0] : rows[-1] + 1]) if rows else []


def _without_strays(lines: list[CellLine]) -> list[CellLine]:
    """The lines without the cells of a column at either edge that only one line has: the short last line of a paragraph in the next
    page column, caught up in a row's run of cells."""
    columns = columns_of(lines)
    if len(columns) < 3:
        return lines
    support = [0] * len(columns)
    for line in lines:
        for j in {j for cell in line.cells for j in spanned(cell, columns)}:
            support[j] += 1
    strays = {j for j in (0, len(columns) - 1) if support[j] <= 1}
    if not strays:
        return lines
    kept = [[cell for cell in line.cells if not set(spanned(cell, columns)) <= strays] for line in lines]
    return [sub_line(cells) for cells in kept if cells]


def _reads_as_prose(lines: Sequence[CellLine], columns: Sequence[Column]) -> bool:
    """Whether two of the columns (or all) are prose: cells of several words, most filling the column's width."""
    by_column: list[list[Cell]] = [[] for _ in columns]
    for line in lines:
        for cell in line.cells:
            if len(span := spanned(cell, columns)) == 1:
                by_column[span[0]].append(cell)
    prose = 0
    for (left, right), cells in zip(columns, by_column, strict=True):
        if cells and statistics.mean(len(c.words) for c in cells) >= PROSE_CELL_WORDS:
            prose += statistics.median(c.box.width for c in cells) >= PROSE_FILL * (right - left)
    return prose >= min(2, len(columns))


def _reads_as_a_list(lines: Sequence[CellLine], columns: Sequence[Column]) -> bool:
    """Whether two columns are a list's markers and its items, or a form's labels ("Name:") and values."""
    if len(columns) != 2:
        return False
    firsts = [line.cells[0].text for line in lines if spanned(line.cells[0], columns)[-1] == 0]
    return bool(firsts) and (all(LIST_MARKER.match(text) for text in firsts) or all(text.endswith(":") for text in firsts))
