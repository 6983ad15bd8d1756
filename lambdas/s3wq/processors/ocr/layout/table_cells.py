"""The geometry every kind of table shares: a page's words in lines, a line's cells, and the columns cells line up in.

A cell, on one line, is a run of words with no gap in it wider than a cell
gap: a few times the page's usual gap between words, and never less than
``CELL_GAP_EM_FLOOR`` ems, so that justified prose, whose gaps stretch, stays
in one cell. Columns are the whitespace rivers between cells: the x-ranges
that no cell of the table's body crosses.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from s3wq.processors.ocr.layout.model import Box, Word

CELL_GAP_EM_FLOOR = 0.8  # ems: a narrower gap is between two words, however tight the page sets them
CELL_GAP_WORD_GAPS = 2.5  # ... and so is one narrower than this many of the page's usual word gaps
WORD_GAP_EM_CEILING = 1.5  # ems: gaps wider than this are not word gaps, and the usual word gap is judged without them
LINE_OVERLAP = 0.4  # a word is on a line when it shares this much of the smaller height with it
ALIGNED_SHARE = 0.6  # a column is aligned when this share of its cells (and at least ``min_cells``) share an edge
ALIGNED_EMS = 0.5  # edges this close (in ems of the cells' size) are one edge


@dataclass(frozen=True)
class Table:
    """A table on the page: its box, its cells' texts row by row, and which of the page's words (by index) it holds."""

    box: Box
    rows: list[list[str]]
    words: frozenset[int]


@dataclass(frozen=True, slots=True)
class Cell:
    """A run of words of one line close enough to be read together: what one cell of a table holds on that line."""

    words: tuple[int, ...]  # indexes into the page's words, left to right
    box: Box
    text: str
    size: float


@dataclass(frozen=True, slots=True)
class CellLine:
    """One line of cells, left to right."""

    cells: tuple[Cell, ...]
    box: Box

    @property
    def size(self) -> float:
        return max(cell.size for cell in self.cells)


Column = tuple[float, float]  # a column's left and right, in points


@dataclass(frozen=True)
class PageLines:
    """A page's words in lines, read once for every kind of table, and the gap past which two words are in two cells."""

    words: Sequence[Word]
    lines: list[list[int]]
    gap_ems: float

    @staticmethod
    def of(words: Sequence[Word]) -> PageLines:
        lines = lines_of(words, range(len(words)))
        return PageLines(words, lines, cell_gap_ems(words, lines))

    def cells(self, keep: Callable[[int], bool]) -> list[CellLine]:
        """The lines of the words (indexes) that ``keep`` keeps, in cells."""
        kept_lines = ([i for i in line if keep(i)] for line in self.lines)
        return [cells_of(self.words, kept, self.gap_ems) for kept in kept_lines if kept]


def lines_of(words: Sequence[Word], chosen: Iterable[int]) -> list[list[int]]:
    """The ``chosen`` words (indexes) in lines, top to bottom, each line's words left to right."""
    lines: list[list[int]] = []
    top = bottom = 0.0
    for index in sorted(chosen, key=lambda i: (words[i].box.middle, words[i].box.left)):
        box = words[index].box
        shared = min(bottom, box.bottom) - max(top, box.top)
        if lines and shared >= LINE_OVERLAP * min(box.height, bottom - top):
            lines[-1].append(index)
            top, bottom = min(top, box.top), max(bottom, box.bottom)
        else:
            lines.append([index])
            top, bottom = box.top, box.bottom
    for line in lines:
        line.sort(key=lambda i: words[i].box.left)
    return lines


def cell_gap_ems(words: Sequence[Word], lines: Iterable[Sequence[int]]) -> float:
    """The gap, in ems, past which two words of a line are in two cells: well above the page's usual word gap."""
    gaps = []
    for line in lines:
        for before, after in pairwise(line):
            size = max(words[before].size, words[after].size, 1e-6)
            gap = (words[after].box.left - words[before].box.right) / size
            if 0 < gap < WORD_GAP_EM_CEILING:
                gaps.append(gap)
    usual = statistics.median(gaps) if gaps else 0.0
    return max(CELL_GAP_EM_FLOOR, CELL_GAP_WORD_GAPS * usual)


