"""Lines into blocks: headings and their levels, list items, captions, equations, tables in place, lines set apart in the page's bands."""

from __future__ import annotations

import pytest
from helpers.page_words import column, line_words, page, paragraph, sentences

import s3wq.processors.ocr.layout.blocks as blocks_module
import s3wq.processors.ocr.layout.page as page_module
from s3wq.processors.ocr.layout.model import BlockKind, Box, Line, PageWords
from s3wq.processors.ocr.layout.page import read_layout
from s3wq.processors.ocr.layout.tables import Table

BODY = "body text that runs on for a while so that the page has a body size to compare the headings with."


def kinds(words: list, **kwargs: object) -> list[tuple[BlockKind, int, str]]:
    return [(b.kind, b.level, b.text) for b in read_layout(page(words, **kwargs)).blocks]  # type: ignore[arg-type]


def test_headings_are_larger_than_the_body_and_levelled_by_size() -> None:
    title = line_words("The Title", 72, 72, 20)
    section = line_words("A Section", 72, 110, 14)
    body, _ = paragraph(BODY * 2, 72, 135, 468)
    assert kinds(title + section + body) == [
        (BlockKind.HEADING, 1, "The Title"),
        (BlockKind.HEADING, 2, "A Section"),
        (BlockKind.PARAGRAPH, 0, (BODY * 2).strip()),
    ]


def test_a_bold_line_on_a_body_that_is_not_bold_is_a_heading_below_the_larger_ones() -> None:
    title = line_words("Big Title", 72, 72, 18)
    bold = line_words("Methods", 72, 110, 10, bold=True)
    body, _ = paragraph(BODY * 2, 72, 124, 468)
    assert [(k, level) for k, level, _ in kinds(title + bold + body)][:2] == [(BlockKind.HEADING, 1), (BlockKind.HEADING, 2)]


def test_a_large_line_ending_with_a_full_stop_is_not_a_heading() -> None:
    large = line_words("This is a pull quote set large.", 72, 72, 16)
    body, _ = paragraph(BODY * 2, 72, 110, 468)
    assert kinds(large + body)[0][0] is BlockKind.PARAGRAPH


@pytest.mark.parametrize("marker", ["•", "-", "*", "1.", "2)", "a)", "(i)", "(b)"])
def test_list_items_start_at_their_markers_one_block_each(marker: str) -> None:
    intro, end = paragraph(BODY, 72, 72, 468)
    items = [w for n in range(3) for w in line_words(f"{marker} item number {n} of the list", 72, end + 12 * n)]
    found = kinds(intro + items)
    assert [k for k, _, _ in found] == [BlockKind.PARAGRAPH, *[BlockKind.LIST_ITEM] * 3]
    assert [t for _, _, t in found[1:]] == [f"{marker} item number {n} of the list" for n in range(3)]


def test_a_list_items_second_line_indented_under_its_text_stays_in_the_item() -> None:
    words = line_words("• the first item runs on", 72, 100) + line_words("over two lines", 82, 112) + line_words("• the second", 72, 124)
    assert [t for _, _, t in kinds(words)] == ["• the first item runs on over two lines", "• the second"]


def test_an_indented_first_line_starts_a_paragraph() -> None:
    words = line_words("the end of one paragraph that fills", 72, 100) + line_words("its line.", 72, 112)
    words += line_words("A new one starts indented and runs", 92, 124) + line_words("on to a second line.", 72, 136)
    assert [t for _, _, t in kinds(words)] == [
        "the end of one paragraph that fills its line.",
        "A new one starts indented and runs on to a second line.",
    ]


def test_a_caption_is_its_own_block_under_a_figure() -> None:
    body, end = paragraph(BODY, 72, 72, 468)
    figure = Box(72, end + 10, 400, end + 200)
    caption = line_words("Figure 3 The layout of a page", 72, end + 206)
    after, _ = paragraph(BODY, 72, end + 236, 468)
    found = kinds(body + caption + after, images=[figure])
    assert (BlockKind.CAPTION, 0, "Figure 3 The layout of a page") in found


