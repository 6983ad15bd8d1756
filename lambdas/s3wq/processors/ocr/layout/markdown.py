"""Blocks written as Markdown: headings as ``#``, list items as ``-`` or ``1.``, tables as GitHub pipe tables.

A paragraph whose text would read as Markdown syntax at the start of a line
("# 1", "- 3 dB", "1. in", "> quoted") has its first character escaped, so
that what was printed as prose stays prose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from s3wq.processors.ocr.layout.markers import list_marker
from s3wq.processors.ocr.layout.model import Block, BlockKind, PageLayout

BLOCK_SEPARATOR = "\n\n"
_SYNTAX = re.compile(r"^(?:#|>|[-+*](?:\s|$)|[-=_*]{2,}\s*$|\||`{3}|~{3})")
_COUNT = re.compile(r"^(\d+)([.)])(\s|$)")


def page_markdown(page: PageLayout) -> str:
    """The page's body as Markdown: its blocks in order, a blank line between them."""
    return BLOCK_SEPARATOR.join(text for text in (block_markdown(block) for block in page.blocks) if text)


def block_markdown(block: Block) -> str:
    """One block as Markdown, on one line but for a table."""
    if block.kind is BlockKind.TABLE and block.rows:
        return pipe_table(block.rows)
    text = " ".join(block.text.split())
    if not text:
        return ""
    if block.kind is BlockKind.HEADING:
        return "#" * min(max(block.level, 1), 6) + " " + text
    if block.kind is BlockKind.LIST_ITEM and (marker := list_marker(text)) is not None:
        if marker.bullet:
            return "- " + marker.rest
        if marker.number is not None:
            return f"{marker.number}. {marker.rest}"
        return f"- {marker.marker} {marker.rest}"
    return _escaped(text)


def _escaped(text: str) -> str:
    """Prose that Markdown would read as syntax at the start of a line, escaped ("1\\. in", "\\# 1", "\\- 3 dB")."""
    if count := _COUNT.match(text):
        return f"{count.group(1)}\\{text[len(count.group(1)) :]}"
    return "\\" + text if _SYNTAX.match(text) else text


def pipe_table(rows: Sequence[Sequence[str]]) -> str:
    """``rows`` as a GitHub pipe table, the first row its header; a row short of cells is padded, ``|`` escaped."""
    width = max(len(row) for row in rows)
    if width == 0:
        return ""
    lines = [_row([*row, *[""] * (width - len(row))]) for row in rows]
    return "\n".join([lines[0], _row(["---"] * width), *lines[1:]])


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(" ".join(cell.split()).replace("|", "\\|") for cell in cells) + " |"
