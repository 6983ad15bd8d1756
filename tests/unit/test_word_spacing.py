"""word_spacing: the engine's spaces moved where the ink shows word gaps, and left where it does not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from s3wq.processors.ocr.word_spacing import Glyph, respaced, words_of

LETTER_GAP, WORD_GAP, HEIGHT = 4.0, 14.0, 40.0


def _line(text: str, gaps_at: dict[int, float] | None = None) -> tuple[list[Glyph], list[float], list[list[int]]]:
    """Glyphs of ``text`` 20 px apart, the ink gaps a line of print has (word gaps at its spaces) unless ``gaps_at`` says
    otherwise for a glyph boundary, and the engine's words."""
    glyphs, gaps, x = [], [], 0.0
    for char in text:
        if char == " ":
            if gaps:
                gaps[-1] = WORD_GAP
            continue
        glyphs.append(Glyph(char, 0.99, x))
        gaps.append(LETTER_GAP)
        x += 20
    gaps = gaps[:-1]
    for k, gap in (gaps_at or {}).items():
        gaps[k] = gap
    return glyphs, gaps, words_of(text, glyphs)


def _text(glyphs: list[Glyph], words: list[list[int]]) -> str:
    return " ".join("".join(glyphs[i].text for i in word) for word in words)


def test_words_of_groups_the_glyphs_at_the_engines_spaces():
    glyphs = [Glyph(c, 1.0, float(i)) for i, c in enumerate("Themajor")]
    assert words_of("The  major", glyphs) == [[0, 1, 2], [3, 4, 5, 6, 7]]


def test_a_lone_letter_set_apart_at_a_narrow_gap_is_joined():
    # "The m ajor": the engine's space after "m" lies on a gap of 9 px, a word gap is 14
    glyphs, gaps, words = _line("The m ajor reforms were adopted", {3: 9.0})
    assert _text(glyphs, respaced(words, glyphs, gaps, HEIGHT)) == "The major reforms were adopted"


def test_a_lone_letter_at_a_full_word_gap_stays_a_word():
    glyphs, gaps, words = _line("It was a major reform of the law")
    assert _text(glyphs, respaced(words, glyphs, gaps, HEIGHT)) == "It was a major reform of the law"


def test_two_words_run_together_are_split_at_a_gap_that_stands_out():
    # "Apriltimber": the engine read no space, the ink shows 9 px after "April"
    glyphs, gaps, words = _line("The new Apriltimber arrived today", {10: 9.0})
    assert _text(glyphs, respaced(words, glyphs, gaps, HEIGHT)) == "The new April timber arrived today"


def test_a_word_gap_inside_a_word_is_split_wherever_it_lies():
    glyphs, gaps, words = _line("paid by Acme Ltd onTuesday", {14: WORD_GAP})
    assert _text(glyphs, respaced(words, glyphs, gaps, HEIGHT)) == "paid by Acme Ltd on Tuesday"


def test_figures_are_never_split_or_joined():
    glyphs, gaps, words = _line("Total 1,482 EUR in 30 days", {6: WORD_GAP})
    assert _text(glyphs, respaced(words, glyphs, gaps, HEIGHT)) == "Total 1,482 EUR in 30 days"


sentences = st.lists(
    st.sampled_from("the warehouse confirmed a shipment on Monday to our new office in Leeds".split()), min_size=2, max_size=12
)


@given(sentences)
def test_print_spaced_as_print_is_left_as_the_engine_read_it(words):
    text = " ".join(words)
    glyphs, gaps, engine_words = _line(text)
    assert _text(glyphs, respaced(engine_words, glyphs, gaps, HEIGHT)) == text


@given(sentences, st.floats(min_value=0, max_value=3.0))
def test_a_line_whose_gaps_are_all_alike_is_left_as_it_is(words, gap):
    text = " ".join(words)
    glyphs, _, engine_words = _line(text)
    assert _text(glyphs, respaced(engine_words, glyphs, [gap] * (len(glyphs) - 1), HEIGHT)) == text
