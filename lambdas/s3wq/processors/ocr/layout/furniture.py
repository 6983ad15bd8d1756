"""Page furniture: running headers and footers, page numbers and banners, lifted out of a document's body.

Furniture is judged by place, by repetition and by pattern, line by line:
only lines in the page's top or bottom band, or in a side margin, are ever
furniture. Among those, a line set upright in a margin is a banner, as is
one that reads as one ("Downloaded from ...", "© 2019 ...", a bare DOI or
URL); a bare number is a page number; and a line found at about the same
place on several pages once digits are put aside ("Journal of X, Vol. 12,
2019 · 345") is a running header or footer. A line set much larger than the
body's text (a first page's title) is never taken for a running one, so a
title that the later pages repeat as their running head stays. Nothing is
dropped: a line that leaves a block goes to the page's ``furniture``.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterator

from s3wq.processors.ocr.layout.model import Block, BlockKind, Box, Furniture, FurnitureKind, Line, PageLayout

BAND = 0.1  # the top and bottom tenth of a page hold its running heads, feet and numbers
BANNER_BAND = 0.15  # a banner may sit a little further in
MARGIN = 0.1  # a side margin is this share of the page's width
UPRIGHT = 2.0  # a line this many times taller than wide is set vertically
SAME_PLACE = 0.03  # lines whose tops differ by less than this share of the page's height are at one place
TITLE_SIZE = 1.3  # a line this many times the body's size is a title, not a running head
MIN_PAGES = 2  # a running head is seen on this many pages at least

_ROMAN = r"m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})"
PAGE_NUMBER = re.compile(
    rf"^(?:page\s+)?[-\u2013\u2014\s]*(?=[\divxlcdm])(?:\d{{1,4}}|{_ROMAN})[-\u2013\u2014\s]*(?:(?:of|/)\s*\d{{1,4}})?$", re.IGNORECASE
)
BANNER = re.compile(
    r"downloaded\s+from|this\s+content\s+downloaded|electronic\s+copy\s+available\s+at|all\s+rights\s+reserved|^copyright\b|©"
    r"|^\(c\)\s*\d{4}|for\s+personal\s+use\s+only|^arxiv:\s*\d{4}\.\d{4,5}",
    re.IGNORECASE,
)
LINK_ONLY = re.compile(r"^(?:(?:doi:?\s*|https?://(?:dx\.)?doi\.org/)10\.\d{4,9}/\S+|(?:https?://|www\.)\S+)$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_ROMAN_WORD = re.compile(rf"\b(?=[ivxlcdm])({_ROMAN})\b")
_NOT_LETTERS = re.compile(r"[^a-z#]+")


def strip_furniture(pages: list[PageLayout]) -> None:
    """Move each page's furniture from its blocks to its ``furniture``, in place."""
    body_size = _body_size(pages)
    running = _running_keys(pages, body_size)
    for page in pages:
        kept: list[Block] = []
        for block in page.blocks:
            if block.kind is BlockKind.TABLE:
                kept.append(block)
                continue
            body = []
            for line in block.lines:
                kind = _furniture_kind(page, line, running, body_size)
                if kind is None:
                    body.append(line)
                else:
                    page.furniture.append(Furniture(kind, line.text, line.box))
            if len(body) == len(block.lines):
                kept.append(block)
            elif body:
                block.lines = body
                block.box = Box.around(line.box for line in body)
                kept.append(block)
        page.blocks = kept


def _furniture_kind(page: PageLayout, line: Line, running: dict[str, list[float]], body_size: float) -> FurnitureKind | None:
    """What furniture ``line`` is, or None: the body's."""
    text = line.text.strip()
    box = line.box
    in_margin = box.right <= MARGIN * page.width or box.left >= (1 - MARGIN) * page.width
    if in_margin and box.height >= UPRIGHT * max(box.width, 1e-6) and box.height >= 3 * line.size:
        return FurnitureKind.BANNER
    top, bottom = box.bottom <= BAND * page.height, box.top >= (1 - BAND) * page.height
    near_edge = in_margin or box.bottom <= BANNER_BAND * page.height or box.top >= (1 - BANNER_BAND) * page.height
    if near_edge and (BANNER.search(text) or LINK_ONLY.match(text)):
        return FurnitureKind.BANNER
    if not (top or bottom):
        return None
    if PAGE_NUMBER.match(text):
        return FurnitureKind.PAGE_NUMBER
    if line.size < TITLE_SIZE * body_size and _at_a_running_place(page, line, running.get(_key(text), [])):
        return FurnitureKind.HEADER if top else FurnitureKind.FOOTER
    return None


def _at_a_running_place(page: PageLayout, line: Line, tops: list[float]) -> bool:
    """Whether the place of ``line`` is one where its text (digits aside) is found on ``MIN_PAGES`` pages or more."""
    near = SAME_PLACE * page.height
    return sum(1 for top in tops if abs(top - line.box.top) <= near) >= MIN_PAGES


def _running_keys(pages: list[PageLayout], body_size: float) -> dict[str, list[float]]:
    """Each text (digits aside) seen in a page's top or bottom band, with the tops it was seen at, one a page."""
    seen: dict[str, dict[int, float]] = defaultdict(dict)
    for index, page in enumerate(pages):
        for line in _band_lines(page):
            key = _key(line.text)
            if key.strip("# ") and line.size < TITLE_SIZE * body_size:
                seen[key].setdefault(index, line.box.top)
    return {key: list(tops.values()) for key, tops in seen.items() if len(tops) >= MIN_PAGES}


def _band_lines(page: PageLayout) -> Iterator[Line]:
    for block in page.blocks:
        if block.kind is not BlockKind.TABLE:
            for line in block.lines:
                if line.box.bottom <= BAND * page.height or line.box.top >= (1 - BAND) * page.height:
                    yield line


def _key(text: str) -> str:
    """A line's text as running heads repeat it: lower case, numbers (Arabic or Roman) as ``#``, letters alone otherwise."""
    lowered = _ROMAN_WORD.sub("#", _DIGITS.sub("#", text.lower()))
    return _NOT_LETTERS.sub(" ", lowered).strip()


def _body_size(pages: list[PageLayout]) -> float:
    """The size most of the document's lines are set in (their median)."""
    sizes = [line.size for page in pages for block in page.blocks for line in block.lines]
    return statistics.median(sizes) if sizes else 0.0
