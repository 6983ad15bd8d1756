"""The vocabulary of layout: words with boxes in, blocks in reading order and the page's furniture out.

Coordinates are PDF points (1/72 inch) from the page's top-left corner, y
growing downwards, whatever the source: a text layer's boxes are turned over
from PDF space, and an OCR box in pixels is divided by its dpi over 72. So
one rule (a gap of a line's height, a band at the page's top) holds for both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property

from s3wq.processors.ocr.layout.hyphens import join_lines


@dataclass(frozen=True, slots=True)
class Box:
    """A rectangle on the page, in points from its top-left corner."""

    left: float
    top: float
    right: float
    bottom: float

    @property
    def width(self) -> float:
        return self.right - self.left

    @property
    def height(self) -> float:
        return self.bottom - self.top

    @property
    def middle(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def centre(self) -> float:
        return (self.left + self.right) / 2

    @property
    def area(self) -> float:
        return max(0.0, self.width) * max(0.0, self.height)

    def overlap(self, other: Box) -> float:
        """The area this box and ``other`` share."""
        return max(0.0, min(self.right, other.right) - max(self.left, other.left)) * max(
            0.0, min(self.bottom, other.bottom) - max(self.top, other.top)
        )

    @staticmethod
    def around(boxes: Iterable[Box]) -> Box:
        """The smallest box holding every one of ``boxes`` (at least one)."""
        listed = list(boxes)
        return Box(min(b.left for b in listed), min(b.top for b in listed), max(b.right for b in listed), max(b.bottom for b in listed))


@dataclass(frozen=True, slots=True)
class Word:
    """One word as its source gave it: its text, its box, its font size in points (for OCR, its box's height), and the
    OCR engine's confidence in it (None: a text layer's word)."""

    text: str
    box: Box
    size: float
    confidence: float | None = None
    bold: bool = False


@dataclass(frozen=True, slots=True)
class Rule:
    """A ruling line drawn on the page (a table's border, a rule under a heading): a thin, long box."""

    box: Box

    @property
    def horizontal(self) -> bool:
        return self.box.width >= self.box.height


class Source(StrEnum):
    """Where a page's words came from."""

    TEXT_LAYER = "text_layer"
    OCR = "ocr"


@dataclass(frozen=True)
class PageWords:
    """Everything layout is given of one page: its number (from 1), its size in points, its words, ruling lines and images."""

    number: int
    width: float
    height: float
    words: Sequence[Word]
    source: Source
    rules: Sequence[Rule] = ()
    images: Sequence[Box] = ()


@dataclass(frozen=True)
class Line:
    """Words on one baseline, left to right, and the text they make (spaces from the gaps between their boxes)."""

    words: tuple[Word, ...]
    box: Box
    text: str

    @cached_property
    def size(self) -> float:
        """The line's font size: its words' most common, or their median. (Cached: layout asks it of every line often.)"""
        sizes = sorted(w.size for w in self.words)
        return sizes[len(sizes) // 2]

    @cached_property
    def bold(self) -> bool:
        """Whether every word of the line is bold."""
        return all(w.bold for w in self.words)


class BlockKind(StrEnum):
    """What a block of the body is, as Markdown writes it."""

    HEADING = "heading"
    PARAGRAPH = "paragraph"
    LIST_ITEM = "list_item"
    TABLE = "table"
    CAPTION = "caption"
    EQUATION = "equation"


@dataclass
class Block:
    """A run of lines read together: a heading, a paragraph, a list item, a table (``rows`` of cell texts), in the page's body."""

    kind: BlockKind
    lines: list[Line]
    box: Box
    level: int = 0  # a heading's level, 1 the largest
    rows: list[list[str]] = field(default_factory=list)  # a table's cells, row by row; a cell spanning columns repeats

    @property
    def text(self) -> str:
        if self.kind is BlockKind.TABLE and self.rows:
            return "\n".join(" ".join(cell for cell in row if cell) for row in self.rows)
        return join_lines(line.text for line in self.lines)


class FurnitureKind(StrEnum):
    """Print that belongs to the page, not the document's body."""

    HEADER = "header"  # a running header, at the page's top
    FOOTER = "footer"  # a running footer, at its bottom
    PAGE_NUMBER = "page_number"
    BANNER = "banner"  # "Downloaded from ...", a journal's masthead line, a watermark


@dataclass(frozen=True)
class Furniture:
    """One line of furniture: what it is, its text and where it was."""

    kind: FurnitureKind
    text: str
    box: Box


@dataclass
class PageLayout:
    """One page read: its body's blocks in reading order and its furniture apart, with flags for what could not be read well."""

    number: int
    width: float
    height: float
    source: Source
    blocks: list[Block] = field(default_factory=list)
    furniture: list[Furniture] = field(default_factory=list)
    equations: int = 0  # blocks that look like equations and cannot be read as text (for the next issue's routing)

    @property
    def text(self) -> str:
        """The body's plain text: blocks in reading order, a blank line between them."""
        return "\n\n".join(block.text for block in self.blocks if block.text)
