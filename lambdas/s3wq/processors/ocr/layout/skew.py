"""A scan's skew, read from the slopes of its lines, and boxes turned upright by it.

A page scanned 2 degrees askew moves a column's edge by 24 points from its
top to its bottom: more than a gutter. Columns are found on boxes turned
upright about the page's centre; the words and lines the layout gives keep
the boxes the page has.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from s3wq.processors.ocr.layout.model import Box, Line

# A slope is read from lines of at least this many words, this many ems wide.
_MIN_WORDS = 3
_MIN_WIDTH_EMS = 5.0
_SAMPLE = 48  # the widest lines, enough for a median that one line's error does not move
# Below this the page is upright (no turning at all, the text layer's usual case); beyond that, the slopes
# are not a skew but something else (a diagram's labels, text set at an angle) and the page is left as it is.
_UPRIGHT = math.radians(0.1)
_TOO_STEEP = math.radians(6.0)
_LEVEL = 1e-3  # points: a line's words whose middles are this close are level, as a text layer's are


def skew_of(lines: Sequence[Line]) -> float:
    """The page's skew in radians (y down, so positive when lines fall to the right): the width-weighted median slope."""
    slopes: list[tuple[float, float]] = []
    measured = [line for line in lines if len(line.words) >= _MIN_WORDS and line.box.width >= _MIN_WIDTH_EMS * line.size]
    for line in sorted(measured, key=lambda line: -line.box.width)[:_SAMPLE]:
        slope = _slope(line)
        if slope is not None:
            slopes.append((slope, line.box.width))
    if not slopes:
        return 0.0
    slopes.sort()
    half, total = sum(w for _, w in slopes) / 2, 0.0
    for slope, weight in slopes:
        total += weight
        if total >= half:
            angle = math.atan(slope)
            return angle if _UPRIGHT <= abs(angle) <= _TOO_STEEP else 0.0
    return 0.0  # not reached: the weights add up to their total


def _slope(line: Line) -> float | None:
    """The least-squares slope of the words' middles over their centres (0 at once for words at one height)."""
    ys = [w.box.middle for w in line.words]
    if max(ys) - min(ys) < _LEVEL:
        return 0.0
    xs = [w.box.centre for w in line.words]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread <= 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


class Upright:
    """Boxes turned by ``-angle`` about ``(cx, cy)``: a skewed line's words come out at one height."""

    def __init__(self, angle: float, cx: float, cy: float) -> None:
        self.angle, self.cx, self.cy = angle, cx, cy
        self._cos, self._sin = math.cos(angle), math.sin(angle)

    def box(self, box: Box) -> Box:
        """``box`` with its centre turned upright; its width and height are kept."""
        if not self.angle:
            return box
        dx, dy = box.centre - self.cx, box.middle - self.cy
        x = self.cx + dx * self._cos + dy * self._sin
        y = self.cy - dx * self._sin + dy * self._cos
        half_w, half_h = box.width / 2, box.height / 2
        return Box(x - half_w, y - half_h, x + half_w, y + half_h)

    def line(self, line: Line) -> Box:
        """The box around ``line``'s words turned upright."""
        if not self.angle:
            return line.box
        return Box.around(self.box(w.box) for w in line.words)
