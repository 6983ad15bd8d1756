"""Images as pages to OCR: PNG, JPEG, TIFF (every frame), one frame decoded at a time, downscaled to the pixel cap, turned upright.

Pillow's decompression-bomb guard stays on, and its warning (an image past
``Image.MAX_IMAGE_PIXELS``) is an error here: such a file is refused before
its pixels are decoded, not decoded and then shrunk; so is a frame more than
DECODE_FACTOR times the pixel cap, which would be decoded whole.
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

from s3wq.processors.builtins import ExtractionFailed
from s3wq.processors.ocr.settings import ENV_MAX_PIXELS

# The image types read, by the first bytes of their files: a scan's name does not always say what it is.
_MAGIC = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"II*\x00": "image/tiff", b"MM\x00*": "image/tiff"}
IMAGE_TYPES = set(_MAGIC.values())
# Modes that hold no colour: kept 8-bit grey, a third of RGB's memory; RapidOCR takes either.
_GREY_MODES = {"1", "L", "LA", "I", "I;16", "F"}
# A PNG or TIFF frame is decoded whole before it is shrunk to the pixel cap, so a frame may be at
# most this many times the cap: 80 Mpx at the default (an A4 page at 600 dpi is 70), 320 MB as
# CMYK. A small file with a huge frame must not take more than the ~500 MB a 1769 MB Lambda
# worker has beside the engine's ~1.2 GB.
DECODE_FACTOR = 5
# The modes Image.reduce() shrinks in place of decoding, then converting, at full size.
_REDUCIBLE_MODES = {"L", "LA", "RGB", "RGBA", "CMYK", "I", "F"}
_ORIENTATION = ExifTags.Base.Orientation
_DECODE_ERRORS = (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)


@dataclass(frozen=True)
class ScannedPage:
    """One page to OCR: its number (from 1), its pixels (8-bit grey or RGB) and the dpi they are at (None: unknown)."""

    number: int
    pixels: np.ndarray
    dpi: int | None


def sniffed_image_type(data: bytes) -> str | None:
    """``image/png``, ``image/jpeg`` or ``image/tiff`` when ``data`` starts as such a file does, else None."""
    return next((kind for magic, kind in _MAGIC.items() if data.startswith(magic)), None)


def capped_size(width: int, height: int, max_pixels: int) -> tuple[int, int]:
    """``width`` x ``height`` scaled down, ratio kept, to at most ``max_pixels``; unchanged when it fits."""
    if width * height <= max_pixels:
        return width, height
    factor = math.sqrt(max_pixels / (width * height))
    return max(1, math.floor(width * factor)), max(1, math.floor(height * factor))


def _image_dpi(image: Image.Image) -> float | None:
    dpi = image.info.get("dpi")
    try:
        return float(dpi[0]) if dpi and float(dpi[0]) > 1 else None
    except (TypeError, ValueError, IndexError):
        return None


def _frame_page(image: Image.Image, number: int, max_pixels: int) -> ScannedPage:
    """The current frame of ``image``, decoded, upright, in 8-bit grey or RGB, at most ``max_pixels``."""
    _refuse_huge_frame(image, number, max_pixels)
    stored_width, dpi = image.width, _image_dpi(image)
    orientation = image.getexif().get(_ORIENTATION)
    size = capped_size(image.width, image.height, max_pixels)
    mode = "L" if image.mode in _GREY_MODES else "RGB"
    if image.format == "JPEG" and size != image.size:
        image.draft(mode, size)  # JPEG decodes at 1/2, 1/4 or 1/8 scale: the full page is never in memory
    frame: Image.Image = image
    factor = min(frame.width // size[0], frame.height // size[1])
    if factor >= 2 and frame.mode in _REDUCIBLE_MODES:
        frame = frame.reduce(factor)  # shrunk in its own mode, so that the conversion below copies the small frame only
    frame = frame.convert(mode)
    if frame.size != size:
        frame = frame.resize(size, Image.Resampling.LANCZOS)
    if dpi:
        dpi *= frame.width / stored_width
    if orientation:
        # A phone's photo is stored as its sensor saw it, with the turn to show it upright in EXIF.
        frame.getexif()[_ORIENTATION] = orientation
        frame = ImageOps.exif_transpose(frame)
    return ScannedPage(number=number, pixels=np.asarray(frame), dpi=round(dpi) if dpi else None)


def _refuse_huge_frame(image: Image.Image, number: int, max_pixels: int) -> None:
    """Raise ExtractionFailed for a frame whose header size is past what may be decoded, before any of its pixels are."""
    pixels = image.width * image.height
    if pixels > (Image.MAX_IMAGE_PIXELS or math.inf):
        raise ExtractionFailed(f"page {number} is {image.width}x{image.height} pixels, past the decompression-bomb limit")
    if pixels > DECODE_FACTOR * max_pixels:
        raise ExtractionFailed(
            f"page {number} is {image.width}x{image.height} pixels ({pixels}), more than the {DECODE_FACTOR * max_pixels} "
            f"that may be decoded ({DECODE_FACTOR} x {ENV_MAX_PIXELS}={max_pixels})"
        )


class ImagePages:
    """An image file's pages (a TIFF's frames), read one at a time; raise ExtractionFailed for a file Pillow cannot decode."""

    def __init__(self, data: bytes):
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            try:
                self._image = Image.open(io.BytesIO(data))
                self.count = getattr(self._image, "n_frames", 1)
            except (*_DECODE_ERRORS, Image.DecompressionBombWarning) as exc:
                raise ExtractionFailed(f"not a readable image: {type(exc).__name__}: {exc}") from exc

    def pages(self, limit: int, max_pixels: int) -> Iterator[ScannedPage]:
        """The first ``limit`` pages, each decoded only when it is asked for."""
        for index in range(min(self.count, limit)):
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                try:
                    self._image.seek(index)
                    page = _frame_page(self._image, index + 1, max_pixels)
                except (*_DECODE_ERRORS, Image.DecompressionBombWarning) as exc:
                    raise ExtractionFailed(f"page {index + 1} of the image cannot be decoded: {type(exc).__name__}: {exc}") from exc
            yield page

    def close(self) -> None:
        self._image.close()
