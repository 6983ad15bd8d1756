"""OCR'd lines in the order a page is printed: boxes grouped into lines top to bottom, each line read left to right.

A page set in two columns is read column by column: when a vertical gutter
runs down the middle of the text, with a column of lines of full width on
either side, each band between headings that span both columns gives its
left column's lines, then its right column's. A table whose right side is a
narrow column (of figures, say) is not taken for two columns: its rows stay
rows.
"""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

Point = Sequence[float]

# A gutter lies in the middle half of the text's width, is at least this many line heights wide,
# and at most this share of the boxes (or this many, on a short page) crosses it: a heading over both columns does.
_GUTTER_ZONE = (0.25, 0.75)
_GUTTER_LINE_HEIGHTS = 1.0
_CROSSING_SHARE = 0.15
_CROSSING_FEW = 3
# Each column holds at least this many boxes, whose median width is at least this share of the column's.
_MIN_COLUMN_BOXES = 3
_MIN_FILL = 0.5


@dataclass(frozen=True)
class Piece:
    """One box the engine read: its edges and vertical centre, in pixels, and its text."""

    left: float
    right: float
    top: float
    bottom: float
    text: str

    @classmethod
    def of(cls, box: Sequence[Point], text: str) -> Piece:
        xs = [float(p[0]) for p in box]
        ys = [float(p[1]) for p in box]
        return cls(left=min(xs), right=max(xs), top=min(ys), bottom=max(ys), text=text)

    @property
    def middle(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def height(self) -> float:
        return self.bottom - self.top


def printed_lines(boxes: Sequence[Sequence[Point]] | None, texts: Sequence[str] | None) -> list[str]:
    """The text of each printed line, top to bottom; a two-column page's left column before its right."""
    if boxes is None or texts is None:
        return []
    pieces = [Piece.of(box, text) for box, text in zip(boxes, texts)]
    gutter = _gutter(pieces)
    if gutter is None:
        return _lines(pieces)
    lines: list[str] = []
    for band, heading in _bands(pieces, gutter):
        lines += _lines([p for p in band if p.right <= gutter]) + _lines([p for p in band if p.left >= gutter])
        lines += _lines(heading)
    return lines


def _lines(pieces: list[Piece]) -> list[str]:
    """Pieces grouped into lines, top to bottom, each read left to right.

    A box joins the line above it when its centre lies within half its own
    height of that line's mean centre: boxes of one line of print sit at one
    height whatever their widths, and the next line is a full line height lower.
    """
    lines: list[list[Piece]] = []
    for piece in sorted(pieces, key=lambda p: (p.middle, p.left)):
        if lines and abs(piece.middle - statistics.fmean(p.middle for p in lines[-1])) < piece.height / 2:
            lines[-1].append(piece)
        else:
            lines.append([piece])
    return [" ".join(p.text for p in sorted(line, key=lambda p: p.left)) for line in lines]


def _gutter(pieces: list[Piece]) -> float | None:
    """The x of the gap between two columns of text, or None for a page read line by line."""
    if len(pieces) < 2 * _MIN_COLUMN_BOXES:
        return None
    start, end = min(p.left for p in pieces), max(p.right for p in pieces)
    width, line_height = end - start, statistics.median(p.height for p in pieces)
    low, high = start + _GUTTER_ZONE[0] * width, start + _GUTTER_ZONE[1] * width
    # Candidate gaps: between the right edge of one box and the next left edge, ignoring crossing boxes;
    # counted on the sorted edges (bisect), so that a page of thousands of boxes costs O(n log n).
    edges = sorted({p.right for p in pieces if low <= p.right <= high} | {low})
    lefts, rights = sorted(p.left for p in pieces), sorted(p.right for p in pieces)
    # A box of no width lies at its left edge: never crossing a gap there, it closes the gap at once.
    points = Counter(p.left for p in pieces if p.left == p.right)
    best: tuple[float, float] | None = None
    for x in edges:
        reach = x + _GUTTER_LINE_HEIGHTS * line_height
        if _crossing(lefts, rights, points, x, reach) <= max(_CROSSING_FEW, _CROSSING_SHARE * len(pieces)):
            # The first box right of x that does not cross: a point at x, else the first left edge at or past reach.
            after = bisect.bisect_left(lefts, reach)
            gap_end = x if points[x] else (lefts[after] if after < len(lefts) else end)
            if best is None or gap_end - x > best[1] - best[0]:
                best = (x, gap_end)
    if best is None or best[1] - best[0] < _GUTTER_LINE_HEIGHTS * line_height:
        return None
    gutter = (best[0] + best[1]) / 2
    return gutter if _columns_of_text(pieces, gutter, start, end) else None


def _crossing(lefts: list[float], rights: list[float], points: Counter[float], x: float, reach: float) -> int:
    """How many boxes cross the gap from ``x`` to ``reach`` (left < reach and right > x), from the sorted edges, in O(log n).

    A box with right <= x also has left < reach, but for a point at ``x`` when ``reach`` is ``x``.
    """
    ending = bisect.bisect_right(rights, x) - (points[x] if reach == x else 0)
    return bisect.bisect_left(lefts, reach) - ending


def _columns_of_text(pieces: list[Piece], gutter: float, start: float, end: float) -> bool:
    """Both sides of ``gutter`` hold a column of lines that fill it, as text does (a table's column of figures does not)."""
    for side, span in (([p for p in pieces if p.right <= gutter], gutter - start), ([p for p in pieces if p.left >= gutter], end - gutter)):
        if len(side) < _MIN_COLUMN_BOXES or statistics.median(p.right - p.left for p in side) < _MIN_FILL * span:
            return False
    return True


def _bands(pieces: list[Piece], gutter: float) -> list[tuple[list[Piece], list[Piece]]]:
    """The page cut at each run of boxes that cross the gutter: (the columns' boxes above it, those boxes)."""
    bands: list[tuple[list[Piece], list[Piece]]] = [([], [])]
    for piece in sorted(pieces, key=lambda p: (p.middle, p.left)):
        if piece.left < gutter < piece.right:
            bands[-1][1].append(piece)
        elif bands[-1][1]:
            bands.append(([piece], []))
        else:
            bands[-1][0].append(piece)
    return bands
