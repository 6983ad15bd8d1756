"""Reading order from geometry: a page cut into regions (bands, columns, sidebars), each read top to bottom.

A recursive cut, of the XY-cut family, over the fragments of lines (and
the tables) of a page, with their boxes turned upright:

1. The region is sliced into strips at every horizontal gap between the
   cores of its boxes (each box's middle half-height, so that the boxes of
   tightly set lines, which touch, still part): a strip is one printed row.
2. Strips are gathered top to bottom into runs that share a gutter: a
   vertical band with no box in it, at least ``GUTTER_EMS`` wide, with
   print on both sides. A heading across two columns ends a run of two
   columns, so it keeps its place between them; a run gathers both columns
   even where their paragraphs' gaps happen to line up, which a cut at the
   widest whitespace first would take for bands.
3. A run with gutters is cut into columns, left to right, and each column
   read as a region of its own (it may hold columns or a box in turn). A
   column narrower than ``COLUMN_EMS`` ems, or whose lines fill less than
   half its width, is not a column of text (a table's column of figures, a
   list's bullets), nor is one whose lines are level with its neighbour's
   while the two differ in width (a definition list's terms and
   definitions): it stays with its neighbour. A run without gutters is read
   row by row, and its fragments joined into lines.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from s3wq.processors.ocr.layout.lines import merge_row, same_line
from s3wq.processors.ocr.layout.model import Box, Line
from s3wq.processors.ocr.layout.tables import Table

GUTTER_EMS = 1.0
# Tables are found before order (tables.py), so a column of figures rarely reaches here: a column is
# judged by its fill and its rows; a sidebar of short lines beside the body is 6 ems or more.
COLUMN_EMS = 6.0
# An OCR line's box holds its ascenders and descenders and the detector's margin: about 1.4 times its type size.
OCR_BOX_PER_EM = 1.4
_MIN_FILL = 0.5
_FILL_FROM = 3  # a column of fewer lines is not judged by its fill
_EQUAL_WIDTHS = 0.75  # columns of text are this near one width
_LEVEL_EMS = 0.25  # lines whose middles are this near are level with each other
_PAIRED_SHARE = 0.8
_CORE = 0.25  # a box's core: its middle, this share of its height either way

Interval = tuple[float, float]


@dataclass(frozen=True)
class Placed:
    """A line (or a fragment of one) or a table, with its box turned upright: the box that order reads."""

    box: Box
    content: Line | Table

    @property
    def size(self) -> float:
        """The type size to compare lines by: a text layer's font size; for OCR (whose words' sizes are their boxes'
        heights, which vary with their letters) the height of the whole line's upright box."""
        if isinstance(self.content, Line):
            return self.content.size if self.content.words[0].confidence is None else self.box.height / OCR_BOX_PER_EM
        return self.box.height


@dataclass(frozen=True)
class Region:
    """Lines and tables read together, in order: a column, a sidebar, a band across the page."""

    items: tuple[Placed, ...]


def reading_order(items: Sequence[Placed]) -> list[Region]:
    """The page's regions in reading order, each of its lines and tables top to bottom."""
    lines = [p.size for p in items if isinstance(p.content, Line)]
    if not items:
        return []
    size = statistics.median(lines) if lines else statistics.median(p.box.height for p in items)
    regions: list[Region] = []
    _read(list(items), max(size, 1e-3), regions)
    return regions


def _read(items: list[Placed], size: float, regions: list[Region]) -> None:
    for run, free in _runs(items, size):
        columns = _columns(run, free, size)
        if len(columns) == 1:
            regions.append(Region(tuple(_rows(run))))
        else:
            for column in columns:
                _read(column, size, regions)


def _runs(items: list[Placed], size: float) -> list[tuple[list[Placed], list[Interval]]]:
    """The region's strips, top to bottom, gathered into runs that share a gutter (or, when none has one, that share none),
    each with the x intervals free in all its strips."""
    left, right = min(p.box.left for p in items), max(p.box.right for p in items)
    runs: list[tuple[list[Placed], list[Interval]]] = []
    for strip in _strips(items):
        free = _free(strip, left, right)
        if runs:
            run, shared = runs[-1]
            merged = _intersect(shared, free)
            if _has_gutter(merged, left, right, size) or not (
                _has_gutter(shared, left, right, size) or _has_gutter(free, left, right, size)
            ):
                run.extend(strip)
                runs[-1] = (run, merged)
                continue
        runs.append((list(strip), free))
    return runs


def _strips(items: list[Placed]) -> list[list[Placed]]:
    """Items cut into strips at every horizontal gap between their cores (a box's middle half)."""
    cored = sorted(
        (
            (p.box.middle - _CORE * p.box.height, p.box.middle + _CORE * p.box.height, p.box.left, p.box.right, i)
            for i, p in enumerate(items)
        )
    )
    strips: list[list[Placed]] = []
    bottom = float("-inf")
    for top, end, _, _, index in cored:
        if strips and top <= bottom:
            strips[-1].append(items[index])
            bottom = max(bottom, end)
        else:
            strips.append([items[index]])
            bottom = end
    return strips


