"""What the decoder process's parts share (decoder.py, decoder_pdf.py): its bounds, its two refusals, and the reply of pixels.

Like the rest of the decoder it imports nothing of s3wq (decoder.py says why).
"""

from __future__ import annotations

import math
from typing import Any

from PIL import Image

MB = 1 << 20
POINTS_PER_INCH = 72
# A PNG or TIFF frame is decoded whole before it is shrunk to the pixel cap, as pdfium decodes a
# page's image whole, so a frame (or a page's image) may be at most this many times the cap:
# 80 Mpx at the default (an A4 page at 600 dpi is 70). What decoding it takes in bytes is
# checked too, against the memory cap (decoder.decode_bytes).
DECODE_FACTOR = 5
# A page on which no pixel differs from the lightest by more than this (of 255 grey levels)
# holds no print: it is not OCR'd. A blank page otherwise costs a full OCR (~1.3 s each, as
# a 100,000-page PDF of them showed); paper texture or a speck makes a larger spread, and
# such a page is OCR'd as any other.
BLANK_SPREAD = 16

Reply = tuple[dict[str, Any], bytes]


class Unreadable(Exception):
    """The input, or one of its pages, cannot be read: the message says why."""


class Refused(Exception):
    """A page past a bound, judged from its header before it is decoded: the facts the processor words."""

    def __init__(self, **facts: Any):
        super().__init__(facts)
        self.facts = facts


def capped_size(width: int, height: int, max_pixels: int) -> tuple[int, int]:
    """``width`` x ``height`` scaled down, ratio kept, to at most ``max_pixels``; unchanged when it fits."""
    if width * height <= max_pixels:
        return width, height
    factor = math.sqrt(max_pixels / (width * height))
    return max(1, math.floor(width * factor)), max(1, math.floor(height * factor))


def longest_side_scale(width: float, height: float, longest_side: int) -> float:
    """The scale (pixels a point, or a pixel) at which the longer of ``width`` and ``height`` is ``longest_side`` pixels.

    olmocr renders a page with ``pdftoppm -r longest_side*72/longest``, which
    poppler divides by 72 again: the same arithmetic here, so that the other
    side comes out as poppler's does. pdftoppm and pdfium both round a side up,
    so where the product is a float's step past ``longest_side`` the scale is
    stepped down until the longest side is ``longest_side``, not one more.
    """
    longest = max(width, height)
    if not longest > 0 or longest_side < 1:
        raise ValueError(f"no scale makes a {width} x {height} page {longest_side} pixels long")
    scale = longest_side * POINTS_PER_INCH / longest / POINTS_PER_INCH
    while math.ceil(longest * scale) > longest_side:
        scale = math.nextafter(scale, 0.0)
    return scale


def capped_scale(width: float, height: float, scale: float, max_pixels: int) -> float:
    """``scale`` (pixels a point), or less so that a page of ``width`` x ``height`` points renders to at most ``max_pixels``."""
    pixels = (width * scale) * (height * scale)
    return scale if pixels <= max_pixels else scale * math.sqrt(max_pixels / pixels)


def pixels_reply(number: int, image: Image.Image, dpi: float | None, origin: tuple[float, float] = (0.0, 0.0)) -> Reply:
    """The reply for a decoded page (or a crop of one, from ``origin`` in points): blank (no print, not worth an OCR), or
    its 8-bit grey or RGB pixels.

    ``dpi`` goes out rounded, as records show it, and exact as ``scale`` (pixels a point), by which an OCR box in
    pixels maps back to the page's points.
    """
    low, high = image.convert("L").getextrema() if image.mode != "L" else image.getextrema()
    page: dict[str, Any] = {"number": number, "dpi": round(dpi) if dpi else None, "scale": dpi / POINTS_PER_INCH if dpi else None}
    page["origin"] = list(origin)
    if high - low <= BLANK_SPREAD:
        return {**page, "blank": True}, b""
    pixels = image.tobytes()
    return {**page, "width": image.width, "height": image.height, "mode": image.mode, "bytes": len(pixels)}, pixels
