"""Equations: lines of mathematics that plain text cannot carry, flagged for a model to read.

A line of set mathematics is told from prose that mentions it by what it
is made of: relations and operators (=, ±, ∑, ∫, √), Greek and mathematical
letters, many one-character tokens, sub- and superscripts (words set smaller
than the line, or off its baseline), an equation number such as "(3)" at its
right; and few words of prose. Each sign adds to a score; each word of prose
("where", "value", "the") takes one away.
"""

from __future__ import annotations

import re
import statistics

from s3wq.processors.ocr.layout.model import Line

# The signs are mathematics' own: look-alikes of letters and of ASCII marks (the minus, the times sign) on purpose.
RELATIONS = frozenset("=≠≈≡≤≥<>∝∼≃≅→←↔⇒⇔↦∈∉⊂⊃⊆⊇")  # noqa: RUF001
OPERATORS = frozenset("+−±∓×÷·∘∗/^_|‖⟨⟩∪∩∧∨¬∀∃′″∞")  # noqa: RUF001
LARGE_OPERATORS = frozenset("∑∏∐∫∬∭∮√∂∇")
FUNCTIONS = frozenset({"sin", "cos", "tan", "cot", "log", "ln", "exp", "lim", "max", "min", "sup", "inf", "det", "arg", "mod", "dim"})
EQUATION_NUMBER = re.compile(r"^\(\d{1,3}(?:\.\d{1,3})?[a-z]?\)$")
PROSE_LETTERS = 3  # a token of this many letters and nothing else is a word of prose, unless a function's name
SCRIPT_SIZE = 0.8  # a word this much smaller than its line is a sub- or superscript
SCRIPT_SHIFT = 0.25  # ... and so is one whose middle is this many of the line's size off the line's
DENSE = 0.2  # a line whose characters are this share of mathematical signs is dense with them
SINGLES = 0.4  # a line whose tokens are this share of one character long
IS_EQUATION = 3  # the score at which a line is an equation


def is_equation(line: Line) -> bool:
    """Whether ``line`` is set mathematics rather than prose."""
    characters = [c for c in line.text if not c.isspace()]
    tokens = line.text.split()
    if len(characters) < 3 or not tokens:
        return False
    relation = any(c in RELATIONS for c in characters)
    large = any(c in LARGE_OPERATORS for c in characters)
    numbered = bool(EQUATION_NUMBER.match(tokens[-1])) and len(tokens) > 1
    if not (relation or large or numbered):
        return False
    signs = sum(1 for c in characters if c in RELATIONS or c in OPERATORS or c in LARGE_OPERATORS or _mathematical_letter(c))
    score = (
        relation
        + 2 * large
        + 2 * numbered
        + any(_mathematical_letter(c) for c in characters)
        + (signs >= DENSE * len(characters))
        + (len(tokens) >= 3 and sum(len(t) == 1 for t in tokens) >= SINGLES * len(tokens))
        + (_scripts(line) > 0)
    )
    return score - _prose_words(tokens) >= IS_EQUATION


def _mathematical_letter(c: str) -> bool:
    """A Greek letter, or one of Unicode's mathematical alphanumerics (italic, double-struck letters)."""
    code = ord(c)
    return 0x391 <= code <= 0x3C9 or 0x1D400 <= code <= 0x1D7FF or c in "ℝℕℤℚℂℓ∅"  # noqa: RUF001


def _prose_words(tokens: list[str]) -> int:
    words = (token.strip(".,;:!?()[]\"'") for token in tokens)
    return sum(
        1 for w in words if len(w) >= PROSE_LETTERS and w.isalpha() and w.lower() not in FUNCTIONS and not any(map(_mathematical_letter, w))
    )


def _scripts(line: Line) -> int:
    """The words set as sub- or superscripts: smaller than the line's size, or off its middle."""
    if len(line.words) < 2:
        return 0
    size = line.size
    middle = statistics.median(w.box.middle for w in line.words)
    return sum(1 for w in line.words if w.size <= SCRIPT_SIZE * size or abs(w.box.middle - middle) > SCRIPT_SHIFT * size)