def _free(strip: list[Placed], left: float, right: float) -> list[Interval]:
    """The x intervals from ``left`` to ``right`` that no box of the strip covers."""
    free: list[Interval] = []
    reach = left
    for box in sorted((p.box for p in strip), key=lambda b: b.left):
        if box.left > reach:
            free.append((reach, box.left))
        reach = max(reach, box.right)
    if reach < right:
        free.append((reach, right))
    return free


def _intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _gutters(free: list[Interval], left: float, right: float, size: float) -> list[Interval]:
    """The free intervals with print on both sides (not the margins), wide enough to part columns."""
    return [(a, b) for a, b in free if a > left and b < right and b - a >= GUTTER_EMS * size]


def _has_gutter(free: list[Interval], left: float, right: float, size: float) -> bool:
    return bool(_gutters(free, left, right, size))


def _columns(run: list[Placed], free: list[Interval], size: float) -> list[list[Placed]]:
    """The run cut at its gutters into columns of text, left to right; a column that is not text joins its neighbour."""
    left, right = min(p.box.left for p in run), max(p.box.right for p in run)
    cuts = [(a + b) / 2 for a, b in _gutters(free, left, right, size)]
    columns: list[list[Placed]] = [[] for _ in range(len(cuts) + 1)]
    for item in run:
        columns[sum(1 for cut in cuts if item.box.left > cut)].append(item)
    widths = [b - a for a, b in _gutters(free, left, right, size)]
    while len(columns) > 1:
        weak = next((i for i, column in enumerate(columns) if not _is_text(column, columns, i, size)), None)
        if weak is None:
            break
        # Join the weak column with its neighbour across the narrower gutter (the only one, at an edge).
        other = weak - 1 if weak == len(columns) - 1 or (weak > 0 and widths[weak - 1] <= widths[weak]) else weak + 1
        low = min(weak, other)
        columns[low : low + 2] = [columns[low] + columns[low + 1]]
        del widths[low]
    return columns


def _is_text(column: list[Placed], columns: list[list[Placed]], index: int, size: float) -> bool:
    """A column of text: wide enough, filled by its lines, and beside its neighbours (not above or below them)."""
    left, right = min(p.box.left for p in column), max(p.box.right for p in column)
    width = right - left
    if width < COLUMN_EMS * size:
        return False
    if len(column) >= _FILL_FROM and statistics.median(p.box.width for p in column) < _MIN_FILL * width:
        return False
    top, bottom = min(p.box.top for p in column), max(p.box.bottom for p in column)
    for neighbour in (columns[i] for i in (index - 1, index + 1) if 0 <= i < len(columns)):
        shared = min(bottom, max(p.box.bottom for p in neighbour)) - max(top, min(p.box.top for p in neighbour))
        if shared < size or _paired(column, neighbour, width, size):
            return False
    return True


def _paired(column: list[Placed], neighbour: list[Placed], width: float, size: float) -> bool:
    """Whether ``column`` and ``neighbour`` are the two sides of rows (a definition list, a table with no rules),
    not two columns of text: of unequal widths, and nearly every line of the shorter side level with one of the other.
    Columns of text are set to one width, and a sidebar beside them to a leading of its own."""
    other = max(p.box.right for p in neighbour) - min(p.box.left for p in neighbour)
    if min(width, other) >= _EQUAL_WIDTHS * max(width, other):
        return False
    fewer, more = sorted((column, neighbour), key=len)
    middles = sorted(p.box.middle for p in more)
    level = sum(1 for p in fewer if _near(middles, p.box.middle, _LEVEL_EMS * size))
    return level >= _PAIRED_SHARE * len(fewer)


def _near(ordered: list[float], value: float, within: float) -> bool:
    at = bisect.bisect_left(ordered, value - within)
    return at < len(ordered) and ordered[at] <= value + within


def _rows(run: list[Placed]) -> list[Placed]:
    """A column's items row by row, top to bottom; a row's fragments joined into lines, a table on its own."""
    tables = [p for p in run if not isinstance(p.content, Line)]
    rows: list[list[Placed]] = []
    for item in sorted((p for p in run if isinstance(p.content, Line)), key=lambda p: (p.box.middle, p.box.left)):
        if rows and same_line(rows[-1][-1].box, item.box):
            rows[-1].append(item)
        else:
            rows.append([item])
    placed = [_joined(row) for row in rows] + [[t] for t in tables]
    placed.sort(key=lambda row: (row[0].box.top, row[0].box.left))
    return [p for row in placed for p in row]


def _joined(row: list[Placed]) -> list[Placed]:
    """One row's fragments as lines, with boxes from the fragments' upright boxes."""
    if len(row) == 1:
        return row
    upright = {id(p.content): p.box for p in row}
    fragments = [p.content for p in row if isinstance(p.content, Line)]
    joined: list[Placed] = []
    for line in merge_row(fragments):
        if id(line) in upright:
            joined.append(Placed(upright[id(line)], line))
        else:
            parts = [p.box for p in row if isinstance(p.content, Line) and p.content.words[0] in line.words]
            joined.append(Placed(Box.around(parts), line))
    return joined
