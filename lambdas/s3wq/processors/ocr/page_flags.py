"""Flags for a page the engine read poorly: low confidence, and suspected handwriting (low confidence with an uneven hand).

Print stands on one baseline at one height: the ink of each letter without
a descender ends on the same row, and each x-height letter starts on the
same row, to a pixel. A hand does not: its letters rise and fall, grow and
shrink. So the unevenness of a line is the spread (median absolute deviation)
of those rows over its letters, in line heights, and the page's is the median
over its lines. A noisy or faded print page has a low confidence but an even
hand; a page of handwriting has both. The thresholds are measured on drawn
pages (tests/ocr/engine_pages.py), a letter page at 200 dpi: clean print and
grainy, faded print read at 0.97 to 0.99 mean confidence with an unevenness of
0.0; a fax of a photocopy at half the dpi at 0.78 to 0.80 (its text garbled)
with 0.04; a jittered hand at 0.89 to 0.93 with 0.10 to 0.12.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from s3wq.processors.ocr.line_reading import OcrLine
from s3wq.processors.ocr.line_words import ink_of

LOW_CONFIDENCE = 0.9  # a page's mean line score below this is flagged
HANDWRITING_CONFIDENCE = 0.95  # handwriting is suspected below this mean score ...
HANDWRITING_UNEVENNESS = 0.065  # ... with letters more uneven than this, in line heights
_ON_BASELINE = frozenset("abcdefhiklmnorstuvwxzABCDEFGHIJKLMNOPRSTUVWXYZ0123456789")
_X_HEIGHT = frozenset("acemnorsuvwxz")
_MIN_LETTERS = 4  # a line with fewer measured letters says nothing of its hand
_SLOT = 0.3  # a glyph's columns: this share of the pitch either side of its centre
_STROKE_SHARE = 0.25


@dataclass(frozen=True)
class PageFlags:
    """What a page's reading warns of: its mean confidence (None: nothing read), and the two flags."""

    confidence: float | None
    unevenness: float | None
    low_confidence: bool
    handwriting: bool


def _rows(ink: np.ndarray, columns: slice) -> tuple[int, int] | None:
    """The first and last rows of ``ink`` in ``columns`` that carry a stroke: a quarter of the most any row carries, so that a
    speck above or below a letter is not its top or its foot."""
    profile = ink[:, columns].sum(axis=1)
    if not profile.any():
        return None
    rows = np.flatnonzero(profile >= max(2, _STROKE_SHARE * profile.max()))
    return (int(rows[0]), int(rows[-1])) if rows.size else None


def line_unevenness(grey: np.ndarray, line: OcrLine) -> float | None:
    """How unevenly ``line``'s letters stand: the spread of their baselines and x-heights, in line heights (None: too few letters)."""
    left, top, right, bottom = (int(v) for v in line.box)
    crop = grey[max(0, top) : bottom + 1, max(0, left) : right + 1]
    if crop.size == 0 or len(line.glyphs) < 2:
        return None
    ink = ink_of(crop)
    if ink is None:
        return None
    pitch = statistics.median(b.centre - a.centre for a, b in zip(line.glyphs, line.glyphs[1:]))
    half = max(1, round(_SLOT * pitch))
    bases, tops = [], []
    for glyph in line.glyphs:
        if glyph.text not in _ON_BASELINE:
            continue
        x = round(glyph.centre) - max(0, left)
        rows = _rows(ink, slice(max(0, x - half), x + half + 1))
        if rows is None:
            continue
        bases.append(rows[1])
        if glyph.text in _X_HEIGHT:
            tops.append(rows[0])
    if len(bases) < _MIN_LETTERS:
        return None
    spread = _mad(bases) + (_mad(tops) if len(tops) >= _MIN_LETTERS else 0.0)
    return spread / max(1.0, line.height)


def _mad(values: Sequence[int]) -> float:
    middle = statistics.median(values)
    return float(statistics.median(abs(v - middle) for v in values))


def page_flags(grey: np.ndarray, lines: Sequence[OcrLine]) -> PageFlags:
    """The flags of a page read as ``lines``, from their scores and how evenly their letters stand on ``grey``."""
    if not lines:
        return PageFlags(confidence=None, unevenness=None, low_confidence=False, handwriting=False)
    confidence = round(statistics.fmean(line.score for line in lines), 4)
    measured = [u for u in (line_unevenness(grey, line) for line in lines) if u is not None]
    unevenness = round(statistics.median(measured), 4) if measured else None
    return PageFlags(
        confidence=confidence,
        unevenness=unevenness,
        low_confidence=confidence < LOW_CONFIDENCE,
        handwriting=confidence < HANDWRITING_CONFIDENCE and unevenness is not None and unevenness > HANDWRITING_UNEVENNESS,
    )
