"""A region's lines grouped into paragraphs: a new one at a wider gap, an indented first line, a change of type,
a list marker, a caption's label, an equation, or a line in the page's top or bottom band set apart from the body.

Every measure is the page's own: its body text's font size (the size most of
its characters are set in) and the gap between its body lines, so one rule
holds for a text layer's boxes (which touch) and OCR's (tight round the ink).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from s3wq.processors.ocr.layout.lines import same_line
from s3wq.processors.ocr.layout.markers import is_caption, list_marker
from s3wq.processors.ocr.layout.model import Line, Source
from s3wq.processors.ocr.layout.order import Placed, Region

# Lines are of one type when their sizes are within this ratio: a text layer's sizes are the fonts', OCR's the boxes'
# heights, which vary with a line's letters (ascenders, descenders, capitals).
SAME_SIZE = {Source.TEXT_LAYER: 1.15, Source.OCR: 1.35}
# A paragraph's gap is this many ems wider than the body's line gap (or half as wide again, if that is more).
PARAGRAPH_EMS = 0.3
PARAGRAPH_SHARE = 0.5
INDENT_EMS = 0.8
# The page's top and bottom bands, where running headers, footers and page numbers are printed.
BAND_SHARE = 0.08
_LINE_GAP_EMS = 0.2  # the body's line gap on a page too short to measure one


@dataclass(frozen=True)
class BodyStyle:
    """How the page's body is set: its font size, whether it is bold, and the gap between its lines."""

    size: float
    bold: bool
    line_gap: float
    same_size_ratio: float = SAME_SIZE[Source.TEXT_LAYER]

    def same_size(self, a: float, b: float) -> bool:
        return max(a, b) <= self.same_size_ratio * max(min(a, b), 1e-6)

    @property
    def paragraph_gap(self) -> float:
        return self.line_gap + max(PARAGRAPH_EMS * self.size, PARAGRAPH_SHARE * max(self.line_gap, 0.0))


def body_style(regions: Sequence[Region], source: Source) -> BodyStyle:
    """The page's body style, from the lines that hold most of its characters."""
    sizes: Counter[float] = Counter()
    bold_chars = chars = 0
    for placed, line in ((p, p.content) for r in regions for p in r.items if isinstance(p.content, Line)):
        sizes[round(placed.size * 2) / 2] += len(line.text)
        chars += len(line.text)
        bold_chars += len(line.text) if line.bold else 0
    ratio = SAME_SIZE[source]
    if not sizes:
        return BodyStyle(size=10.0, bold=False, line_gap=2.0, same_size_ratio=ratio)
    size = sizes.most_common(1)[0][0]
    style = BodyStyle(size, False, 0.0, ratio)
    gaps = [
        b.box.top - a.box.bottom
        for region in regions
        for a, b in zip(region.items, region.items[1:])
        if isinstance(a.content, Line) and isinstance(b.content, Line) and style.same_size(a.size, size) and style.same_size(b.size, size)
    ]
    usual = [g for g in gaps if -0.5 * size <= g <= 1.5 * size]
    return BodyStyle(size, bold_chars * 2 > chars, statistics.median(usual) if usual else _LINE_GAP_EMS * size, ratio)


def paragraphs(region: Region, style: BodyStyle, height: float, is_equation: Callable[[Line], bool]) -> list[list[Placed]]:
    """The region's lines in groups, each one block; a table alone in its group."""
    groups: list[list[Placed]] = []
    items = region.items
    left = min((p.box.left for p in items), default=0.0)
    # A row of several lines (a term and its definition, a table's row that no table took) is a block of its own.
    shared = [same_line(a.box, b.box) for a, b in pairwise(items)]
    for index, item in enumerate(items):
        if groups and isinstance(item.content, Line) and isinstance(groups[-1][-1].content, Line):
            if index and shared[index - 1]:
                groups[-1].append(item)
                continue
            in_row = (index + 1 < len(items) and shared[index]) or (index > 1 and shared[index - 2])
            if not in_row and not _parts(groups[-1], item, style, left, height, is_equation):
                groups[-1].append(item)
                continue
        groups.append([item])
    return groups


def _parts(group: list[Placed], item: Placed, style: BodyStyle, left: float, height: float, is_equation: Callable[[Line], bool]) -> bool:
    """Whether ``item`` starts a new block after ``group``."""
    before, line = group[-1], item.content
    assert isinstance(before.content, Line) and isinstance(line, Line)
    gap = item.box.top - before.box.bottom
    scale = max(before.size, item.size) / style.size
    if gap > style.paragraph_gap * max(scale, 1.0):
        return True
    if not style.same_size(before.size, item.size) or before.content.bold != line.bold:
        return True
    if is_equation(before.content) != is_equation(line) or list_marker(line.text) is not None:
        return True
    if is_caption(line.text, beside_figure=False):
        return True
    if _in_band(before, height) != _in_band(item, height) and gap > style.line_gap + 0.1 * style.size:
        return True
    # An indented first line starts a paragraph; not so a list item's lines, indented under its text.
    starts_indented = item.box.left - left >= INDENT_EMS * style.size > before.box.left - left
    return starts_indented and list_marker(group[0].content.text if isinstance(group[0].content, Line) else "") is None


def _in_band(item: Placed, height: float) -> bool:
    box = item.content.box if isinstance(item.content, Line) else item.box
    return box.bottom <= BAND_SHARE * height or box.top >= (1 - BAND_SHARE) * height