def test_a_caption_with_a_stop_after_its_label_needs_no_figure_but_prose_naming_a_table_is_prose() -> None:
    body, end = paragraph(BODY, 72, 72, 468)
    caption = line_words("Table 2: Costs by year", 72, end + 20)
    prose, _ = paragraph("Table 2 shows the costs by year for every one of the sites.", 72, end + 40, 468)
    assert [k for k, _, _ in kinds(body + caption + prose)] == [BlockKind.PARAGRAPH, BlockKind.CAPTION, BlockKind.PARAGRAPH]


def test_lines_in_the_top_and_bottom_bands_set_apart_from_the_body_are_blocks_of_their_own() -> None:
    header = line_words("Journal of Layout Studies", 72, 30, 10)
    body, _ = column(sentences("B", 3, words_each=30), 72, 60, 468, gap=0)
    number = line_words("7", 300, 750, 10)
    texts = [t for _, _, t in kinds(header + body + number)]
    assert texts[0] == "Journal of Layout Studies" and texts[-1] == "7"


def test_a_table_found_is_one_block_in_its_place_with_its_rows_and_its_words_left_out_of_the_text(monkeypatch: pytest.MonkeyPatch) -> None:
    above, end = paragraph(BODY, 72, 72, 468)
    cells = line_words("Year Cost", 72, end + 20) + line_words("2024 15", 72, end + 32)
    below, _ = paragraph("After the table.", 72, end + 60, 468)
    words = above + cells + below
    held = frozenset(range(len(above), len(above) + len(cells)))
    table = Table(box=Box.around(w.box for w in cells), rows=[["Year", "Cost"], ["2024", "15"]], words=held)

    def find_tables(page: PageWords) -> list[Table]:
        return [table]

    monkeypatch.setattr(page_module, "find_tables", find_tables)
    layout = read_layout(page(words))
    assert [b.kind for b in layout.blocks] == [BlockKind.PARAGRAPH, BlockKind.TABLE, BlockKind.PARAGRAPH]
    assert layout.blocks[1].rows == [["Year", "Cost"], ["2024", "15"]]
    assert layout.text.count("2024") == 1


def test_lines_of_mathematics_make_an_equation_block_and_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    def is_equation(line: Line) -> bool:
        return "=" in line.text

    monkeypatch.setattr(blocks_module, "is_equation", is_equation)
    above, end = paragraph(BODY, 72, 72, 468)
    equation = line_words("E = m c 2", 200, end + 4)
    below, _ = paragraph(BODY, 72, end + 16, 468)
    layout = read_layout(page(above + equation + below))
    assert [b.kind for b in layout.blocks] == [BlockKind.PARAGRAPH, BlockKind.EQUATION, BlockKind.PARAGRAPH]
    assert layout.equations == 1


def test_a_table_across_two_columns_is_read_between_the_bands_above_and_below_it(monkeypatch: pytest.MonkeyPatch) -> None:
    top_left, end = column(sentences("TL", 2), 54, 72, 240)
    top_right, _ = column(sentences("TR", 2), 318, 72, 240)
    cells = line_words("Year Cost of the whole programme Sites", 54, end + 10) + line_words("2024 15 7", 54, end + 22)
    bottom_left, _ = column(sentences("BL", 2), 54, end + 50, 240)
    bottom_right, _ = column(sentences("BR", 2), 318, end + 50, 240)
    words = cells + bottom_right + top_left + bottom_left + top_right
    table = Table(
        box=Box(54, end + 10, 558, end + 32), rows=[["Year", "Cost", "Sites"], ["2024", "15", "7"]], words=frozenset(range(len(cells)))
    )

    def find_tables(page: PageWords) -> list[Table]:
        return [table]

    monkeypatch.setattr(page_module, "find_tables", find_tables)
    texts = [b.text for b in read_layout(page(words)).blocks]
    assert texts == sentences("TL", 2) + sentences("TR", 2) + ["Year Cost Sites\n2024 15 7"] + sentences("BL", 2) + sentences("BR", 2)
