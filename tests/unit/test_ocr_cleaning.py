"""clean_text and clean_words: NFC, ligatures, folded spaces and fullwidth forms, no control characters, only the scripts asked for."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3wq.processors.ocr.cleaning import clean_text, clean_words, scripts_keeping
from s3wq.processors.ocr.layout.model import Box, Word
from s3wq.processors.ocr.scripts import LANGUAGE_SCRIPTS, Script

LATIN = LANGUAGE_SCRIPTS["en"]
RUSSIAN = LANGUAGE_SCRIPTS["ru"]
JAPANESE = LANGUAGE_SCRIPTS["ja"]


@pytest.mark.parametrize(
    ("text", "scripts", "expected"),
    [
        # RapidOCR's Chinese+English model reading a speck on an English page
        ("The major 马 reforms", LATIN, "The major reforms"),
        ("Total 米1,482 EUR", LATIN, "Total 1,482 EUR"),
        ("wrote。 the clerk", LATIN, "wrote the clerk"),
        # ligatures of a text layer
        ("the ﬁrst ﬂoor, an oﬃce, a ﬄuent staﬀ, ﬅreet, ﬆyle", LATIN, "the first floor, an office, a ffluent staff, street, style"),
        # decomposed accents composed (NFC)
        ("cafe\u0301 de\u0301ja\u0300 Mina\u0301c", LATIN, "café déjà Minác"),
        # fullwidth forms and odd spaces folded in Latin text
        ("\uff29\uff4e\uff56\uff4f\uff49\uff43\uff45\u00a0\uff11\uff12\uff13\u2009EUR\u3000due", LATIN, "Invoice 123 EUR due"),
        ("tab\tseparated", LATIN, "tab separated"),
        # control and invisible characters dropped
        ("bell\x07 and\x00 nul, zero\u200bwidth, soft\u00adhyphen\ufeff", LATIN, "bell and nul, zerowidth, softhyphen"),
        # Common characters are every script's
        ("№ 5 — 12,5 % ± 0,3 € (§ 4)", RUSSIAN, "№ 5 — 12,5 % ± 0,3 € (§ 4)"),
        ("µm, \u2113, ™", LATIN, "µm, \u2113, ™"),
        # a script asked for stays; one not asked for goes
        ("Привет, мир", RUSSIAN, "Привет, мир"),
        ("Привет, world", LATIN, ", world"),
        ("Ελληνικά κείμενα", frozenset({Script.GREEK}), "Ελληνικά κείμενα"),
        ("東京は晴れ。カタカナ", JAPANESE, "東京は晴れ。カタカナ"),
        ("東京 Tokyo", LATIN, "Tokyo"),
        # a letter of a script no setting names (Ethiopic, Tamil), and the marks on a dropped letter
        ("ሰላም hello தமிழ்", LATIN, "hello"),
        ("x 中\u0301 y", LATIN, "x y"),
        # lines kept apart, their ends trimmed where a character went
        ("first line 马\nsecond line", LATIN, "first line\nsecond line"),
    ],
)
def test_clean_text(text, scripts, expected):
    assert clean_text(text, scripts) == unicodedata.normalize("NFC", expected)


def test_the_fullwidth_forms_of_cjk_text_are_its_own():
    assert clean_text("\uff21\uff22\uff23\uff11\uff12\uff13", JAPANESE) == "\uff21\uff22\uff23\uff11\uff12\uff13"


@pytest.mark.parametrize(
    ("char", "kept_by"),
    [
        ("a", {Script.LATIN}),
        ("é", {Script.LATIN}),
        ("ж", {Script.CYRILLIC}),
        ("λ", {Script.GREEK}),
        ("马", {Script.HAN}),
        ("ア", {Script.KATAKANA}),
    ],
)
def test_scripts_keeping_names_a_letters_script(char, kept_by):
    assert scripts_keeping(char) == kept_by


@pytest.mark.parametrize("char", ["7", ",", "€", " ", "\u0301", "(", "%"])
def test_common_and_inherited_characters_are_every_scripts(char):
    assert scripts_keeping(char) is None


texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
settings = st.sets(st.sampled_from(list(Script)), min_size=1).map(frozenset)


@given(texts, settings)
def test_clean_text_is_nfc_idempotent_and_keeps_only_the_scripts_asked_for(text, scripts):
    cleaned = clean_text(text, scripts)
    assert unicodedata.is_normalized("NFC", cleaned)
    assert clean_text(cleaned, scripts) == cleaned
    for char in cleaned:
        keeping = scripts_keeping(char)
        assert keeping is None or keeping & scripts, char
        assert unicodedata.category(char) != "Cc" or char == "\n"


@given(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1).map(lambda s: " ".join(s.split())))
def test_plain_ascii_passes_unchanged(text):
    assert clean_text(text, LATIN) == text


def _word(text: str, left: float = 10.0) -> Word:
    return Word(text=text, box=Box(left, 20.0, left + 30.0, 32.0), size=12.0, confidence=0.9)


def test_clean_words_cleans_each_word_and_drops_those_left_empty():
    words = [_word("The", 10), _word("马", 45), _word("ﬁrst", 60), _word("米。", 95), _word("\uff26\uff4c\uff4f\uff4f\uff52", 110)]

    cleaned = clean_words(words, LATIN)

    assert [w.text for w in cleaned] == ["The", "first", "Floor"]
    # the words keep their boxes, sizes and confidences
    assert [w.box.left for w in cleaned] == [10, 60, 110]
    assert all(w.size == 12.0 and w.confidence == 0.9 for w in cleaned)
