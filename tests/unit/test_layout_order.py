"""Reading order from geometry: columns, bands between headings, sidebars, sections out of content order, skewed scans."""

from __future__ import annotations

import random

import pytest
from helpers.page_words import column, inked, line_words, page, paragraph, sentences, skewed

from s3wq.processors.ocr.layout.model import BlockKind, Source, Word
from s3wq.processors.ocr.layout.page import read_layout


def block_texts(words: list[Word]) -> list[str]:
    return [block.text for block in read_layout(page(words)).blocks]


def shuffled(words: list[Word], seed: int = 29) -> list[Word]:
    """The words in a content stream's order: any."""
    out = list(words)
    random.Random(seed).shuffle(out)
    return out


def test_one_column_reads_its_paragraphs_top_to_bottom() -> None:
    words, _ = column(sentences("P", 4, words_each=40), 72, 72, 468)
    assert block_texts(shuffled(words)) == sentences("P", 4, words_each=40)


def test_two_columns_read_left_column_then_right() -> None:
    left, _ = column(sentences("L", 3), 54, 72, 240)
    right, _ = column(sentences("R", 3), 318, 72, 240)
    assert block_texts(shuffled(left + right)) == sentences("L", 3) + sentences("R", 3)


def test_two_columns_whose_paragraph_gaps_line_up_are_still_read_column_by_column() -> None:
    # Each column's paragraphs are of one length, so their gaps fall at the same heights: a cut at the widest
    # horizontal band first would read the page in rows.
    left, _ = column(sentences("L", 3), 54, 72, 240, gap=14)
    right, _ = column(sentences("R", 3), 318, 72, 240, gap=14)
    assert block_texts(left + right) == sentences("L", 3) + sentences("R", 3)


def test_a_narrow_gutter_of_a_little_over_an_em_parts_the_columns() -> None:
    left, _ = column(sentences("L", 2), 54, 72, 250)
    right, _ = column(sentences("R", 2), 54 + 250 + 12, 72, 250)
    assert block_texts(left + right) == sentences("L", 2) + sentences("R", 2)


def test_three_columns_read_left_to_right() -> None:
    columns = [column(sentences(name, 2), left, 72, 160)[0] for name, left in (("A", 54), ("B", 226), ("C", 398))]
    assert block_texts(shuffled([w for c in columns for w in c])) == sentences("A", 2) + sentences("B", 2) + sentences("C", 2)


def test_a_heading_across_two_columns_keeps_its_place_between_the_bands_above_and_below() -> None:
    top_left, end = column(sentences("TL", 2), 54, 72, 240)
    top_right, _ = column(sentences("TR", 2), 318, 72, 240)
    heading = line_words("Results Across The Whole Page Width", 150, end + 10, 14)
    bottom_left, _ = column(sentences("BL", 2), 54, end + 40, 240)
    bottom_right, _ = column(sentences("BR", 2), 318, end + 40, 240)
    texts = block_texts(shuffled(top_left + top_right + heading + bottom_left + bottom_right))
    expected = sentences("TL", 2) + sentences("TR", 2) + ["Results Across The Whole Page Width"] + sentences("BL", 2) + sentences("BR", 2)
    assert texts == expected


def test_a_sidebar_beside_two_columns_is_read_apart_and_never_woven_into_the_body() -> None:
    left, _ = column(sentences("L", 3), 36, 72, 180)
    right, _ = column(sentences("R", 3), 232, 72, 180)
    box, _ = column(sentences("S", 2, words_each=6), 440, 120, 130, size=8)
    texts = block_texts(shuffled(left + right + box))
    assert texts == sentences("L", 3) + sentences("R", 3) + sentences("S", 2, words_each=6)


def test_numbered_sections_come_out_in_the_order_they_are_printed_whatever_the_content_streams() -> None:
    section = {n: paragraph(f"{n}. Section {n} says something of its own here", 72, 100 + 60 * n, 468)[0] for n in (1, 2, 3)}
    texts = block_texts(section[1] + section[3] + section[2])
    assert [t.split()[0] for t in texts] == ["1.", "2.", "3."]


