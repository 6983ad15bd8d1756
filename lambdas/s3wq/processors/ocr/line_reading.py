"""One line of OCR at a time, in the page's pixels: the engine's reading, a second reading of a line that reads as garbage, and its ink.

A whole printed line now and then comes out as garbage on a clean page
("wiis s s s rs s oas"): the recogniser was given the page's crop of a box
whose corners the detector set a little askew. Cropped again, axis-aligned
with some white around it, and read at twice the scale without detection, the
same line reads well; it costs 0.03 to 0.07 s of one core, so it is done only for
lines that read as garbage (plausibility.py) or with a low score, worst first,
and the better reading, by plausibility and score, is kept.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import cv2
import numpy as np

from s3wq.processors.ocr.plausibility import plausibility
from s3wq.processors.ocr.word_spacing import Glyph

# A line is read again when its plausibility or its score is below these.
REREAD_PLAUSIBILITY = 0.6
REREAD_SCORE = 0.8
MAX_REREADS = 6  # a page's worst lines, and within REREAD_SECONDS of one core: a page of garbage costs at most ~0.6 s more
REREAD_SECONDS = 0.5
_REREAD_SCALE = 2.0
_PAD_HEIGHTS = 0.5  # white either side of the crop, in line heights
_BETTER_BY = 0.02  # a second reading replaces the first only when it is better by this much ...
_KEPT_SHARE = 0.5  # ... and holds at least this share of its characters


@dataclass(frozen=True)
class OcrLine:
    """One line the engine read: its text, score, box (left, top, right, bottom, in page pixels), characters, and whether it is a second reading."""

    text: str
    score: float
    box: tuple[float, float, float, float]
    glyphs: tuple[Glyph, ...]
    reread: bool = False
    # The detector's quadrilateral, as its top edge's left end, its slope and the line's thickness across it: on a
    # skewed scan the box around a line is taller than its print by its width times the slope, and a word's box
    # is only its stretch of the line's band.
    top_left: tuple[float, float] = (0.0, 0.0)
    slope: float = 0.0
    thickness: float | None = None

    @property
    def height(self) -> float:
        return self.thickness if self.thickness is not None else self.box[3] - self.box[1]

    def band(self, left: float, right: float) -> tuple[float, float]:
        """The top and bottom of the line's band over ``left`` to ``right`` (page pixels)."""
        if self.thickness is None:
            return self.box[1], self.box[3]
        x, y = self.top_left
        tops = (y + self.slope * (left - x), y + self.slope * (right - x))
        return max(self.box[1], min(tops)), min(self.box[3], max(tops) + self.thickness)

    @property
    def quality(self) -> float:
        return plausibility(self.text) * self.score


def _slant(points: np.ndarray) -> dict[str, Any]:
    """A quadrilateral's top-left corner, top edge's slope and thickness (its order: top-left, top-right, bottom-right, bottom-left)."""
    if points.shape != (4, 2) or points[1, 0] - points[0, 0] <= 0:
        return {}
    slope = float((points[1, 1] - points[0, 1]) / (points[1, 0] - points[0, 0]))
    thickness = float(((points[3, 1] - points[0, 1]) + (points[2, 1] - points[1, 1])) / 2)
    if thickness <= 0:
        return {}
    return {"top_left": (float(points[0, 0]), float(points[0, 1])), "slope": slope, "thickness": thickness}


def _evenly(text: str, box: tuple[float, float, float, float], confidence: float) -> tuple[Glyph, ...]:
    """Glyphs spread evenly across ``box``: for a line whose character boxes do not match its text."""
    chars = [c for c in text if not c.isspace()]
    pitch = (box[2] - box[0]) / max(1, len(text))
    positions = [box[0] + (i + 0.5) * pitch for i, c in enumerate(text) if not c.isspace()]
    return tuple(Glyph(c, confidence, x) for c, x in zip(chars, positions))


