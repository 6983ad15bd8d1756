"""A paragraph's lines joined: a word broken over a line end made whole, a hyphen of the word's own kept."""

from __future__ import annotations

import pytest

from s3wq.processors.ocr.layout.hyphens import join_lines


@pytest.mark.parametrize(
    ("lines", "text"),
    [
        (["a docu-", "ment here"], "a document here"),
        (["said Jean-", "Paul"], "said Jean-Paul"),
        (["the COVID-", "19 wave"], "the COVID-19 wave"),
        (["from 3-", "4 pm"], "from 3- 4 pm"),
        (["a hyphen\u2010", "ated word"], "a hyphenated word"),
        (["soft\u00ad", "Hyphen"], "softHyphen"),
        (["one", "", "two"], "one two"),
        (["-", "dash"], "- dash"),
    ],
)
def test_lines_are_joined_with_a_space_but_where_a_word_was_broken(lines: list[str], text: str) -> None:
    assert join_lines(lines) == text
