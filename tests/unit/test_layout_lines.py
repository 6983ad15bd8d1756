"""Words into lines: spaces from the gaps between boxes, pieces of a word joined, wide gaps and gutters kept apart."""

from __future__ import annotations

from helpers.page_words import line_words, page, paragraph

from s3wq.processors.ocr.layout.lines import fragments, make_line, merge_row
from s3wq.processors.ocr.layout.model import Box, Word
from s3wq.processors.ocr.layout.page import read_layout


def word(text: str, left: float, top: float = 100.0, size: float = 10.0) -> Word:
    return Word(text, Box(left, top, left + 5 * len(text), top + size), size)


def test_a_word_split_into_touching_boxes_is_one_word_and_word_gaps_stay_spaces() -> None:
    # "the m ajor point": "m" and "ajor" touch (a gap of 0.2 pt), the others are 3 pt apart (a word gap).
    words = [word("the", 100), word("m", 118), word("ajor", 123.2), word("point", 146.2)]
    assert make_line(words).text == "the major point"


def test_a_gap_far_below_the_lines_word_gap_joins_even_on_a_loosely_set_line() -> None:
    # Justified wide: word gaps of 8 pt (0.8 em); "becam" and "e" 1 pt apart, an eighth of them.
    words = [word("it", 100), word("becam", 118), word("e", 144), word("clear", 157), word("then", 190)]
    assert make_line(words).text == "it became clear then"


def test_a_line_of_two_pieces_alone_is_one_word() -> None:
    assert make_line([word("m", 100), word("ajor", 105.3)]).text == "major"


def test_a_gap_of_several_ems_parts_one_row_into_two_lines() -> None:
    row = fragments(line_words("Name of the applicant", 72, 100) + line_words("Date of birth", 400, 100))
    assert [line.text for line in merge_row(row)] == ["Name of the applicant", "Date of birth"]


def test_fragments_never_hold_a_gap_as_wide_as_a_gutter() -> None:
    # Two columns 12 pt (1.2 em) apart, their lines at one height.
    left = line_words("left column words here", 72, 100)
    right = line_words("right column words", 72 + 22 * 5 + 12, 100)
    assert sorted(f.text for f in fragments(left + right)) == ["left column words here", "right column words"]


def test_the_words_of_a_line_come_left_to_right_whatever_their_order_in() -> None:
    words = line_words("one two three four", 72, 100)
    assert [f.text for f in fragments(list(reversed(words)))] == ["one two three four"]


def test_a_word_broken_over_a_line_end_is_joined_in_its_paragraph() -> None:
    words = line_words("the docu-", 72, 100) + line_words("ment says", 72, 112)
    [block] = read_layout(page(words)).blocks
    assert block.text == "the document says"


def test_a_hyphen_before_a_capital_stays_with_no_space_after_it() -> None:
    words = line_words("said Jean-", 72, 100) + line_words("Paul Sartre", 72, 112)
    [block] = read_layout(page(words)).blocks
    assert block.text == "said Jean-Paul Sartre"


def test_a_paragraph_set_in_lines_reads_as_its_text() -> None:
    text = "a paragraph of twenty short words set in a narrow column so that it takes several lines of the page"
    words, _ = paragraph(text, 72, 100, 120)
    [block] = read_layout(page(words)).blocks
    assert block.text == text
