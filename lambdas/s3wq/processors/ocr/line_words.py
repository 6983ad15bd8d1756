"""The words of one OCR'd line, with boxes from its ink, in PDF points: spaced where the ink shows word gaps (word_spacing.py).

A word's box runs across the ink of its characters (the engine's character
boxes are its CTC columns, a few pixels off) and down its line's box, so its
size is its line's height: the detector's box holds ascenders and descenders.
Pixels become points at the page's dpi, from the page's top-left corner
plus ``origin`` (where the rendered region starts on the page).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import replace

import cv2
import numpy as np

from s3wq.processors.ocr.layout.model import Box, Word
from s3wq.processors.ocr.line_reading import OcrLine
from s3wq.processors.ocr.word_spacing import Glyph, respaced, words_of

_INK_BAND = (0.1, 0.9)  # the rows of a line's box whose columns are looked at: its neighbours' strokes stay out
_BLANK_SHARE = 0.04  # a column with no more ink than this share of the band is blank: a speck of noise does not close a gap
_PITCH_HEIGHTS = 0.5  # a line of one character: its width, in line heights


def blank_columns(grey: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    """For each column of ``box`` (from its left edge), whether the line's band holds no ink there."""
    height = box[3] - box[1]
    top, bottom = int(box[1] + _INK_BAND[0] * height), int(np.ceil(box[1] + _INK_BAND[1] * height))
    band = grey[max(0, top) : max(top + 1, bottom), max(0, int(box[0])) : int(np.ceil(box[2])) + 1]
    if band.size == 0:
        return np.zeros(0, dtype=bool)
    ink = ink_of(band)
    if ink is None:
        return np.ones(band.shape[1], dtype=bool)
    return ink.sum(axis=0) <= _BLANK_SHARE * band.shape[0]


def ink_of(grey: np.ndarray) -> np.ndarray | None:
    """Which pixels of ``grey`` are ink: darker than midway between its paper and its ink, after a 3x3 median that takes out
    a scan's grain and specks; None where it has no contrast (blank, or solid)."""
    low, high = np.percentile(grey, (5, 95))
    if high - low < 32:
        return None
    smooth = cv2.medianBlur(np.ascontiguousarray(grey), 3) if min(grey.shape) >= 3 else grey
    return smooth < (low + high) / 2


def _longest_run(blank: np.ndarray) -> int:
    if not blank.any():
        return 0
    padded = np.concatenate(([0], blank.astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(padded))
    return int((edges[1::2] - edges[::2]).max())


def gaps(blank: np.ndarray, left: float, glyphs: Sequence[Glyph]) -> list[float]:
    """The widest blank run between each two neighbouring glyphs' centres, in pixels."""
    xs = [min(len(blank), max(0, round(g.centre - left))) for g in glyphs]
    return [float(_longest_run(blank[a:b])) for a, b in itertools.pairwise(xs)]


def ink_extent(blank: np.ndarray, left: float, start: float, end: float) -> tuple[float, float] | None:
    """The first and last inked columns between ``start`` and ``end`` (page pixels), or None where there is no ink."""
    a, b = max(0, int(start - left)), min(len(blank), int(np.ceil(end - left)))
    inked = np.flatnonzero(~blank[a:b])
    if inked.size == 0:
        return None
    return left + a + float(inked[0]), left + a + float(inked[-1]) + 1.0


def line_words(grey: np.ndarray, line: OcrLine, dpi: float, origin: tuple[float, float]) -> tuple[OcrLine, list[Word]]:
    """``line`` respaced where its ink shows word gaps, and its words in points."""
    blank = blank_columns(grey, line.box)
    left = max(0.0, float(int(line.box[0])))
    groups = words_of(line.text, line.glyphs)
    if len(line.glyphs) >= 2:
        groups = respaced(groups, line.glyphs, gaps(blank, left, line.glyphs), line.height)
    centres = [g.centre for g in line.glyphs]
    pitch = statistics.median(b - a for a, b in itertools.pairwise(centres)) if len(centres) >= 2 else _PITCH_HEIGHTS * line.height
    scale = 72.0 / dpi
    words = []
    for number, group in enumerate(groups):
        start = centres[group[0]] - pitch / 2
        end = centres[group[-1]] + pitch / 2
        if number > 0:
            start = max(start, centres[groups[number - 1][-1]])
        if number + 1 < len(groups):
            end = min(end, centres[groups[number + 1][0]])
        extent = ink_extent(blank, left, max(start, line.box[0]), min(end, line.box[2])) or (start, end)
        top, bottom = line.band(extent[0], extent[1])
        words.append(
            Word(
                text="".join(line.glyphs[i].text for i in group),
                box=Box(
                    origin[0] + extent[0] * scale,
                    origin[1] + top * scale,
                    origin[0] + extent[1] * scale,
                    origin[1] + bottom * scale,
                ),
                size=round(line.height * scale, 2),
                confidence=round(statistics.fmean(line.glyphs[i].confidence for i in group), 4),
            )
        )
    return replace(line, text=" ".join(w.text for w in words)), words
