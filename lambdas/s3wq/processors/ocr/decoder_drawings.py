"""What a PDF page draws besides text: its images' boxes and its ruling lines; part of the decoder process (decoder.py).

Both come from the page's objects (Form XObjects opened, their matrices
applied), in points on the displayed page. A ruling line is a thin, long
path (a table's border drawn as a line, or as a filled thin rectangle), or
an axis-aligned edge of a stroked path of a few segments (a cell drawn with
``re S``). A page of a vector map or a chart holds tens of thousands of
paths: at most MAX_OBJECTS are looked at and MAX_RULES kept, so that no
page costs more than a few milliseconds here.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pypdfium2.raw as pdfium_c

if TYPE_CHECKING or __package__:  # imported by the processor (its tests): from the package
    from s3wq.processors.ocr.decoder_words import PageSpace
else:  # the decoder process: from its own folder, none of s3wq's package imported
    from decoder_words import PageSpace

MAX_OBJECTS = 5000
MAX_RULES = 400
# A rule is at most THIN points across and at least LONG points along.
THIN = 3.0
LONG = 8.0
# A stroked path of more segments than this is a drawing (a curve, a glyph outline), not a table's lines.
MAX_SEGMENTS = 40
_FORM_DEPTH = 4
_Matrix = tuple[float, float, float, float, float, float]
_IDENTITY: _Matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


@dataclass
class Drawings:
    """A page's images (with their sizes in pixels) and ruling lines, as (left, top, right, bottom) boxes on the displayed page."""

    images: list[tuple[float, float, float, float]] = field(default_factory=list)
    image_pixels: list[tuple[int, int]] = field(default_factory=list)
    rules: list[tuple[float, float, float, float]] = field(default_factory=list)


def _times(m: _Matrix, n: _Matrix) -> _Matrix:
    """``m`` then ``n`` (PDF's row-vector order)."""
    a, b, c, d, e, f = m
    p, q, r, s, t, u = n
    return (a * p + b * r, a * q + b * s, c * p + d * r, c * q + d * s, e * p + f * r + t, e * q + f * s + u)


def _apply(m: _Matrix, x: float, y: float) -> tuple[float, float]:
    return m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5]


def _matrix_of(obj: Any) -> _Matrix:
    matrix = pdfium_c.FS_MATRIX()
    if not pdfium_c.FPDFPageObj_GetMatrix(obj, matrix):
        return _IDENTITY
    return (matrix.a, matrix.b, matrix.c, matrix.d, matrix.e, matrix.f)


def _bounds(obj: Any, outer: _Matrix) -> tuple[float, float, float, float] | None:
    """``obj``'s bounds in page space (PDF): those pdfium gives, in its container's space, turned by ``outer``."""
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    if not pdfium_c.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
        return None
    if outer == _IDENTITY:
        return left.value, bottom.value, right.value, top.value
    corners = [_apply(outer, x, y) for x in (left.value, right.value) for y in (bottom.value, top.value)]
    xs, ys = [x for x, _ in corners], [y for _, y in corners]
    return min(xs), min(ys), max(xs), max(ys)


class _Collector:
    def __init__(self, space: PageSpace):
        self.space = space
        self.drawings = Drawings()
        self.seen = 0

    def walk(self, objects: list[Any], outer: _Matrix, depth: int) -> None:
        for obj in objects:
            if self.seen >= MAX_OBJECTS:
                return
            self.seen += 1
            kind = pdfium_c.FPDFPageObj_GetType(obj)
            if kind == pdfium_c.FPDF_PAGEOBJ_IMAGE:
                self._image(obj, outer)
            elif kind == pdfium_c.FPDF_PAGEOBJ_PATH and len(self.drawings.rules) < MAX_RULES:
                self._path(obj, outer)
            elif kind == pdfium_c.FPDF_PAGEOBJ_FORM and depth < _FORM_DEPTH:
                inner = [pdfium_c.FPDFFormObj_GetObject(obj, i) for i in range(max(0, pdfium_c.FPDFFormObj_CountObjects(obj)))]
                self.walk(inner, _times(_matrix_of(obj), outer), depth + 1)

    def _image(self, obj: Any, outer: _Matrix) -> None:
        bounds = _bounds(obj, outer)
        if bounds is None:
            return
        width, height = ctypes.c_uint(), ctypes.c_uint()
        pdfium_c.FPDFImageObj_GetImagePixelSize(obj, width, height)
        self.drawings.images.append(self.space.box(*bounds))
        self.drawings.image_pixels.append((width.value, height.value))

    def _path(self, obj: Any, outer: _Matrix) -> None:
        bounds = _bounds(obj, outer)
        if bounds is None:
            return
        left, bottom, right, top = bounds
        if min(right - left, top - bottom) <= THIN and max(right - left, top - bottom) >= LONG:
            self._rule(self.space.box(left, bottom, right, top))
            return
        fill, stroke = ctypes.c_int(), ctypes.c_int()
        segments = pdfium_c.FPDFPath_CountSegments(obj)
        if not pdfium_c.FPDFPath_GetDrawMode(obj, fill, stroke) or not stroke.value or not 0 < segments <= MAX_SEGMENTS:
            return
        width = ctypes.c_float()
        half = (width.value if pdfium_c.FPDFPageObj_GetStrokeWidth(obj, width) else 1.0) / 2
        self._edges(obj, segments, _times(_matrix_of(obj), outer), half)

    def _edges(self, obj: Any, segments: int, matrix: _Matrix, half: float) -> None:
        """The axis-aligned straight segments of a stroked path, each a rule ``half`` its line's width either side."""
        x, y = ctypes.c_float(), ctypes.c_float()
        previous = start = None
        for index in range(segments):
            segment = pdfium_c.FPDFPath_GetPathSegment(obj, index)
            pdfium_c.FPDFPathSegment_GetPoint(segment, x, y)
            point = _apply(matrix, x.value, y.value)
            kind = pdfium_c.FPDFPathSegment_GetType(segment)
            if kind == pdfium_c.FPDF_SEGMENT_MOVETO:
                previous = start = point
                continue
            if kind == pdfium_c.FPDF_SEGMENT_LINETO and previous is not None:
                self._segment(previous, point, half)
            if pdfium_c.FPDFPathSegment_GetClose(segment) and start is not None:
                self._segment(point, start, half)
            previous = point

    def _segment(self, a: tuple[float, float], b: tuple[float, float], half: float) -> None:
        (x0, y0), (x1, y1) = a, b
        if (abs(y1 - y0) <= THIN and abs(x1 - x0) >= LONG) or (abs(x1 - x0) <= THIN and abs(y1 - y0) >= LONG):
            self._rule(self.space.box(min(x0, x1) - half, min(y0, y1) - half, max(x0, x1) + half, max(y0, y1) + half))

    def _rule(self, box: tuple[float, float, float, float]) -> None:
        if len(self.drawings.rules) < MAX_RULES:
            self.drawings.rules.append(box)


def page_drawings(page: Any, space: PageSpace) -> Drawings:
    """The images and ruling lines of ``page`` (a raw FPDF_PAGE) seen through ``space``."""
    collector = _Collector(space)
    count = max(0, pdfium_c.FPDFPage_CountObjects(page))
    collector.walk([pdfium_c.FPDFPage_GetObject(page, i) for i in range(min(count, MAX_OBJECTS))], _IDENTITY, 0)
    return collector.drawings