def lines_of(result: Any) -> list[OcrLine]:
    """The lines of a RapidOCR result read with ``return_word_box`` and ``return_single_char_box``."""
    if result.boxes is None or result.txts is None:
        return []
    chars_per_line = list(result.word_results or ())
    lines = []
    for index, (quad, text, score) in enumerate(zip(result.boxes, result.txts, result.scores)):
        points = np.asarray(quad, dtype=float)
        box = (float(points[:, 0].min()), float(points[:, 1].min()), float(points[:, 0].max()), float(points[:, 1].max()))
        chars = chars_per_line[index] if index < len(chars_per_line) else ()
        glyphs = tuple(Glyph(str(c), float(s), (float(b[0][0]) + float(b[1][0])) / 2) for c, s, b in chars)
        if [g.text for g in glyphs] != [c for c in text if not c.isspace()]:
            glyphs = _evenly(text, box, float(score))
        lines.append(OcrLine(text=text, score=float(score), box=box, glyphs=glyphs, **_slant(points)))
    return lines


def _crop(grey: np.ndarray, box: tuple[float, float, float, float]) -> tuple[np.ndarray, int, int]:
    """``box`` cut from ``grey`` with white to its sides: the detector's box already reaches past the ink above and below, and
    more height would take in the neighbouring lines' strokes."""
    pad = round(_PAD_HEIGHTS * (box[3] - box[1]))
    left, top = max(0, int(box[0]) - pad), max(0, int(box[1]))
    right, bottom = min(grey.shape[1], int(np.ceil(box[2])) + pad), min(grey.shape[0], int(np.ceil(box[3])))
    return grey[top:bottom, left:right], left, top


def reread(engine: Any, grey: np.ndarray, line: OcrLine) -> OcrLine:
    """``line`` read again from its own crop at twice the scale; the better of the two readings."""
    crop, left, _ = _crop(grey, line.box)
    if crop.size == 0:
        return line
    scaled = cv2.resize(crop, None, fx=_REREAD_SCALE, fy=_REREAD_SCALE, interpolation=cv2.INTER_CUBIC)
    result = engine(scaled, use_det=False, use_cls=False, return_word_box=True)
    if not result.txts or not result.txts[0].strip():
        return line
    text, score = result.txts[0], float(result.scores[0])
    info = result.word_results[0] if result.word_results else None
    glyphs: tuple[Glyph, ...] = ()
    if info is not None and info.line_txt_len:
        column = scaled.shape[1] / info.line_txt_len / _REREAD_SCALE  # one CTC column, in page pixels
        cols = [col for word in info.word_cols for col in word]
        chars = [c for word in info.words for c in word]
        confs = list(info.confs) if len(info.confs) == len(chars) else [score] * len(chars)
        glyphs = tuple(Glyph(c, float(p), left + (col + 0.5) * column) for c, p, col in zip(chars, confs, cols))
    if [g.text for g in glyphs] != [c for c in text if not c.isspace()]:
        glyphs = _evenly(text, line.box, score)
    second = replace(line, text=text, score=score, glyphs=glyphs, reread=True)
    # A few characters can read as plausible where the line held many ("0em" for "Dear Mr Whitfield,"): not a better reading.
    keeps_the_line = len(second.glyphs) >= _KEPT_SHARE * len(line.glyphs)
    return second if keeps_the_line and second.quality > line.quality + _BETTER_BY else line


def needs_reread(line: OcrLine) -> bool:
    return line.score < REREAD_SCORE or plausibility(line.text) < REREAD_PLAUSIBILITY


def reread_worst(engine: Any, grey: np.ndarray, lines: Sequence[OcrLine]) -> list[OcrLine]:
    """``lines`` with the worst of those that read as garbage read again: at most MAX_REREADS, begun within REREAD_SECONDS."""
    worst = sorted((i for i, line in enumerate(lines) if needs_reread(line)), key=lambda i: lines[i].quality)[:MAX_REREADS]
    out = list(lines)
    started = time.process_time()
    for i in worst:
        if time.process_time() - started > REREAD_SECONDS:
            break
        try:
            out[i] = reread(engine, grey, lines[i])
        except (cv2.error, ValueError, IndexError):  # what the engine raises on a crop it cannot read: the first reading stands
            continue
    return out
