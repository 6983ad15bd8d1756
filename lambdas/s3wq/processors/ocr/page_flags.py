"""Flags for a page the engine read poorly: low confidence, and suspected handwriting (low confidence with an uneven hand).

Print stands on one baseline at one height: the ink of each letter without
a descender ends on the same row, and each x-height letter starts on the
same row, to a pixel. A hand does not: its letters rise and fall, grow and
shrink. So the unevenness of a line is the spread (median absolute deviation)
of those rows over its letters, in line heights, and the page's is the median
over its lines. A noisy or faded print page has a low confidence but an even
hand; a page of handwriting has both. The thresholds are measured on drawn
pages (tests/ocr/test_ocr_engine_words.py): clean print reads at ~0.99 mean
confidence with an unevenness of ~0.01, noisy and faded print at 0.95 or so,
a jittered hand below 0.9 with an unevenness several times print's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from s3wq.processors.ocr.line_reading import OcrLine

LOW_CONFIDENCE = 0.9  # a page's mean line score below this is flagged
HANDWRITING_CONFIDENCE = 0.93  # handwriting is suspected below this mean score ...
HANDWRITING_UNEVENNESS = 0.035  # ... with letters this uneven, in line heights
_ON_BASELINE = frozenset("abcdefhiklmnorstuvwxzABCDEFGHIJKLMNOPRSTUVWXYZ0123456789")
_X_HEIGHT = frozenset("acemnorsuvwxz")
_MIN_LETTERS = 4  # a line with fewer measured letters says nothing of its hand
_SLOT = 0.3  # a glyph's columns: this share of the pitch either side of its centre


@dataclass(frozen=True)
class PageFlags:
    """What a page's reading warns of: its mean confidence (None: nothing read), and the two flags."""

    confidence: float | None
    unevenness: float | None
    low_confidence: bool
    handwriting: bool


def _rows(ink: np.ndarray, columns: slice) -> tuple[int, int] | None:
    """The first and last inked rows of ``ink`` in ``columns``."""
    rows = np.flatnonzero(ink[:, columns].any(axis=1))
    return (int(rows[0]), int(rows[-1])) if rows.size else None


def line_unevenness(grey: np.ndarray, line: OcrLine) -> float | None:
    """How unevenly ``line``'s letters stand: the spread of their baselines and x-heights, in line heights (None: too few letters)."""
    left, top, right, bottom = (int(v) for v in line.box)
    crop = grey[max(0, top) : bottom + 1, max(0, left) : right + 1]
    if crop.size == 0 or len(line.glyphs) < 2:
        return None
    low, high = np.percentile(crop, (5, 95))
    if high - low < 32:
        return None
    ink = crop < (low + high) / 2
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
