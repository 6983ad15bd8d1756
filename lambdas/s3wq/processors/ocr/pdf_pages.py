"""A PDF's pages, one at a time: the text layer of a page that has one, else the page rendered to pixels to OCR.

A scanned page whose text layer is only a stamp (a Bates number, say) is
rendered and OCR'd too: the render shows the stamp, so it is read as well.

pdfium (through pypdfium2) both reads the text layer and renders, so a page
is parsed once. A page is rendered at the settings' dpi unless that would
pass the pixel cap, when it is rendered at the highest dpi that fits: the
pixels are made at their final size, never made large and shrunk.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from s3wq.processors.builtins import ExtractionFailed
from s3wq.processors.ocr.images import ScannedPage

POINTS_PER_INCH = 72
# A scan often carries a few characters of text layer, a Bates number, a page number or a
# scanner's watermark, over an image of the whole page: a text layer shorter than this (in
# characters that are not spaces) on such a page is taken for a stamp, and the page is OCR'd.
# A searchable scan's text layer (the whole page's print) is hundreds of characters.
STAMP_CHARACTERS = 50
# An image covering at least this share of the page box makes the page a scan.
SCAN_COVER = 0.5
# pdfium's own words for a document it cannot open without a password.
_PASSWORD_ERROR = "password"


@dataclass(frozen=True)
class TextLayerPage:
    """A page whose text layer holds text: its number (from 1) and that text."""

    number: int
    text: str


def render_dpi(width_pt: float, height_pt: float, dpi: int, max_pixels: int) -> float:
    """``dpi``, or less so that a page of ``width_pt`` x ``height_pt`` points renders to at most ``max_pixels``."""
    pixels = (width_pt * dpi / POINTS_PER_INCH) * (height_pt * dpi / POINTS_PER_INCH)
    return dpi if pixels <= max_pixels else dpi * math.sqrt(max_pixels / pixels)


def _is_scanned(page: pdfium.PdfPage) -> bool:
    """Whether one image on ``page`` covers at least SCAN_COVER of its box, as a scanner's page image does."""
    left, bottom, right, top = page.get_bbox()
    area = (right - left) * (top - bottom)
    for image in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,)):
        x0, y0, x1, y1 = image.get_bounds()
        covered = max(0.0, min(x1, right) - max(x0, left)) * max(0.0, min(y1, top) - max(y0, bottom))
        if area > 0 and covered >= SCAN_COVER * area:
            return True
    return False


class PdfPages:
    """An open PDF; raise ExtractionFailed for one that is encrypted (password-protected) or corrupt."""

    def __init__(self, data: bytes):
        try:
            self._document = pdfium.PdfDocument(data)
            self.count = len(self._document)
        except pdfium.PdfiumError as exc:
            if _PASSWORD_ERROR in str(exc).lower():
                raise ExtractionFailed("encrypted PDF (password-protected): its pages cannot be read") from exc
            raise ExtractionFailed(f"not a readable PDF: {exc}") from exc

    def pages(self, limit: int, dpi: int, max_pixels: int) -> Iterator[TextLayerPage | ScannedPage]:
        """The first ``limit`` pages, each read (or rendered) only when it is asked for and closed before the next."""
        for index in range(min(self.count, limit)):
            try:
                page = self._document[index]
            except pdfium.PdfiumError as exc:
                raise ExtractionFailed(f"page {index + 1} of the PDF cannot be read: {exc}") from exc
            try:
                yield self._read(page, index + 1, dpi, max_pixels)
            finally:
                page.close()

    @staticmethod
    def _read(page: pdfium.PdfPage, number: int, dpi: int, max_pixels: int) -> TextLayerPage | ScannedPage:
        try:
            textpage = page.get_textpage()
            try:
                text = textpage.get_text_bounded().replace("\r\n", "\n").replace("\r", "\n")
            finally:
                textpage.close()
            if text.strip() and not (len("".join(text.split())) < STAMP_CHARACTERS and _is_scanned(page)):
                return TextLayerPage(number=number, text=text)
            used_dpi = render_dpi(*page.get_size(), dpi, max_pixels)
            bitmap = page.render(scale=used_dpi / POINTS_PER_INCH, grayscale=True)
            try:
                pixels = np.array(bitmap.to_pil().convert("L"))  # a copy: the bitmap's buffer is freed below
            finally:
                bitmap.close()
        except pdfium.PdfiumError as exc:
            raise ExtractionFailed(f"page {number} of the PDF cannot be read: {exc}") from exc
        return ScannedPage(number=number, pixels=pixels, dpi=round(used_dpi))

    def close(self) -> None:
        self._document.close()
