"""Properties of layout over generated pages: no word lost or doubled, the input's order of no account, spans that tile the text."""

from __future__ import annotations

import random
from collections import Counter
from itertools import pairwise

from helpers.page_words import line_words, page, wrap
from hypothesis import given, settings
from hypothesis import strategies as st

from s3wq.processors.ocr.layout.document import read_document
from s3wq.processors.ocr.layout.model import Box, PageWords, Word
from s3wq.processors.ocr.layout.page import read_layout

TOKENS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789", min_size=1, max_size=9)


@st.composite
def set_pages(draw: st.DrawFn) -> PageWords:
    """A page set in one to three columns of paragraphs, at one font size, its words in a shuffled order."""
    size = draw(st.sampled_from([8.0, 9.0, 10.0, 12.0]))
    columns = draw(st.integers(1, 3))
    width = (540 - 18 * (columns - 1)) / columns
    words: list[Word] = []
    for index in range(columns):
        top = 60.0
        for _ in range(draw(st.integers(1, 4))):
            tokens = draw(st.lists(TOKENS, min_size=1, max_size=40))
            for line in wrap(" ".join(tokens), int(width // (size / 2))):
                words += line_words(line, 36 + index * (width + 18), top, size)
                top += 1.2 * size
            top += draw(st.sampled_from([0.0, 6.0, 14.0]))
    seed = draw(st.integers(0, 2**16))
    random.Random(seed).shuffle(words)
    return page(words)


@st.composite
def scattered_pages(draw: st.DrawFn) -> PageWords:
    """Words anywhere on the page, of any size, touching or overlapping as they fall."""
    words = [
        Word(text, Box(x, y, x + len(text) * s / 2, y + s), s)
        for text, x, y, s in draw(
            st.lists(st.tuples(TOKENS, st.floats(0, 560), st.floats(0, 770), st.sampled_from([6.0, 9.0, 10.0, 18.0])), max_size=80)
        )
    ]
    return page(words)


@settings(max_examples=60, deadline=None)
@given(set_pages())
def test_every_word_of_a_set_page_is_in_its_text_once(page_words: PageWords) -> None:
    text = read_layout(page_words).text
    assert Counter(text.split()) == Counter(w.text for w in page_words.words)


@settings(max_examples=60, deadline=None)
@given(set_pages(), st.randoms(use_true_random=False))
def test_the_order_words_come_in_changes_nothing(page_words: PageWords, rng: random.Random) -> None:
    words = list(page_words.words)
    rng.shuffle(words)
    again = PageWords(page_words.number, page_words.width, page_words.height, words, page_words.source)
    assert read_layout(again).text == read_layout(page_words).text


@settings(max_examples=80, deadline=None)
@given(scattered_pages(), st.randoms(use_true_random=False))
def test_scattered_words_lose_and_double_no_character_whatever_their_order(page_words: PageWords, rng: random.Random) -> None:
    text = read_layout(page_words).text
    assert Counter(text.replace(" ", "").replace("\n", "")) == Counter("".join(w.text for w in page_words.words))
    words = list(page_words.words)
    rng.shuffle(words)
    assert read_layout(PageWords(1, page_words.width, page_words.height, words, page_words.source)).text == text


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(set_pages(), scattered_pages(), st.just(page([]))), min_size=1, max_size=4))
def test_page_spans_tile_the_text_and_each_starts_with_its_page(pages: list[PageWords]) -> None:
    numbered = [PageWords(n, p.width, p.height, p.words, p.source) for n, p in enumerate(pages, start=1)]
    document = read_document(numbered)
    spans = document.page_spans
    assert [n for _, _, n in spans] == list(range(1, len(pages) + 1))
    assert spans[0][0] == 0 and spans[-1][1] == len(document.text)
    assert all(a[1] == b[0] for a, b in pairwise(spans))
    for (start, end, _), layout in zip(spans, document.pages):
        assert document.text[start:end].startswith(layout.text) and document.text[start:end].strip() == layout.text.strip()
