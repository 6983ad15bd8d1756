"""How much of a text reads as words rather than OCR garbage: a score from token shapes, for any language in Latin, Greek or Cyrillic.

An earlier OCR layer in an old book ("..LCV WI.GL,41.44-gta*Air.") and a
line the engine misread ("wiis s s s rs s oas") differ from text in the
shapes of their tokens, whatever the language: real words are letters with
a mix of vowels, in one of a few case patterns (lower, Capitalised, UPPER),
with punctuation at their edges; numbers, dates, amounts and codes have
shapes of their own. Garbage mixes letters, digits and symbols inside a
token, runs many consonants or one letter together, scatters letters alone,
and holds a large share of symbols. Each token is scored from 0 to 1 and the
text is their mean weighted by length, lowered for a run of lone letters and
for a text mostly made of symbols. No dictionary: a language nobody listed
scores as well as English.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Sequence

# The vowels of Latin, Greek and Cyrillic text, by base letter (diacritics removed first).
_VOWELS = frozenset("aeiouyæœøåə\u03b1εη\u03b9\u03bf\u03c5ω\u0430\u0435ёи\u043e\u0443ыэюя\u0456їєў")
_EDGE_LEADING = "\"'([{«\u2039“\u2018„¿¡*"
_EDGE_TRAILING = "\"')]}»\u203a”\u2019.,;:!?…*"
# Apostrophes and hyphens inside words: "don't", "l'homme", "well-known"; a period inside abbreviations ("e.g", "U.S").
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019\-.][^\W\d_]+)*", re.UNICODE)
_NUMBER = re.compile(
    r"[+\-\u2212±]?[$€£¥₽§#№]?\(?\d+(?:[.,:/\-\u2013]\d+)*\)?(?:%|‰|°[CF]?|[$€£¥₽]|[^\W\d_]{1,3}\.?)?"
    r"|\d+[a-z]?(?:\([a-z\d]{1,4}\))+|\.\d+",  # 1,482 12.5% 2024-01-05 10:30 §4 $1,200 3rd 12kg 1er (3); section 4(b)(ii)
    re.UNICODE,
)
_CODE = re.compile(r"[A-Z]{1,5}[\-/]?\d+[A-Za-z]?|\d+[\-/]?[A-Z]{1,3}", re.UNICODE)  # A4, COVID-19, B12, 4K
_LINK = re.compile(r"(?:https?://|www\.)\S+|[\w.+\-]+@[\w\-]+\.[\w.\-]+", re.UNICODE)
# A dash, a bullet, an ampersand standing alone: text's own.
_LONE_MARKS = frozenset("-\u2013—•·/&+=<>±\u00d7÷→|§¶†‡*…%$€£#") | {"...", "--"}
# What comes before or after an apostrophe inside a word in the listed languages: l'homme, dell'arte, qu'il, don't, we'll, O'Brien.
_ELISIONS = frozenset("l d j n s m t c o qu dell nell all sull un".split())
_CONTRACTIONS = frozenset("s t ll re ve d m n em".split())
# Sounds spelt with two or three consonant letters, counted as one in a consonant run: "Geschichtsschreibung".
_DIGRAPHS = re.compile(r"sch|ch|th|ph|sh|ck|gh|sz|cz|rz|dz")
_MAX_CONSONANTS = 5  # beyond this many consonant sounds in a row a token is rarely a word
_LONE_LETTER_RUN = 3  # "s s s": three lone letters (or one token thrice) in a row; initials ("J. R. R.") are not lone
_JUNK_SHARE = 0.3  # lone letters and lone punctuation beyond this share of the tokens: "ii. i ' . i , '"
# Below this many letters and digits a text tells little: a page number, "§", "—": scored on what it has, at most this.
_FEW_CHARACTERS = 3
_FEW_SCORE = 0.8


def _base_letters(text: str) -> str:
    """``text`` lower-cased with its diacritics removed: "É" reads as "e" for vowels."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in decomposed if unicodedata.category(c)[0] != "M")


def _case_score(core: str) -> float:
    """1 for lower, Capitalised or UPPER case, and for the camel case of names ("McDonald", "iPhone", "YouTube"); less for "wIGL"."""
    score = 1.0
    for part in re.split(r"['\u2019\-.]", core):
        if len(part) <= 1 or part.islower() or part.isupper() or (part[0].isupper() and part[1:].islower()):
            continue
        if re.fullmatch(r"[A-Z]{2,}s|[a-z]{1,2}[A-Z][a-z]+|[A-Z][a-z]+(?:[A-Z][a-z]*)+", part):
            continue  # PDFs, iPhone, eBay, McDonald, PhD, GmbH, YouTube, LaTeX
        changes = sum(1 for a, b in itertools.pairwise(part) if a.isupper() != b.isupper())
        score = min(score, 0.4 if changes <= 2 else 0.15)
    return score


def _apostrophe_score(core: str) -> float:
    """1 for an elision or a contraction (l'homme, don't, O'Brien), less for an apostrophe inside a misread word (ofl'ice)."""
    parts = re.split(r"['\u2019]", core.lower())
    if len(parts) == 1:
        return 1.0
    if parts[0] in _ELISIONS or all(part in _CONTRACTIONS for part in parts[1:]):
        return 1.0
    return 0.4


