"""A page's regions into blocks: headings, paragraphs, list items, captions, equations and tables, in reading order.

A heading is set larger than the body, or bold on a body that is not, is
short (three lines at most) and does not end with a full stop; its level is
the rank of its size (and boldness) among the headings, 1 the largest. A list
item starts with a bullet or a count; a caption with a figure's or a table's
label; an equation is what ``equations.is_equation`` says of every line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from s3wq.processors.ocr.layout.equations import is_equation
from s3wq.processors.ocr.layout.hyphens import join_lines
from s3wq.processors.ocr.layout.lines import fragments
from s3wq.processors.ocr.layout.markers import is_caption, list_marker
from s3wq.processors.ocr.layout.model import Block, BlockKind, Box, Line, PageWords
from s3wq.processors.ocr.layout.order import Region
from s3wq.processors.ocr.layout.paragraphs import BodyStyle, body_style, paragraphs
from s3wq.processors.ocr.layout.tables import Table

HEADING_LINES = 3
HEADING_CHARS = 200
MAX_LEVEL = 6
# A caption's label without a stop after it ("Figure 3 Results") counts within this many ems of a figure or a table.
CAPTION_REACH_EMS = 2.0
# A paragraph ending in none of these at a column's foot goes on at the next column's head, if that starts in lower case.
_SENTENCE_ENDS = ".!?:;\"'\u201d\u2019)]"


def build_blocks(regions: Sequence[Region], page: PageWords) -> list[Block]:
    """The blocks of ``page``'s regions, in their order, headings levelled by size within the page."""
    style = body_style(regions, page.source)
    figures = [*page.images, *(p.box for r in regions for p in r.items if isinstance(p.content, Table))]
    blocks: list[Block] = []
    for region in regions:
        for index, group in enumerate(paragraphs(region, style, page.height, is_equation)):
            content = group[0].content
            if not isinstance(content, Line):
                blocks.append(_table(content, page))
                continue
            block = _block([p.content for p in group if isinstance(p.content, Line)], group[0].size, style, figures)
            if index == 0 and blocks and _continues(blocks[-1], block):
                blocks[-1] = Block(BlockKind.PARAGRAPH, [*blocks[-1].lines, *block.lines], Box.around([blocks[-1].box, block.box]))
            else:
                blocks.append(block)
    assign_levels(blocks)
    return blocks


def _continues(before: Block, after: Block) -> bool:
    """Whether ``after``, a column's first paragraph, goes on with the sentence the column before it broke off."""
    if before.kind is not BlockKind.PARAGRAPH or after.kind is not BlockKind.PARAGRAPH or not before.lines:
        return False
    end, start = before.lines[-1].text.rstrip(), after.lines[0].text.lstrip()
    return bool(end and start) and end[-1] not in _SENTENCE_ENDS and start[0].islower()


def _block(lines: list[Line], size: float, style: BodyStyle, figures: list[Box]) -> Block:
    box = Box.around(line.box for line in lines)
    if all(is_equation(line) for line in lines):
        kind = BlockKind.EQUATION
    elif is_caption(lines[0].text, beside_figure=any(_beside(box, figure, style.size) for figure in figures)):
        kind = BlockKind.CAPTION
    elif _is_heading(lines, size, style):
        kind = BlockKind.HEADING
    elif list_marker(lines[0].text) is not None:
        kind = BlockKind.LIST_ITEM
    else:
        kind = BlockKind.PARAGRAPH
    return Block(kind=kind, lines=lines, box=box)


def _is_heading(lines: list[Line], size: float, style: BodyStyle) -> bool:
    first = lines[0]
    larger = size > style.size and not style.same_size(size, style.size)
    text = join_lines(line.text for line in lines).rstrip()
    return (
        (larger or (first.bold and not style.bold))
        and len(lines) <= HEADING_LINES
        and len(text) <= HEADING_CHARS
        and not text.endswith(".")
        and any(c.isalpha() for c in text)
    )


def _beside(box: Box, figure: Box, size: float) -> bool:
    """Whether ``box`` lies just over or under ``figure``, overlapping it across."""
    across = min(box.right, figure.right) - max(box.left, figure.left) > 0
    distance = max(figure.top - box.bottom, box.top - figure.bottom)
    return across and distance <= CAPTION_REACH_EMS * size


def _table(table: Table, page: PageWords) -> Block:
    """A table's block: its rows as the table gives them, and its words as lines for whoever reads lines."""
    words = [page.words[i] for i in sorted(table.words) if 0 <= i < len(page.words)]
    lines = sorted(fragments(words), key=lambda line: (line.box.top, line.box.left))
    return Block(kind=BlockKind.TABLE, lines=lines, box=table.box, rows=[list(row) for row in table.rows])


def assign_levels(blocks: Iterable[Block]) -> None:
    """Give each heading its level: the rank of its size, then of its boldness, among these headings (1 the largest)."""
    headings = [b for b in blocks if b.kind is BlockKind.HEADING and b.lines]
    ranks = sorted({_prominence(b) for b in headings}, reverse=True)
    for block in headings:
        block.level = min(ranks.index(_prominence(block)) + 1, MAX_LEVEL)


def _prominence(block: Block) -> tuple[float, bool]:
    first = block.lines[0]
    size = first.size if first.words[0].confidence is None else first.box.height  # as order.Placed.size, unturned
    return (round(size * 2) / 2, first.bold)
