"""A PDF in the decoder process (decoder.py): each page's layer (its size, words, facts, images and rules), and a page, or a
crop of it, rendered to grey pixels when the processor asks.

The layer is all a page with a good text layer needs, and costs a few
milliseconds; rendering costs tens. So the decoder renders only on request,
and the page last asked for stays loaded for it (a layer, then its render).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

if TYPE_CHECKING or __package__:  # imported by the processor (its tests): from the package
    from s3wq.processors.ocr.decoder_base import (
        DECODE_FACTOR,
        POINTS_PER_INCH,
        Refused,
        Reply,
        Unreadable,
        capped_scale,
        longest_side_scale,
        pixels_reply,
    )
    from s3wq.processors.ocr.decoder_drawings import page_drawings
    from s3wq.processors.ocr.decoder_words import HUNDREDTHS, PageSpace, page_words
else:  # the decoder process: from its own folder, none of s3wq's package imported
    from decoder_base import DECODE_FACTOR, POINTS_PER_INCH, Refused, Reply, Unreadable, capped_scale, longest_side_scale, pixels_reply
    from decoder_drawings import page_drawings
    from decoder_words import HUNDREDTHS, PageSpace, page_words

# An image covering at least this share of the page box makes the page a scan.
SCAN_COVER = 0.5
# pdfium's own words for a document it cannot open without a password.
_PASSWORD_ERROR = "password"


def _wire(*points: float) -> list[int]:
    """Points as the wire has them: in whole HUNDREDTHS."""
    return [round(value * HUNDREDTHS) for value in points]


class PdfInput:
    """An open PDF; raise Unreadable for one that is encrypted (password-protected) or corrupt."""

    def __init__(self, path: str):
        self._loaded: tuple[int, pdfium.PdfPage] | None = None
        try:
            self._document = pdfium.PdfDocument(path)
            self.count = len(self._document)
        except pdfium.PdfiumError as exc:
            if _PASSWORD_ERROR in str(exc).lower():
                raise Unreadable("encrypted PDF (password-protected): its pages cannot be read") from exc
            raise Unreadable(f"not a readable PDF: {exc}") from exc

    def _page(self, index: int) -> pdfium.PdfPage:
        if self._loaded and self._loaded[0] == index:
            return self._loaded[1]
        self._unload()
        try:
            page = self._document[index]
        except pdfium.PdfiumError as exc:
            raise Unreadable(f"page {index + 1} of the PDF cannot be read: {exc}") from exc
        self._loaded = (index, page)
        return page

    def _unload(self) -> None:
        if self._loaded:
            self._loaded[1].close()
            self._loaded = None

    def layer(self, index: int) -> Reply:
        """Page ``index``'s size, its text layer's words, its facts, images and ruling lines (in HUNDREDTHS of a point): no
        pixels."""
        page = self._page(index)
        try:
            return {"number": index + 1, "layer": _layer(page)}, b""
        except pdfium.PdfiumError as exc:
            raise Unreadable(f"page {index + 1} of the PDF cannot be read: {exc}") from exc

    def render(
        self, index: int, crop: list[float] | None, dpi: int, max_pixels: int, longest_side: int | None = None, colour: bool = False
    ) -> Reply:
        """Page ``index``, or the ``crop`` of it ([left, top, right, bottom] in points), as pixels at most ``max_pixels``
        (at ``dpi``, or so that its longest side is ``longest_side``; less under the cap), grey or in ``colour``, or blank."""
        page = self._page(index)
        try:
            return _render(page, index + 1, crop, (dpi, longest_side, max_pixels), colour)
        except pdfium.PdfiumError as exc:
            raise Unreadable(f"page {index + 1} of the PDF cannot be read: {exc}") from exc

    def close(self) -> None:
        self._unload()
        self._document.close()


def _space(page: pdfium.PdfPage) -> PageSpace:
    left, bottom, right, top = page.get_bbox()
    return PageSpace(left, bottom, right, top, pdfium_c.FPDFPage_GetRotation(page.raw))


def _layer(page: pdfium.PdfPage) -> dict[str, Any]:
    space = _space(page)
    width, height = page.get_size()
    textpage = page.get_textpage()
    try:
        words = page_words(textpage.raw, space)
    finally:
        textpage.close()
    drawings = page_drawings(page.raw, space)
    area = width * height
    scanned = area > 0 and any(_covered(box, width, height) >= SCAN_COVER * area for box in drawings.images)
    return {
        "width": _wire(width)[0],
        "height": _wire(height)[0],
        "words": words.words,
        "visible": words.visible,
        "invisible": words.invisible,
        "ocr_font": words.ocr_font,
        "scanned": scanned,
        "images": [_wire(*box) for box in drawings.images],
        "rules": [_wire(*box) for box in drawings.rules],
    }


def _covered(box: tuple[float, float, float, float], width: float, height: float) -> float:
    """How much of the page (``width`` x ``height`` points) ``box`` covers."""
    left, top, right, bottom = box
    return max(0.0, min(right, width) - max(left, 0.0)) * max(0.0, min(bottom, height) - max(top, 0.0))


def _render(page: pdfium.PdfPage, number: int, crop: list[float] | None, size: tuple[int, int | None, int], colour: bool) -> Reply:
    """The page (or its crop) at ``size``: (dpi, longest side or None, pixel cap)."""
    dpi, longest_side, max_pixels = size
    width, height = page.get_size()
    left, top, right, bottom = crop if crop else (0.0, 0.0, width, height)
    left, top, right, bottom = max(0.0, left), max(0.0, top), min(width, right), min(height, bottom)
    shown = (max(right - left, 1.0), max(bottom - top, 1.0))
    # A longest side is the vlm processor's: olmocr's size for its model (longest_side_scale says how it is kept exact).
    scale = longest_side_scale(*shown, longest_side) if longest_side else dpi / POINTS_PER_INCH
    scale = capped_scale(*shown, scale, max_pixels)
    used_dpi = scale * POINTS_PER_INCH
    blank = {"number": number, "dpi": round(used_dpi), "scale": scale, "origin": [left, top], "blank": True}
    if right - left < 1 or bottom - top < 1:
        return blank, b""  # a crop off the page: nothing of it to draw
    if not pdfium_c.FPDFPage_CountObjects(page.raw) and not pdfium_c.FPDFPage_GetAnnotCount(page.raw):
        return blank, b""  # nothing on it to draw
    for image in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,)):
        image_width, image_height = image.get_px_size()
        if image_width * image_height > DECODE_FACTOR * max_pixels:
            # pdfium decodes a page's image whole before it scales it to the page: refused as an image file's frame is.
            raise Refused(number=number, width=image_width, height=image_height, limit="pixels", what="an image")
    # pypdfium2's crop is what to cut off each side of the displayed page: left, bottom, right, top.
    bitmap = page.render(scale=scale, grayscale=not colour, crop=(left, height - bottom, width - right, top))
    try:
        image = bitmap.to_pil()  # over the bitmap's own buffer: its reply copies the pixels out before it is freed
        mode = "RGB" if colour else "L"
        return pixels_reply(number, image if image.mode == mode else image.convert(mode), used_dpi, (left, top))
    finally:
        bitmap.close()
