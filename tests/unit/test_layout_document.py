"""A document's text, page spans (olmocr's pdf_page_numbers) and Markdown, and its furniture lifted over all its pages."""

from __future__ import annotations

from itertools import pairwise

import pytest
from helpers.page_words import line_words, page, paragraph, sentences

import s3wq.processors.ocr.layout.document as document_module
from s3wq.processors.ocr.layout.document import PAGE_SEPARATOR, read_document
from s3wq.processors.ocr.layout.markdown import pipe_table
from s3wq.processors.ocr.layout.model import Block, BlockKind, Box, Furniture, FurnitureKind, PageLayout, PageWords

BODY = "body text that runs on for a while so that the page has a body size to compare the headings with."


def text_page(number: int, *paragraphs: str) -> PageWords:
    words, top = [], 72.0
    for text in paragraphs:
        more, top = paragraph(text, 72, top, 468)
        words += more
        top += 10
    return page(words, number)


def test_each_page_span_holds_its_page_text_and_the_spans_are_contiguous_and_cover_the_text() -> None:
    pages = [text_page(1, *sentences("A", 2)), text_page(2), text_page(3, *sentences("C", 3)), text_page(4, "last page.")]
    document = read_document(pages)
    assert [number for _, _, number in document.page_spans] == [1, 2, 3, 4]
    assert document.page_spans[0][0] == 0 and document.page_spans[-1][1] == len(document.text)
    assert all(before[1] == after[0] for before, after in pairwise(document.page_spans))
    for (start, end, _), layout in zip(document.page_spans, document.pages):
        assert document.text[start:end] in (layout.text, layout.text + PAGE_SEPARATOR)
        assert document.text[start : start + len(layout.text)] == layout.text
    assert document.page_spans[1][0] == document.page_spans[1][1]  # the empty page: an empty span
    assert document.text.endswith("last page.")


def test_pages_are_joined_as_paragraphs_are() -> None:
    document = read_document([text_page(1, "first page."), text_page(2, "second page.")])
    assert document.text == "first page.\n\nsecond page."
    assert document.page_spans == [(0, 13, 1), (13, 25, 2)]


def test_markdown_writes_headings_lists_paragraphs_and_pages() -> None:
    words = line_words("The Title", 72, 72, 20) + line_words("A Section", 72, 110, 14)
    body, end = paragraph(BODY * 2, 72, 135, 468)
    items = [w for n, m in enumerate(["•", "2.", "(c)"]) for w in line_words(f"{m} item {n}", 72, end + 12 + 12 * n)]
    document = read_document([page(words + body + items), text_page(2, "# not a heading but prose.")])
    assert document.markdown == "\n\n".join(
        ["# The Title", "## A Section", (BODY * 2).strip(), "- item 0", "2. item 1", "- (c) item 2", "\\# not a heading but prose."]
    )


def test_headings_are_levelled_across_the_document_not_page_by_page() -> None:
    first = line_words("Part One", 72, 72, 24) + paragraph(BODY, 72, 110, 468)[0]
    second = line_words("A Chapter", 72, 72, 16) + paragraph(BODY, 72, 110, 468)[0]
    document = read_document([page(first, 1), page(second, 2)])
    assert document.markdown.split("\n\n")[::2] == ["# Part One", "## A Chapter"]


def test_a_table_is_a_pipe_table_with_its_pipes_escaped_and_short_rows_padded() -> None:
    assert pipe_table([["Name", "a|b"], ["x"]]) == "| Name | a\\|b |\n| --- | --- |\n| x |  |"


def test_prose_that_would_read_as_markdown_syntax_is_escaped_and_no_other() -> None:
    document = read_document([text_page(1, "-b, --benchmark perform a benchmark."), text_page(2, "== a rule ==")])
    assert document.markdown == "-b, --benchmark perform a benchmark.\n\n== a rule =="


def test_prose_that_reads_as_markdown_syntax_is_escaped() -> None:
    document = read_document([text_page(1, "1990. The year the wall fell, and more."), text_page(2, "> 3 dB is half the power, or so.")])
    assert document.markdown == "1990\\. The year the wall fell, and more.\n\n\\> 3 dB is half the power, or so."


def test_furniture_is_lifted_after_layout_and_before_the_text_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    def strip_furniture(pages: list[PageLayout]) -> None:
        for layout in pages:
            first: Block = layout.blocks.pop(0)
            layout.furniture.append(Furniture(FurnitureKind.HEADER, first.text, first.box))

    monkeypatch.setattr(document_module, "strip_furniture", strip_furniture)
    pages = [page(line_words("Running Header", 72, 30) + paragraph(f"page {n} body.", 72, 100, 468)[0], n) for n in (1, 2)]
    document = read_document(pages)
    assert document.text == "page 1 body.\n\npage 2 body."
    assert [f.text for p in document.pages for f in p.furniture] == ["Running Header", "Running Header"]
    assert "Running Header" not in document.markdown


def test_a_table_block_in_markdown_keeps_its_rows() -> None:
    layout = PageLayout(number=1, width=612, height=792, source=page([]).source)
    layout.blocks.append(Block(BlockKind.TABLE, [], Box(0, 0, 1, 1), rows=[["Year", "Cost"], ["2024", "15"]]))
    assert document_module.DocumentLayout([layout]).markdown == "| Year | Cost |\n| --- | --- |\n| 2024 | 15 |"
