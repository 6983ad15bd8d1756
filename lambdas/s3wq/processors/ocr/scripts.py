"""The writing systems the ``ocr`` processor keeps, from ``S3WQ_OCR_LANG``: languages (``en,fr``) or scripts (``latin,greek``).

RapidOCR's shipped recognition model reads Chinese and English alike, so on
an English page it now and then reads a speck as "米". What a page may hold
is the setting's scripts and the characters every script shares (digits,
punctuation, symbols: Unicode's Common and Inherited); anything else is left
out of the text (cleaning.py).
"""

from __future__ import annotations

from enum import StrEnum


class Script(StrEnum):
    """A writing system, as Unicode's Scripts.txt names it (lower case)."""

    LATIN = "latin"
    GREEK = "greek"
    CYRILLIC = "cyrillic"
    ARMENIAN = "armenian"
    HEBREW = "hebrew"
    ARABIC = "arabic"
    DEVANAGARI = "devanagari"
    THAI = "thai"
    GEORGIAN = "georgian"
    HANGUL = "hangul"
    HIRAGANA = "hiragana"
    KATAKANA = "katakana"
    HAN = "han"


# ISO 639-1 codes, each to the scripts its text is written in.
LANGUAGE_SCRIPTS: dict[str, frozenset[Script]] = {
    **{
        code: frozenset({Script.LATIN})
        for code in (
            "en fr de es it pt nl sv da no nb nn fi is et lv lt pl cs sk sl hr bs sq ro hu tr az "
            "ga cy gd eu ca gl oc la mt af sw id ms tl vi eo lb fo ha yo ig zu xh so uz tk"
        ).split()
    },
    **{code: frozenset({Script.CYRILLIC}) for code in "ru uk be bg mk sr kk ky tg mn".split()},
    "el": frozenset({Script.GREEK}),
    "hy": frozenset({Script.ARMENIAN}),
    "he": frozenset({Script.HEBREW}),
    "yi": frozenset({Script.HEBREW}),
    **{code: frozenset({Script.ARABIC}) for code in "ar fa ur ps ku".split()},
    **{code: frozenset({Script.DEVANAGARI}) for code in "hi mr ne sa".split()},
    "th": frozenset({Script.THAI}),
    "ka": frozenset({Script.GEORGIAN}),
    "ko": frozenset({Script.HANGUL, Script.HAN}),
    "ja": frozenset({Script.HIRAGANA, Script.KATAKANA, Script.HAN}),
    "zh": frozenset({Script.HAN}),
}
DEFAULT_LANGUAGES = "en"


def scripts_named(setting: str) -> frozenset[Script] | None:
    """The scripts a comma-separated list of language codes and script names asks for; None when one names neither."""
    scripts: set[Script] = set()
    for name in (part.strip().lower() for part in setting.split(",")):
        if not name:
            continue
        if name in LANGUAGE_SCRIPTS:
            scripts |= LANGUAGE_SCRIPTS[name]
        elif name in Script.__members__.values():
            scripts.add(Script(name))
        else:
            return None
    return frozenset(scripts) or None