@pytest.mark.parametrize("degrees", [2.0, -2.0, 1.0, -0.5])
def test_a_skewed_scan_of_two_columns_is_read_column_by_column_with_no_line_across_the_gutter(degrees: float) -> None:
    left, _ = column(sentences("L", 4), 54, 100, 240)
    right, _ = column(sentences("R", 4), 318, 100, 240)
    layout = read_layout(page(skewed(shuffled(left + right), degrees)))
    assert [b.text for b in layout.blocks] == sentences("L", 4) + sentences("R", 4)
    for line in (line for block in layout.blocks for line in block.lines):
        assert len({w.text[0] for w in line.words}) == 1, line.text


def test_a_table_with_a_narrow_column_of_figures_is_read_row_by_row() -> None:
    rows = [("Apples and pears from the orchard", "12.5"), ("Cherries from the hill", "7.25"), ("Plums", "130.0"), ("Quinces", "3.1")]
    words = [
        w for n, (label, figure) in enumerate(rows) for w in line_words(label, 72, 100 + 14 * n) + line_words(figure, 400, 100 + 14 * n)
    ]
    layout = read_layout(page(words))
    lines = [line.text for block in layout.blocks for line in block.lines]
    assert lines == [text for row in rows for text in row]


def test_a_sentence_broken_off_at_a_columns_foot_goes_on_at_the_next_columns_head() -> None:
    left, _ = paragraph("the first column ends in the middle of a sentence that is carried over to the", 54, 72, 240)
    right, _ = paragraph("next column, where it ends. A new paragraph follows it.", 318, 72, 240)
    later, _ = paragraph("Then a paragraph of its own.", 318, 120, 240)
    texts = block_texts(left + right + later)
    assert (
        texts[0]
        == "the first column ends in the middle of a sentence that is carried over to the next column, where it ends. A new paragraph follows it."
    )
    assert texts[1:] == ["Then a paragraph of its own."]


def test_a_definition_list_of_terms_and_definitions_is_read_row_by_row_not_as_two_columns() -> None:
    rows = [
        ("-b, --benchmark", "perform a benchmark on decoding"),
        ("-s, --strict", "use strict DER decoding of every field"),
        ("-t, --no-time", "use strict DER decoding but not in time fields"),
        ("-h, --help", "display this help and exit"),
    ]
    words = [
        w for n, (term, text) in enumerate(rows) for w in line_words(term, 100, 200 + 13 * n, 11) + line_words(text, 228, 200 + 13 * n, 11)
    ]
    assert block_texts(shuffled(words)) == [f"{term} {text}" for term, text in rows]


@pytest.mark.parametrize("degrees", [0.0, 1.5, -2.0])
def test_an_ocr_scan_whose_boxes_hug_the_ink_reads_its_heading_then_its_columns_paragraph_by_paragraph(degrees: float) -> None:
    text = "the quick brown fox jumps over the lazy dog and runs away into the woods where nobody can see him any more"
    left, _ = column([f"{text} left{n}." for n in range(3)], 54, 72, 240, gap=8)
    right, _ = column([f"{text} right{n}." for n in range(3)], 318, 72, 240, gap=8)
    heading = line_words("Results Of The Study", 54, 40, 16)
    layout = read_layout(page(skewed(inked(heading + left + right), degrees), source=Source.OCR))
    assert [(b.kind, b.text.split()[-1]) for b in layout.blocks] == [(BlockKind.HEADING, "Study")] + [
        (BlockKind.PARAGRAPH, f"{side}{n}.") for side in ("left", "right") for n in range(3)
    ]


@pytest.mark.timeout(60)
def test_a_page_of_thousands_of_scattered_words_is_ordered_in_well_under_a_minute_and_none_is_lost() -> None:
    # Word-sized boxes all over the page, each in a cell of its own (so no two run together), in no order: every gap between them
    # is a candidate gutter. A search that compared each word with each other at each candidate edge would be cubic (minutes for
    # 4000); the page must still be read, and every word kept.
    rng = random.Random(7)
    cells = rng.sample([(column, row) for column in range(20) for row in range(200)], 4000)
    words = [
        w
        for n, (column, row) in enumerate(cells)
        for w in line_words(f"w{n}", 36 + 26 * column + rng.uniform(0, 6), 36 + 3.5 * row + rng.uniform(0, 0.5), size=2.0)
    ]

    layout = read_layout(page(words))

    read = [word for block in layout.blocks for line in block.lines for word in line.text.split()]
    assert sorted(read) == sorted(f"w{n}" for n in range(4000))
