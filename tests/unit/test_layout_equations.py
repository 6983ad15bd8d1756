"""Equations told from prose: set mathematics, not a sentence with one "=" in it."""

# ruff: noqa: RUF001 (mathematics' own signs and Greek letters, look-alikes of Latin ones, are what these tests are made of)

from __future__ import annotations

import pytest
from helpers.layout_pages import Placed, line_of, placed_line, words_of

from s3wq.processors.ocr.layout.equations import is_equation
from s3wq.processors.ocr.layout.model import Box, Word


def raised(word: Word, by: float = 4.0, scale: float = 0.7) -> Word:
    """``word`` set as a superscript: smaller, above the baseline."""
    box = word.box
    return Word(word.text, Box(box.left, box.top - by, box.left + box.width * scale, box.top - by + box.height * scale), word.size * scale)


@pytest.mark.parametrize(
    "text",
    [
        "f(x) = ∫ g(t) dt",
        "∑ x_i = 1",
        "α + β ≤ γ",
        "y = a x + b (3)",
        "σ² = E[(X − μ)²]",
        "√ (a + b) ≠ √ a + √ b",
        "E = m c²",
    ],
)
def test_set_mathematics_is_an_equation(text):
    assert is_equation(placed_line(Placed(text, 100, 300)))


@pytest.mark.parametrize(
    "text",
    [
        "The total cost C = 12 dollars per unit of work done in the year.",
        "where α is the learning rate and the momentum is kept at its default",
        "Let x = 3.",
        "Results were compared (see Table 2) and found to agree with the survey.",
        "x",
        "Section 3 describes the method; section 4 the results (2)",
    ],
)
def test_prose_that_mentions_mathematics_is_not_an_equation(text):
    assert not is_equation(placed_line(Placed(text, 100, 300)))


def test_superscripts_seen_as_smaller_raised_words_make_an_equation():
    x, two, plus, y, two_again, equals, z, two_last = words_of(Placed("x 2 + y 2 = r 2", 100, 300))
    scripted = line_of([x, raised(two), plus, y, raised(two_again), equals, z, raised(two_last)])

    assert is_equation(scripted)


def test_a_word_off_the_baseline_tips_a_borderline_line_into_an_equation():
    ax, equals, by = words_of(Placed("Ax = By", 100, 300))
    lowered = Word(by.text, Box(by.box.left, by.box.top + 4, by.box.right, by.box.bottom + 4), by.size)

    assert not is_equation(line_of([ax, equals, by]))
    assert is_equation(line_of([ax, equals, lowered]))
    assert not is_equation(line_of(words_of(Placed("the radius r = the distance", 100, 300))))
