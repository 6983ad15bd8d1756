"""Flow a document's blocks onto pages of one, two or three columns, and record what landed where.

Placement is by hand (reportlab's metrics, no platypus), so that every line's
position and text is known: the scans' earlier-OCR layer is written at the
same places, and the tests are made from what each page really holds
(``Fragment``: one block's text on one page, in reading order). Coordinates
are PDF points from the page's top-left, y down, as in the processor's
layout model; the renderer turns them up.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from doc_content import (
    Block,
    Furniture,
    Heading,
    Layout,
    ListItem,
    Paragraph,
    Sidebar,
    Table,
    blocks_of,
    furniture_of,
    sidebar_of,
    title_of,
)
from doc_fonts import Family, registered, width

PAGE_WIDTH, PAGE_HEIGHT = 612.0, 792.0  # US letter
MARGIN_X, BODY_TOP, BODY_BOTTOM = 54.0, 72.0, 728.0
GUTTER = 18.0
HEADER_BASELINE, FOOTER_BASELINE, BANNER_BASELINE = 44.0, 752.0, 774.0
BODY_SIZE, HEADING_SIZE, TITLE_SIZE, TABLE_SIZE, FURNITURE_SIZE, BANNER_SIZE = 10.0, 12.0, 17.0, 9.0, 8.0, 7.0
LEADING = 1.3  # line height over font size
FAMILIES = {Layout.REPORT: Family.SANS, Layout.JOURNAL: Family.SERIF, Layout.NEWSLETTER: Family.CONDENSED}


class FragmentKind(StrEnum):
    TITLE = "title"
    HEADING = "heading"
    PARAGRAPH = "paragraph"
    LIST_ITEM = "list-item"
    TABLE = "table"
    SIDEBAR = "sidebar"


@dataclass(frozen=True)
class Run:
    """One line of text (or one table cell) as drawn: left x, baseline y, font, size."""

    x: float
    baseline: float
    font: str
    size: float
    text: str


@dataclass(frozen=True)
class Rule:
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass(frozen=True)
class Box:
    """A shaded, bordered rectangle (the sidebar's)."""

    x: float
    y: float
    width: float
    height: float


@dataclass
class PageDrawing:
    runs: list[Run] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    boxes: list[Box] = field(default_factory=list)
    furniture: list[str] = field(default_factory=list)  # the texts of its header, footer and banner


@dataclass(frozen=True)
class Fragment:
    """The text of block ``block`` that page ``page`` holds (a table or sidebar is whole on its page)."""

    block: int
    kind: FragmentKind
    page: int
    text: str
    table: Table | None = None


@dataclass
class LaidOut:
    layout: Layout
    pages: list[PageDrawing]
    fragments: list[Fragment]  # body reading order; the sidebar last
    furniture: Furniture


class PagesFull(Exception):
    """The flow reached past the last page: the document is as long as it was asked to be."""


def wrap(text: str, font: str, size: float, line_width: float) -> list[str]:
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if current and width(candidate, font, size) > line_width:
            lines.append(current)
            current = word
        else:
            current = candidate
    return [*lines, current] if current else lines


class Flow:
    """A cursor over the columns of ``pages`` pages, placing runs and collecting fragments in reading order."""

    def __init__(self, layout: Layout, pages: int, sidebar_height: float) -> None:
        self.layout, self.page_count = layout, pages
        self.columns = layout.columns
        self.column_width = (PAGE_WIDTH - 2 * MARGIN_X - GUTTER * (self.columns - 1)) / self.columns
        self.regular, self.bold = registered(FAMILIES[layout]), registered(FAMILIES[layout], bold=True)
        self.pages = [PageDrawing() for _ in range(pages)]
        self.sidebar_page = min(1, pages - 1)
        self.sidebar_height = sidebar_height
        self.page = self.column = 0
        self.y = BODY_TOP
        self.top_of_first_page = BODY_TOP
        self.texts: dict[tuple[int, int], list[str]] = {}  # (block, page) -> lines, in order
        self.order: list[tuple[int, int, FragmentKind, Table | None]] = []

    def x(self) -> float:
        return MARGIN_X + self.column * (self.column_width + GUTTER)

    def bottom(self) -> float:
        last_column = self.column == self.columns - 1
        if self.sidebar_height and self.page == self.sidebar_page and last_column:
            return BODY_BOTTOM - self.sidebar_height - 14
        return BODY_BOTTOM

    def next_column(self) -> None:
        self.column += 1
        if self.column == self.columns:
            self.column, self.page = 0, self.page + 1
            if self.page == self.page_count:
                raise PagesFull
        self.y = self.top_of_first_page if self.page == 0 else BODY_TOP

    def ensure(self, height: float) -> None:
        if self.y + height > self.bottom():
            self.next_column()

    def note(self, block: int, kind: FragmentKind, text: str, table: Table | None = None, page: int | None = None) -> None:
        """Add ``text`` to block ``block``'s fragment on ``page`` (the cursor's by default)."""
        page = self.page if page is None else page
        key = (block, page)
        if key not in self.texts:
            self.texts[key] = []
            self.order.append((block, page, kind, table))
        self.texts[key].append(text)

    def line(self, block: int, kind: FragmentKind, text: str, font: str, size: float, indent: float = 0.0, marker: str = "") -> None:
        self.ensure(size * LEADING)
        baseline = self.y + size
        if marker:
            self.pages[self.page].runs.append(Run(self.x(), baseline, font, size, marker))
        self.pages[self.page].runs.append(Run(self.x() + indent, baseline, font, size, text))
        self.note(block, kind, text)
        self.y += size * LEADING

    def fragments(self) -> list[Fragment]:
        return [Fragment(block, kind, page, " ".join(self.texts[block, page]), table) for block, page, kind, table in self.order]


def place_heading(flow: Flow, index: int, heading: Heading) -> None:
    lines = wrap(heading.text, flow.bold, HEADING_SIZE, flow.column_width)
    flow.y += HEADING_SIZE * 0.6
    # Kept with the two lines that follow it: a heading alone at a column's foot moves on.
    flow.ensure(HEADING_SIZE * LEADING * len(lines) + 2 * BODY_SIZE * LEADING)
    for text in lines:
        flow.line(index, FragmentKind.HEADING, text, flow.bold, HEADING_SIZE)


def place_paragraph(flow: Flow, index: int, text: str, kind: FragmentKind, marker: str = "") -> None:
    indent = width(f"{marker} ", flow.regular, BODY_SIZE) + 2 if marker else 0.0
    for number, line in enumerate(wrap(text, flow.regular, BODY_SIZE, flow.column_width - indent)):
        flow.line(index, kind, line, flow.regular, BODY_SIZE, indent, marker if number == 0 else "")
    flow.y += BODY_SIZE * (0.2 if marker else 0.5)


def table_widths(flow: Flow, table: Table) -> list[float]:
    rows = (table.header, *table.rows)
    natural = [max(width(row[i], flow.bold, TABLE_SIZE) for row in rows) + 10 for i in range(len(table.header))]
    spare = max(0.0, flow.column_width - sum(natural))
    return [w + spare / len(natural) for w in natural]


def place_table(flow: Flow, index: int, table: Table) -> None:
    row_height = TABLE_SIZE * 1.7
    rows = (table.header, *table.rows)
    flow.y += TABLE_SIZE * 0.5
    flow.ensure(row_height * len(rows))
    widths, page, top, left = table_widths(flow, table), flow.pages[flow.page], flow.y, flow.x()
    for number, row in enumerate(rows):
        x = left
        for cell, cell_width in zip(row, widths):
            page.runs.append(Run(x + 5, flow.y + TABLE_SIZE * 1.2, flow.bold if number == 0 else flow.regular, TABLE_SIZE, cell))
            x += cell_width
        flow.y += row_height
    if table.ruled:
        right = left + sum(widths)
        page.rules.extend(Rule(left, top + n * row_height, right, top + n * row_height) for n in range(len(rows) + 1))
        edges = [left + sum(widths[:n]) for n in range(len(widths) + 1)]
        page.rules.extend(Rule(x, top, x, flow.y) for x in edges)
    flow.note(index, FragmentKind.TABLE, " ".join(" ".join(row) for row in rows), table)
    flow.y += TABLE_SIZE


def place_block(flow: Flow, index: int, block: Block) -> None:
    if isinstance(block, Heading):
        place_heading(flow, index, block)
    elif isinstance(block, Paragraph):
        place_paragraph(flow, index, block.text, FragmentKind.PARAGRAPH)
    elif isinstance(block, ListItem):
        place_paragraph(flow, index, block.text, FragmentKind.LIST_ITEM, block.marker)
    else:
        place_table(flow, index, block)


def place_title(flow: Flow, title: str) -> None:
    """The title across every column of the first page; the columns start below it."""
    lines = wrap(title, flow.bold, TITLE_SIZE, PAGE_WIDTH - 2 * MARGIN_X)
    for text in lines:
        flow.pages[0].runs.append(Run(MARGIN_X, flow.y + TITLE_SIZE, flow.bold, TITLE_SIZE, text))
        flow.note(0, FragmentKind.TITLE, text)
        flow.y += TITLE_SIZE * LEADING
    flow.y += TITLE_SIZE * 0.6
    flow.top_of_first_page = flow.y


def sidebar_lines(flow: Flow, sidebar: Sidebar) -> tuple[list[str], list[str]]:
    inner = flow.column_width - 16
    return wrap(sidebar.title, flow.bold, BODY_SIZE, inner), wrap(sidebar.text, flow.regular, BODY_SIZE - 1, inner)


def place_sidebar(flow: Flow, index: int, sidebar: Sidebar) -> None:
    """A shaded box at the foot of the last column of page 2 (the body flows round it), noted apart from the body."""
    titles, lines = sidebar_lines(flow, sidebar)
    page = flow.pages[flow.sidebar_page]
    x, y = MARGIN_X + (flow.columns - 1) * (flow.column_width + GUTTER), BODY_BOTTOM - flow.sidebar_height
    page.boxes.append(Box(x, y, flow.column_width, flow.sidebar_height))
    y += 8
    for text, font, size in [*((t, flow.bold, BODY_SIZE) for t in titles), *((t, flow.regular, BODY_SIZE - 1) for t in lines)]:
        page.runs.append(Run(x + 8, y + size, font, size, text))
        y += size * LEADING
    flow.note(index, FragmentKind.SIDEBAR, " ".join([*titles, *lines]), page=flow.sidebar_page)


def place_furniture(laid: list[PageDrawing], furniture: Furniture, font: str) -> None:
    pages = len(laid)
    for number, page in enumerate(laid, start=1):
        footer = furniture.footer_of(number, pages)
        page.runs.append(Run(MARGIN_X, HEADER_BASELINE, font, FURNITURE_SIZE, furniture.header))
        page.rules.append(Rule(MARGIN_X, HEADER_BASELINE + 5, PAGE_WIDTH - MARGIN_X, HEADER_BASELINE + 5))
        footer_x = (PAGE_WIDTH - width(footer, font, FURNITURE_SIZE)) / 2
        page.runs.append(Run(footer_x, FOOTER_BASELINE, font, FURNITURE_SIZE, footer))
        page.furniture += [furniture.header, footer]
        if furniture.banner:
            page.runs.append(Run(MARGIN_X, BANNER_BASELINE, font, BANNER_SIZE, furniture.banner))
            page.furniture.append(furniture.banner)


def lay_out(layout: Layout, seed: int, pages: int) -> LaidOut:
    """A document of ``pages`` full pages in ``layout``, the same for one seed."""
    rng = random.Random(seed)
    furniture, sidebar = furniture_of(layout, rng), sidebar_of(layout, rng)
    flow = Flow(layout, pages, 0.0)
    if sidebar:
        titles, lines = sidebar_lines(flow, sidebar)
        flow.sidebar_height = 16 + BODY_SIZE * LEADING * len(titles) + (BODY_SIZE - 1) * LEADING * len(lines)
    place_title(flow, title_of(rng))
    blocks: Iterator[Block] = blocks_of(layout, rng)
    index = 0
    try:
        for index, block in enumerate(blocks, start=1):
            place_block(flow, index, block)
    except PagesFull:
        pass
    if sidebar:
        place_sidebar(flow, index + 1, sidebar)
    place_furniture(flow.pages, furniture, flow.regular)
    return LaidOut(layout, flow.pages, flow.fragments(), furniture)
