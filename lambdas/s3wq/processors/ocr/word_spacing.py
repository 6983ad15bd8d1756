"""Word spacing from the ink: where the engine put a space inside a word ("m ajor") or none between two ("Apriltimber").

RapidOCR's recogniser decides each space from the pixels around it, and at
the margin it goes either way: a letter followed by a little more white than
usual becomes a word of its own, and a tight word gap disappears. Its
per-character boxes do not show the gaps (they are its CTC columns, spread
evenly: inside "confirmed" they left a wider gap than between two words), so
the gaps are measured in the page's pixels instead: the widest run of blank
columns between two characters' centres. Each line is its own measure: its
gaps inside words (the letter gap) and at its spaces (the word gap). A gap
inside a word as wide as a word gap is split; the engine's spaces stand,
unless one left a lone letter at a gap nearer the letter gap ("becam e":
joined), and a run of two words of three letters or more ("barrelstreasurer")
is split at its widest gap when that gap stands out. The engine is right far
more often than not: where the ink is unclear (a blurred, grainy scan), its
reading stands.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Where a gap lies between the line's letter gap (0) and its word gap (1).
_CLEAR_WORD = 0.75  # at or above: two words
_LONE_JOIN = 0.7  # below, a lone letter the engine set apart joins its neighbour
_RUN_SPLIT = 0.4  # at or above, a word's widest gap parts it into two of _MIN_PART letters or more ...
_STANDS_OUT = 2.0  # ... when it is this many times as wide as the word's next widest gap
_MIN_PART = 3
_MIN_SPLIT_HEIGHTS = 0.1  # and a word gap is at least this share of the line's height: grain does not part a word
# A line with fewer spaces than this gives no word gap of its own: a share of its height stands in.
_MIN_SPACES = 2
_WORD_GAP_HEIGHTS = 0.33


@dataclass(frozen=True, slots=True)
class Glyph:
    """One character the engine read, with its confidence and where its centre lies across the page (pixels)."""

    text: str
    confidence: float
    centre: float


def words_of(text: str, glyphs: Sequence[Glyph]) -> list[list[int]]:
    """The engine's words: the indices of ``glyphs`` (its text's characters other than spaces, in order) each word holds."""
    words: list[list[int]] = [[]]
    index = 0
    for char in text:
        if char.isspace():
            if words[-1]:
                words.append([])
        elif index < len(glyphs):
            words[-1].append(index)
            index += 1
    return [word for word in words if word]


def _letters(glyphs: Sequence[Glyph], indices: Sequence[int]) -> bool:
    return all(glyphs[i].text.isalpha() for i in indices)


def respaced(words: list[list[int]], glyphs: Sequence[Glyph], gaps: Sequence[float], height: float) -> list[list[int]]:
    """``words`` with spaces moved where the ink shows them: ``gaps[k]`` is the blank width between glyph k and k + 1."""
    starts = {word[0] for word in words[1:]}
    spaces = [gaps[k - 1] for k in starts]
    inside = [gaps[k - 1] for k in range(1, len(glyphs)) if k not in starts]
    letter_gap = statistics.median(inside) if inside else 0.0
    word_gap = statistics.median(spaces) if len(spaces) >= _MIN_SPACES else _WORD_GAP_HEIGHTS * height
    if word_gap - letter_gap < 1.0:
        return words  # no two kinds of gap to tell apart
    zone = [
        (gap - letter_gap) / (word_gap - letter_gap) if gap >= _MIN_SPLIT_HEIGHTS * height else min(0.0, gap - letter_gap) for gap in gaps
    ]
    # A space is narrower than the line's word gap only where the line has word gaps of its own beside it.
    joined = _joined(words, glyphs, zone) if len(spaces) > _MIN_SPACES else words
    return _split_runs(joined, glyphs, zone)


def _joined(words: list[list[int]], glyphs: Sequence[Glyph], zone: Sequence[float]) -> list[list[int]]:
    """Words the engine parted at a letter gap joined again: "m ajor", "becam e"."""
    out = [list(words[0])]
    for word in words[1:]:
        before, at = out[-1], zone[word[0] - 1]
        into_word = glyphs[word[0]].text.islower() and _letters(glyphs, before + word)
        if into_word and (len(before) == 1 or len(word) == 1) and at < _LONE_JOIN:
            before.extend(word)
        else:
            out.append(list(word))
    return out


def _split_runs(words: list[list[int]], glyphs: Sequence[Glyph], zone: Sequence[float]) -> list[list[int]]:
    """Words parted where a word gap runs through them: at every clear one, and a run of two words at its widest gap."""
    out: list[list[int]] = []
    for word in words:
        cuts = [k for k in word[1:] if zone[k - 1] >= _CLEAR_WORD and glyphs[k - 1].text.isalnum() and glyphs[k].text.isalnum()]
        if not cuts and len(word) >= 2 * _MIN_PART and _letters(glyphs, word):
            widest = max(word[_MIN_PART : -_MIN_PART + 1] or [word[0]], key=lambda k: zone[k - 1])
            if widest != word[0] and zone[widest - 1] >= _RUN_SPLIT:
                cuts = [widest]
        start = 0
        for cut in cuts:
            position = word.index(cut)
            out.append(word[start:position])
            start = position
        out.append(word[start:])
    return [word for word in out if word]


def _widest_cut(word: list[int], zone: Sequence[float]) -> list[int]:
    """Where a run of two words parts, at a gap that stands out of the word's others; none where no gap does."""
    ranked = sorted(word[1:], key=lambda k: zone[k - 1], reverse=True)
    widest, runner_up = ranked[0], ranked[1]
    position = word.index(widest)
    parts_long_enough = _MIN_PART <= position <= len(word) - _MIN_PART
    stands_out = zone[widest - 1] >= _RUN_SPLIT and zone[widest - 1] >= _STANDS_OUT * max(0.0, zone[runner_up - 1])
    return [widest] if parts_long_enough and stands_out else []