def cells_of(words: Sequence[Word], line: Sequence[int], gap_ems: float) -> CellLine:
    """A line of words (indexes, left to right) split into cells at every gap wider than ``gap_ems``."""
    runs: list[list[int]] = [[line[0]]]
    for before, after in pairwise(line):
        size = max(words[before].size, words[after].size)
        if words[after].box.left - words[before].box.right > gap_ems * size:
            runs.append([])
        runs[-1].append(after)
    cells = tuple(cell_of(words, run) for run in runs)
    return CellLine(cells, Box.around(cell.box for cell in cells))


def cell_of(words: Sequence[Word], run: Sequence[int]) -> Cell:
    return Cell(
        tuple(run),
        Box.around(words[i].box for i in run),
        " ".join(words[i].text for i in run),
        max(words[i].size for i in run),
    )


def sub_line(cells: Sequence[Cell]) -> CellLine:
    """A line of some of a line's cells (at least one)."""
    return CellLine(tuple(cells), Box.around(cell.box for cell in cells))


def columns_of(lines: Sequence[CellLine]) -> list[Column]:
    """The columns of a table's lines: the x-ranges between whitespace rivers.

    The rivers are read from the body's lines of two cells or more: a header
    cell that spans two columns, or a line of one cell (a section's label, a
    cell's second line), would close the river between them.
    """
    body = [line for line in lines[1:] if len(line.cells) > 1] or [line for line in lines if len(line.cells) > 1] or list(lines)
    columns: list[list[float]] = []
    for left, right in sorted((cell.box.left, cell.box.right) for line in body for cell in line.cells):
        if columns and left <= columns[-1][1]:
            columns[-1][1] = max(columns[-1][1], right)
        else:
            columns.append([left, right])
    return [(left, right) for left, right in columns]


def spanned(cell: Cell, columns: Sequence[Column]) -> range:
    """The columns ``cell`` lies in: those it overlaps, or the nearest one."""
    touched = [j for j, (left, right) in enumerate(columns) if cell.box.left < right and cell.box.right > left]
    if touched:
        return range(touched[0], touched[-1] + 1)
    nearest = min(range(len(columns)), key=lambda j: abs((columns[j][0] + columns[j][1]) / 2 - cell.box.centre))
    return range(nearest, nearest + 1)


def rows_of(lines: Sequence[CellLine], columns: Sequence[Column]) -> list[list[str]]:
    """The table's rows of cell texts: one row a line, but that a line with an empty first cell and few others continues the
    row above (a cell's second line); a cell spanning columns repeats in each."""
    rows: list[list[str]] = []
    most_continued = max(1, (len(columns) - 1) // 2)
    for line in lines:
        texts = [""] * len(columns)
        for cell in line.cells:
            for j in spanned(cell, columns):
                texts[j] = f"{texts[j]} {cell.text}".strip()
        filled = sum(1 for text in texts if text)
        if rows and not texts[0] and filled <= most_continued and len(columns) > 1:
            rows[-1] = [f"{above} {below}".strip() for above, below in zip(rows[-1], texts, strict=True)]
        else:
            rows.append(texts)
    return rows


def aligned_columns(lines: Sequence[CellLine], columns: Sequence[Column], min_cells: int) -> int:
    """How many columns have cells that line up on their left, right or centre: at least ``min_cells`` and ``ALIGNED_SHARE`` of them."""
    alone: list[list[Cell]] = [[] for _ in columns]
    for line in lines:
        for cell in line.cells:
            span = spanned(cell, columns)
            if len(span) == 1:
                alone[span[0]].append(cell)
    count = 0
    for cells in alone:
        if len(cells) < min_cells:
            continue
        tolerance = ALIGNED_EMS * statistics.median(cell.size for cell in cells)
        need = max(min_cells, ALIGNED_SHARE * len(cells))
        edges = ([c.box.left for c in cells], [c.box.right for c in cells], [c.box.centre for c in cells])
        if any(_largest_cluster(values, tolerance) >= need for values in edges):
            count += 1
    return count


def _largest_cluster(values: list[float], tolerance: float) -> int:
    """The most ``values`` that lie within ``tolerance`` of one another."""
    ordered, best, start = sorted(values), 0, 0
    for end, value in enumerate(ordered):
        while value - ordered[start] > tolerance:
            start += 1
        best = max(best, end - start + 1)
    return best


def words_in(lines: Iterable[CellLine]) -> frozenset[int]:
    return frozenset(index for line in lines for cell in line.cells for index in cell.words)
