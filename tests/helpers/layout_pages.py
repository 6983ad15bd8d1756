"""Synthetic pages for layout's tests: strings laid out as words at given places, in a fixed-width font.

Every character, a space too, is ``CHAR_EMS`` of an em wide and a word's box
is as tall as its size, so a test writes a table as it would look in a
monospaced listing: "Apples     12" sets its cells three ems apart. Points
from the page's top-left, y down, as in layout's model.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from s3wq.processors.ocr.layout.model import Block, BlockKind, Box, Line, PageLayout, PageWords, Rule, Source, Word

CHAR_EMS = 0.5  # each character's width, in ems of its size
LEADING = 1.2  # a line's pitch, in its size
LETTER = (612.0, 792.0)  # US Letter, in points


@dataclass(frozen=True)
class Placed:
    """A string set at a place: its left and top in points, and its size."""

    text: str
    left: float
    top: float
    size: float = 10.0


def words_of(placed: Placed) -> list[Word]:
    """The words of a placed string, each with its box in the fixed-width font."""
    width = CHAR_EMS * placed.size
    return [
        Word(
            m.group(),
            Box(placed.left + m.start() * width, placed.top, placed.left + m.end() * width, placed.top + placed.size),
            placed.size,
        )
        for m in re.finditer(r"\S+", placed.text)
    ]


def upright_words(text: str, left: float, top: float, size: float = 10.0) -> list[Word]:
    """A string set vertically (turned a quarter), reading downwards: each word a tall, narrow box below the one before."""
    words, at = [], top
    for m in re.finditer(r"\S+", text):
        height = len(m.group()) * CHAR_EMS * size
        words.append(Word(m.group(), Box(left, at, left + size, at + height), size))
        at += height + CHAR_EMS * size
    return words


def stacked(texts: Sequence[str], left: float, top: float, size: float = 10.0, leading: float = LEADING) -> list[Placed]:
    """Strings one under the other, a line's pitch apart."""
    return [Placed(text, left, top + k * leading * size, size) for k, text in enumerate(texts)]


def wrapped(text: str, columns: int) -> list[str]:
    """Prose wrapped to ``columns`` characters, as a ragged-right column sets it."""
    return textwrap.wrap(text, columns)


def page_words(
    placed: Iterable[Placed],
    rules: Iterable[Box] = (),
    *,
    number: int = 1,
    size: tuple[float, float] = LETTER,
    source: Source = Source.TEXT_LAYER,
) -> PageWords:
    """A page of the placed strings' words and of ruling lines with the given boxes."""
    words = [word for item in placed for word in words_of(item)]
    return PageWords(number, size[0], size[1], words, source, tuple(Rule(box) for box in rules))


def horizontal_rule(left: float, right: float, y: float, thickness: float = 0.5) -> Box:
    return Box(left, y - thickness / 2, right, y + thickness / 2)


def vertical_rule(x: float, top: float, bottom: float, thickness: float = 0.5) -> Box:
    return Box(x - thickness / 2, top, x + thickness / 2, bottom)


def line_of(words: Sequence[Word]) -> Line:
    """A line of words, its text their texts a space apart."""
    return Line(tuple(words), Box.around(w.box for w in words), " ".join(w.text for w in words))


def placed_line(placed: Placed) -> Line:
    return line_of(words_of(placed))


def block_of(lines: Sequence[Line], kind: BlockKind = BlockKind.PARAGRAPH, level: int = 0) -> Block:
    return Block(kind, list(lines), Box.around(line.box for line in lines), level)


def paragraph(texts: Sequence[str], left: float, top: float, size: float = 10.0) -> Block:
    """A paragraph block of strings set one under the other."""
    return block_of([placed_line(p) for p in stacked(texts, left, top, size)])


def layout_page(blocks: Iterable[Block], *, number: int = 1, size: tuple[float, float] = LETTER) -> PageLayout:
    return PageLayout(number, size[0], size[1], Source.TEXT_LAYER, list(blocks))
