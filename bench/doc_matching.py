"""Fuzzy finding of a passage in a system's output, as document-OCR benchmarks judge it.

The output and the passage are normalised first (Markdown emphasis and
``<br>`` dropped, whitespace folded, NFC, typographic quotes and dashes made
ASCII), so a system is judged on what it read, not on its formatting. A
passage is found where some stretch of the output is within ``allowance``
edits (insertions, deletions, substitutions) of it: one edit in twenty
characters, so a long passage survives a stray OCR slip and a short one
must be exact. The search is Myers' bit-parallel approximate matching
(J. ACM 46(3), 1999), one pass over the output per passage.
"""

from __future__ import annotations

import re
import unicodedata

from ocr_scoring import levenshtein

CHARS_PER_EDIT = 20
_TYPOGRAPHY = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2212": "-",
    }
)
_EMPHASIS = (
    re.compile(r"\*\*(.+?)\*\*"),
    re.compile(r"__(.+?)__"),
    re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"),
    re.compile(r"(?<![\w_])_(?!\s)(.+?)(?<!\s)_(?![\w_])"),
)
_TAGS = re.compile(r"</?(?:b|i|strong|em)>", re.IGNORECASE)
_BREAKS = re.compile(r"<br\s*/?>", re.IGNORECASE)


def normalized(text: str) -> str:
    text = _TAGS.sub("", _BREAKS.sub(" ", text))
    for pattern in _EMPHASIS:
        text = pattern.sub(r"\1", text)
    text = unicodedata.normalize("NFC", " ".join(text.split()))
    return text.translate(_TYPOGRAPHY)


def allowance(passage: str) -> int:
    """The edits a passage of this length may differ by and still be found."""
    return len(passage) // CHARS_PER_EDIT


def match_ends(pattern: str, text: str, edits: int) -> list[int]:
    """The positions in ``text`` just after each stretch within ``edits`` edits of ``pattern``: Myers' algorithm, the pattern as bits."""
    length = len(pattern)
    if length == 0:
        return list(range(len(text) + 1))
    mask, high = (1 << length) - 1, 1 << (length - 1)
    peq: dict[str, int] = {}
    for bit, char in enumerate(pattern):
        peq[char] = peq.get(char, 0) | (1 << bit)
    positive, negative, score = mask, 0, length
    ends = []
    for position, char in enumerate(text, start=1):
        equal = peq.get(char, 0)
        vertical = equal | negative
        horizontal = (((equal & positive) + positive) ^ positive) | equal
        up = negative | (~(horizontal | positive) & mask)
        down = positive & horizontal
        if up & high:
            score += 1
        elif down & high:
            score -= 1
        # Shifted in with 0, not 1: a match may start anywhere in the text (the top row of the table is all zeros).
        up, down = (up << 1) & mask, (down << 1) & mask
        positive = down | (~(vertical | up) & mask)
        negative = up & vertical
        if score <= edits:
            ends.append(position)
    return ends


def match_starts(pattern: str, text: str, edits: int) -> list[int]:
    """Where in ``text`` each stretch within ``edits`` of ``pattern`` starts (the ends of a search of both reversed)."""
    return sorted(len(text) - end for end in match_ends(pattern[::-1], text[::-1], edits))


def found(passage: str, output: str, *, case_sensitive: bool = True) -> bool:
    """Whether ``passage`` is in ``output`` within its allowance, both normalised."""
    passage, output = normalized(passage), normalized(output)
    if not case_sensitive:
        passage, output = passage.lower(), output.lower()
    return bool(passage) and bool(match_ends(passage, output, allowance(passage)))


def in_order(before: str, after: str, output: str) -> bool:
    """Whether ``before`` is found starting before some place ``after`` is found."""
    output = normalized(output)
    before, after = normalized(before), normalized(after)
    befores = match_starts(before, output, allowance(before))
    afters = match_starts(after, output, allowance(after))
    return bool(befores and afters) and befores[0] < afters[-1]


def same_cell(expected: str, cell: str) -> bool:
    """A table cell reads ``expected``: the whole cell within the allowance, not a stretch of it."""
    expected, cell = normalized(expected), normalized(cell)
    return levenshtein(expected, cell) <= allowance(expected)
