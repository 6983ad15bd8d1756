"""Synthetic pages for the layout tests: words set from strings at positions in a fixed-width font.

Every character is ``CHAR_EMS`` of the font size wide and a word's box is one
font size high, as a text layer's boxes are; a space is one character wide.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence

from s3wq.processors.ocr.layout.model import Box, PageWords, Source, Word

CHAR_EMS = 0.5
LETTER = (612.0, 792.0)


def line_words(text: str, left: float, top: float, size: float = 10.0, *, bold: bool = False) -> list[Word]:
    """The words of ``text`` set on one line from ``left``, its top at ``top``."""
    words: list[Word] = []
    advance = CHAR_EMS * size
    x = left
    for token in text.split(" "):
        if token:
            words.append(Word(token, Box(x, top, x + len(token) * advance, top + size), size, bold=bold))
        x += (len(token) + 1) * advance
    return words


def wrap(text: str, chars: int) -> list[str]:
    """``text`` broken into lines of at most ``chars`` characters, at spaces."""
    lines: list[str] = []
    for token in text.split():
        if lines and len(lines[-1]) + 1 + len(token) <= chars:
            lines[-1] += " " + token
        else:
            lines.append(token)
    return lines


def paragraph(
    text: str, left: float, top: float, width: float, size: float = 10.0, *, leading: float = 1.2, bold: bool = False
) -> tuple[list[Word], float]:
    """``text`` set in a column ``width`` points wide from ``(left, top)``: its words, and the top of the line after it."""
    words: list[Word] = []
    for line in wrap(text, max(1, int(width // (CHAR_EMS * size)))):
        words += line_words(line, left, top, size, bold=bold)
        top += leading * size
    return words, top


def column(
    paragraphs: Sequence[str], left: float, top: float, width: float, size: float = 10.0, *, gap: float = 6.0
) -> tuple[list[Word], float]:
    """Paragraphs one under the other, ``gap`` points between them: their words and the top of what would follow."""
    words: list[Word] = []
    for text in paragraphs:
        more, top = paragraph(text, left, top, width, size)
        words += more
        top += gap
    return words, top


def skewed(words: Iterable[Word], degrees: float, centre: tuple[float, float] = (306.0, 396.0)) -> list[Word]:
    """``words`` turned by ``degrees`` about ``centre`` (y down: positive turns lines down to the right), as a skewed scan's."""
    angle = math.radians(degrees)
    cos, sin = math.cos(angle), math.sin(angle)
    turned: list[Word] = []
    for word in words:
        corners = [(x, y) for x in (word.box.left, word.box.right) for y in (word.box.top, word.box.bottom)]
        points = [
            (centre[0] + (x - centre[0]) * cos - (y - centre[1]) * sin, centre[1] + (x - centre[0]) * sin + (y - centre[1]) * cos)
            for x, y in corners
        ]
        box = Box(min(p[0] for p in points), min(p[1] for p in points), max(p[0] for p in points), max(p[1] for p in points))
        turned.append(Word(word.text, box, word.size, word.confidence, word.bold))
    return turned


def page(words: Sequence[Word], number: int = 1, *, source: Source = Source.TEXT_LAYER, images: Sequence[Box] = ()) -> PageWords:
    """A US Letter page of ``words``."""
    return PageWords(number=number, width=LETTER[0], height=LETTER[1], words=list(words), source=source, images=images)


def sentences(prefix: str, count: int, words_each: int = 12) -> list[str]:
    """``count`` paragraphs of distinct words (``prefix`` and a number), so that each word's place in the text can be found."""
    return [" ".join(f"{prefix}{p}w{i}" for i in range(words_each)) + "." for p in range(count)]


_ASCENDING = set("bdfhiklt0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DESCENDING = set("gjpqy")


def inked(words: Iterable[Word], seed: int = 29) -> list[Word]:
    """``words`` as OCR gives them: boxes round the ink (taller with ascenders, deeper with descenders, a little
    jitter), each word's size its box's height, and a confidence."""
    rng = random.Random(seed)
    out: list[Word] = []
    for word in words:
        size = word.size
        top = word.box.top + size * (0.15 if _ASCENDING & set(word.text) else 0.35) + rng.uniform(-0.04, 0.04) * size
        bottom = word.box.bottom - size * (0.05 if _DESCENDING & set(word.text) else 0.25) + rng.uniform(-0.04, 0.04) * size
        left, right = word.box.left + rng.uniform(-0.5, 0.5), word.box.right + rng.uniform(-0.5, 0.5)
        out.append(Word(word.text, Box(left, top, right, bottom), bottom - top, confidence=0.9))
    return out
