"""Text as a reader expects it: NFC, ligatures spelt out, odd spaces and fullwidth forms folded, and no characters of scripts not asked for.

RapidOCR's shipped model reads Chinese and English alike, so on an English
page a speck now and then comes out as "马" or "米"; a text layer may hold
ligature glyphs (ﬁ) and no-break or ideographic spaces. A character's script
is looked up in a compact table of ranges (Unicode's Scripts.txt, coarsened
to the blocks of the scripts scripts.py names): characters every script shares
(digits, punctuation, symbols: Common; combining marks: Inherited) are kept,
unless they follow a character that was left out, as a mark takes its base's
script. A letter of any script the table does not name is left out too.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
import unicodedata
from collections.abc import Sequence

from s3wq.processors.ocr.layout.model import Word
from s3wq.processors.ocr.scripts import Script

_CJK = frozenset({Script.HAN, Script.HIRAGANA, Script.KATAKANA, Script.HANGUL})
_ALWAYS: frozenset[Script] = frozenset(Script)  # letters Unicode counts as Common: µ, ™, math alphanumerics

# (first, last, the scripts that keep it), sorted by first; the ranges do not overlap.
_RANGES: tuple[tuple[int, int, frozenset[Script]], ...] = tuple(
    (first, last, frozenset(kept))
    for first, last, kept in sorted(
        [
            (0x0041, 0x005A, {Script.LATIN}),
            (0x0061, 0x007A, {Script.LATIN}),
            (0x00AA, 0x00AA, {Script.LATIN}),
            (0x00B5, 0x00B5, _ALWAYS),
            (0x00BA, 0x00BA, {Script.LATIN}),
            (0x00C0, 0x00D6, {Script.LATIN}),
            (0x00D8, 0x00F6, {Script.LATIN}),
            (0x00F8, 0x02AF, {Script.LATIN}),
            (0x02B0, 0x02FF, _ALWAYS),  # modifier letters
            (0x0370, 0x03FF, {Script.GREEK}),
            (0x0400, 0x052F, {Script.CYRILLIC}),
            (0x0531, 0x058F, {Script.ARMENIAN}),
            (0x0591, 0x05FF, {Script.HEBREW}),
            (0x0600, 0x06FF, {Script.ARABIC}),
            (0x0750, 0x077F, {Script.ARABIC}),
            (0x08A0, 0x08FF, {Script.ARABIC}),
            (0x0900, 0x097F, {Script.DEVANAGARI}),
            (0x0E00, 0x0E7F, {Script.THAI}),
            (0x10A0, 0x10FF, {Script.GEORGIAN}),
            (0x1100, 0x11FF, {Script.HANGUL}),
            (0x1C80, 0x1C8F, {Script.CYRILLIC}),
            (0x1C90, 0x1CBF, {Script.GEORGIAN}),
            (0x1D00, 0x1DBF, {Script.LATIN}),  # phonetic extensions
            (0x1E00, 0x1EFF, {Script.LATIN}),
            (0x1F00, 0x1FFF, {Script.GREEK}),
            (0x2100, 0x214F, _ALWAYS),  # letterlike symbols
            (0x2C60, 0x2C7F, {Script.LATIN}),
            (0x2D00, 0x2D2F, {Script.GEORGIAN}),
            (0x2DE0, 0x2DFF, {Script.CYRILLIC}),
            (0x2E80, 0x2FDF, {Script.HAN}),
            (0x3001, 0x303F, _CJK),  # CJK punctuation: Common to Unicode, but on a Latin page only a misread speck
            (0x3041, 0x309F, {Script.HIRAGANA}),
            (0x30A0, 0x30FF, {Script.KATAKANA}),
            (0x3130, 0x318F, {Script.HANGUL}),
            (0x31F0, 0x31FF, {Script.KATAKANA}),
            (0x3400, 0x4DBF, {Script.HAN}),
            (0x4E00, 0x9FFF, {Script.HAN}),
            (0xA640, 0xA69F, {Script.CYRILLIC}),
            (0xA720, 0xA7FF, {Script.LATIN}),
            (0xA8E0, 0xA8FF, {Script.DEVANAGARI}),
            (0xA960, 0xA97F, {Script.HANGUL}),
            (0xAB30, 0xAB6F, {Script.LATIN}),
            (0xAC00, 0xD7FF, {Script.HANGUL}),
            (0xF900, 0xFAFF, {Script.HAN}),
            (0xFB00, 0xFB06, {Script.LATIN}),
            (0xFB13, 0xFB17, {Script.ARMENIAN}),
            (0xFB1D, 0xFB4F, {Script.HEBREW}),
            (0xFB50, 0xFDFF, {Script.ARABIC}),
            (0xFE70, 0xFEFE, {Script.ARABIC}),
            (0xFF21, 0xFF3A, {Script.LATIN, *_CJK}),  # fullwidth Latin letters: folded in Latin text, CJK text's own
            (0xFF41, 0xFF5A, {Script.LATIN, *_CJK}),
            (0xFF61, 0xFF65, _CJK),
            (0xFF66, 0xFF9F, {Script.KATAKANA}),
            (0xFFA0, 0xFFDC, {Script.HANGUL}),
            (0x1D400, 0x1D7FF, _ALWAYS),  # mathematical alphanumerics
            (0x20000, 0x3134F, {Script.HAN}),
        ],
        key=lambda entry: entry[0],
    )
)
_FIRSTS = [first for first, _, _ in _RANGES]

LIGATURES = {"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"}
# Spaces of other widths, and the ideographic space: one space in Latin text.
_ODD_SPACES = frozenset("\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000")
# Invisible characters that only break words apart for search: zero-width space, word joiner, BOM, soft hyphen.
_INVISIBLE = frozenset("\u200b\u2060\ufeff\u00ad")
_FULLWIDTH = range(0xFF01, 0xFF5F)  # fullwidth ! to ~: ASCII ! to ~, 0xFEE0 below
_SPACES = re.compile(r"[ ]{2,}")


def scripts_keeping(char: str) -> frozenset[Script] | None:
    """The scripts whose text keeps ``char``: None for a character every script shares (Common, Inherited)."""
    code = ord(char)
    at = bisect.bisect_right(_FIRSTS, code) - 1
    if at >= 0 and code <= _RANGES[at][1]:
        return _RANGES[at][2]
    if unicodedata.category(char)[0] == "L":
        return frozenset()  # a letter of a script not named here (Ethiopic, Tamil, ...): no setting keeps it
    return None


def _folded(char: str, latin: bool) -> str:
    """``char`` as Latin text spells it: a ligature spelt out, a fullwidth form or an odd space as ASCII."""
    if char in LIGATURES:
        return LIGATURES[char]
    if char == "\t":
        return " "
    if latin and char in _ODD_SPACES:
        return " "
    if latin and ord(char) in _FULLWIDTH:
        return chr(ord(char) - 0xFEE0)
    return char


def _kept(text: str, scripts: frozenset[Script]) -> str:
    """``text`` without control characters and without characters (and their marks) of scripts not in ``scripts``."""
    latin = Script.LATIN in scripts
    out: list[str] = []
    dropping = False  # the last base character was left out: so are the marks on it
    for char in text:
        category = unicodedata.category(char)
        if category[0] == "M":
            if not dropping:
                out.append(char)
            continue
        if char in _INVISIBLE or (category == "Cc" and char not in "\n\t"):
            continue
        for piece in _folded(char, latin):
            keeping = scripts_keeping(piece)
            dropping = keeping is not None and not keeping & scripts
            if not dropping:
                out.append(piece)
    return "".join(out)


def clean_text(text: str, scripts: frozenset[Script]) -> str:
    """``text`` in NFC, ligatures spelt out, odd spaces and fullwidth forms folded (for Latin), with no control characters and
    no characters of scripts not in ``scripts``; the runs of spaces a dropped character leaves are closed up."""
    if Script.LATIN in scripts and text.isascii() and text.isprintable():
        # Most of a text layer's words: printable ASCII is NFC, holds no ligature, odd space or control character, and is
        # all Latin or common: nothing to drop or fold (the fast path is a third of a text-layer page's time otherwise).
        return _SPACES.sub(" ", text).strip(" ")
    kept = unicodedata.normalize("NFC", _kept(unicodedata.normalize("NFC", text), scripts))
    return "\n".join(_SPACES.sub(" ", line).strip(" ") for line in kept.split("\n"))


def clean_words(words: Sequence[Word], scripts: frozenset[Script]) -> list[Word]:
    """Each of ``words`` with its text cleaned as clean_text cleans it; a word with nothing left is left out."""
    cleaned: list[Word] = []
    for word in words:
        text = clean_text(word.text, scripts).replace("\n", " ").strip()
        if text:
            cleaned.append(word if text == word.text else dataclasses.replace(word, text=text))
    return cleaned