def _part_score(part: str) -> float:
    """How much one run of letters (no apostrophe or hyphen in it) looks like a word of some language."""
    letters = _base_letters(part)
    if len(letters) < 2:
        return 1.0
    vowels = sum(1 for c in letters if c in _VOWELS)
    if vowels == 0:
        if part.isupper() and len(letters) <= 5:
            return 1.0  # BBC, NHS, PDF
        if len(letters) == 2:
            return 0.8 if part[0].isupper() else 0.4  # Mr, Dr, St; "rs"
        syllabic = re.search(r"[^rl][rl]", letters) is not None  # an r or l after a consonant: Czech "prst", "vlk", "Strč"
        return 0.6 if len(letters) <= 4 and syllabic else 0.15  # "tnrgh", "lnv"
    if vowels == len(letters) and len(letters) >= 4:
        return 0.3  # "aeiou"
    if re.search(r"(.)\1\1", letters) and not re.fullmatch(r"[ivxlcdm]+", letters):
        return 0.2  # "lll", "jjjj", "iiiii", but not a numeral, "xiii"
    longest = max(len(run) for run in re.split(f"[{''.join(_VOWELS)}]", _DIGRAPHS.sub("C", letters)))
    if longest > _MAX_CONSONANTS:
        return 0.4 if longest == _MAX_CONSONANTS + 1 else 0.15
    return 1.0


def _letters_score(core: str) -> float:
    """How much a token of letters (with inner apostrophes or hyphens) looks like a word of some language."""
    pieces = re.split(r"['\u2019]", core)
    if len(pieces) > 1:  # the elided article and the contraction's tail are no words of their own: l', 'll
        pieces = [p for i, p in enumerate(pieces) if not ((i == 0 and p.lower() in _ELISIONS) or (i > 0 and p.lower() in _CONTRACTIONS))]
    parts = [_part_score(part) for piece in pieces for part in re.split(r"[\-.]", piece)] or [1.0]
    return min(parts) * _case_score(core) * _apostrophe_score(core)


def _stripped(token: str) -> str:
    """``token`` without the punctuation a word carries at its edges: quotes, brackets, a sentence's stop."""
    return token.lstrip(_EDGE_LEADING).rstrip(_EDGE_TRAILING)


@functools.lru_cache(maxsize=1 << 16)  # a page's words repeat (the, of, and): each scored once
def token_score(token: str) -> float:
    """How much one whitespace-separated token reads as a word, a number or a code (1) rather than garbage (0)."""
    if token in _LONE_MARKS:
        return 1.0
    core = _stripped(token)
    if not core:
        return 0.2  # a lone "." or "'" between words, ".,;:'"
    numeric = (core, token.rstrip(".,;:!?"))  # the bracket that closes "4(b)(ii)" is no edge
    if core in _LONE_MARKS or any(_NUMBER.fullmatch(t) or _CODE.fullmatch(t) for t in numeric) or _LINK.fullmatch(core):
        return 1.0
    if _WORD.fullmatch(core):
        return _letters_score(core) * (0.6 if len(core) == 1 else 1.0)  # a lone letter: "a", "I", "y", "и", but also a speck
    if re.fullmatch(r"[^\w\s]{1,3}", core):
        return 0.1  # symbols of their own, of no use in text: "^", ";^", "~-"
    return 0.05  # letters, digits and symbols mixed inside one token: "WI.GL,41.44-gta*Air", "i3^t"


def _is_junk(token: str) -> bool:
    """A lone letter, or lone punctuation or symbols: real text has a few ("a", "I", "&"), garbage many."""
    core = _stripped(token)
    if token in _LONE_MARKS or core in _LONE_MARKS:
        return False
    return not core or (len(core) == 1 and core.isalpha()) or re.fullmatch(r"[^\w\s]+", core) is not None


def _scatter_penalty(tokens: Sequence[str]) -> float:
    """How much of the text is lone letters and lone punctuation: runs of lone letters ("s s s rs s"), and junk beyond its share."""
    # Runs of lone letters, and of one token over and over ("nrn nrn nrn", as a misread row of marks gives it; figures may repeat).
    runs = [list(run) for _, run in itertools.groupby(tokens, key=lambda t: "lone" if len(t) == 1 and t.isalpha() else t)]
    in_runs = sum(len(run) for run in runs if len(run) >= _LONE_LETTER_RUN and not any(c.isdigit() for c in run[0]))
    junk_share = sum(map(_is_junk, tokens)) / len(tokens)
    return min(1.0, in_runs / len(tokens) + 2.0 * max(0.0, junk_share - _JUNK_SHARE))


def plausibility(text: str) -> float:
    """How much of ``text`` reads as real words, numbers and punctuation rather than OCR garbage: 0 to 1 (1 for no text at all)."""
    tokens = text.split()
    if not tokens:
        return 1.0
    weights = [min(len(t), 12) for t in tokens]  # a long token counts more, up to a long word's length
    score = sum(w * token_score(t) for w, t in zip(weights, tokens)) / sum(weights)
    score *= 1.0 - _scatter_penalty(tokens)
    characters = "".join(tokens)
    alphanumeric = sum(1 for c in characters if c.isalnum())
    symbols = len(characters) - alphanumeric
    if symbols > 0.4 * len(characters):
        score *= max(0.0, 1.0 - 2.0 * (symbols / len(characters) - 0.4))  # ".,;:'~-" between the words
    if alphanumeric < _FEW_CHARACTERS:
        score = min(score, _FEW_SCORE)
    return round(max(0.0, min(1.0, score)), 4)
