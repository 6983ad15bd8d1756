"""One page read: its words in, its body's blocks in reading order out (the furniture is lifted later, over the document)."""

from __future__ import annotations

from s3wq.processors.ocr.layout.blocks import build_blocks
from s3wq.processors.ocr.layout.lines import fragments
from s3wq.processors.ocr.layout.model import BlockKind, Box, PageLayout, PageWords
from s3wq.processors.ocr.layout.order import Placed, reading_order
from s3wq.processors.ocr.layout.skew import Upright, skew_of
from s3wq.processors.ocr.layout.tables import find_tables


def read_layout(page: PageWords) -> PageLayout:
    """``page``'s blocks in reading order: tables found first and set in their place, the rest of its words in lines."""
    tables = find_tables(page)
    held = frozenset().union(*(table.words for table in tables))
    pieces = fragments(word for index, word in enumerate(page.words) if index not in held)
    upright = Upright(skew_of(pieces), page.width / 2, page.height / 2)
    placed = [Placed(upright.line(piece), piece) for piece in pieces]
    placed += [Placed(_turned(table.box, upright), table) for table in tables]
    blocks = build_blocks(reading_order(placed), page)
    return PageLayout(
        number=page.number,
        width=page.width,
        height=page.height,
        source=page.source,
        blocks=blocks,
        equations=sum(1 for block in blocks if block.kind is BlockKind.EQUATION),
    )


def _turned(box: Box, upright: Upright) -> Box:
    """A table's box turned upright: the box around its four corners turned."""
    corners = [Box(x, y, x, y) for x in (box.left, box.right) for y in (box.top, box.bottom)]
    return Box.around(upright.box(corner) for corner in corners)
