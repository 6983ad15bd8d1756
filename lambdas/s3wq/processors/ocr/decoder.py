"""The decoder: the process in which the ``ocr`` processor opens an input (a PDF in pdfium, an image in Pillow) and decodes its pages.

``decoding.Decoder`` runs it as ``python -P decoder.py MAX_MB DPI MAX_PIXELS``,
one for a group (a new one after one dies), and ends it before the group's
run returns. It sets RLIMIT_AS to MAX_MB before it reads anything.

Why a process of its own: pdfium and Pillow allocate what a file asks for.
A 1 MB PDF whose content stream inflates to 1 GB took pdfium to 2 GB of
RSS, and a Lambda worker of 1,769 MB, whose OCR engine holds ~1.3 GB, was
killed with the whole group on every attempt. Here such an allocation fails
inside this process under its cap: pdfium aborts, Pillow raises MemoryError;
this process alone ends, and the processor host, which runs the engine,
reports it as that input's error and goes on with the next.

Why it imports nothing of s3wq: the cap is on address space, and this
process's own counts against it, as its start-up counts against each group.
s3wq's package brings botocore (0.5 s a start) and numpy maps 124 MB for
OpenBLAS; pypdfium2 and Pillow alone start in ~0.15 s of a core, in ~40 MB.
So it reports facts (sizes, what failed) and the processor words them, with
its settings' names.

Wire: a request is a JSON line on stdin (``{"open": path, "kind": "pdf"}``,
``{"page": index}``); each reply is a JSON line, followed by ``bytes``
bytes of pixels when it has them, on what was stdout: fd 1 is pointed at
stderr, so nothing a library prints can break a reply.
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
import warnings
from typing import Any, BinaryIO

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

MB = 1 << 20
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
# A PNG or TIFF frame is decoded whole before it is shrunk to the pixel cap, as pdfium decodes a
# page's image whole, so a frame (or a page's image) may be at most this many times the cap:
# 80 Mpx at the default (an A4 page at 600 dpi is 70). What decoding it takes in bytes is
# checked too, against the memory cap (decode_bytes).
DECODE_FACTOR = 5
# A page on which no pixel differs from the lightest by more than this (of 255 grey levels)
# holds no print: it is not OCR'd. A blank page otherwise costs a full OCR (~1.3 s each, as
# a 100,000-page PDF of them showed); paper texture or a speck makes a larger spread, and
# such a page is OCR'd as any other.
BLANK_SPREAD = 16
# Modes that hold no colour: kept 8-bit grey, a third of RGB's memory; RapidOCR takes either.
_GREY_MODES = {"1", "L", "LA", "I", "I;16", "F"}
# The modes Image.reduce() shrinks in place of decoding, then converting, at full size.
_REDUCIBLE_MODES = {"L", "LA", "RGB", "RGBA", "CMYK", "I", "F"}
# Bytes a pixel takes in Pillow's memory (RGB and two-band modes are stored in four).
_ONE_BYTE_MODES = {"1", "L", "P"}
_ORIENTATION = ExifTags.Base.Orientation
_DECODE_ERRORS = (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)

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


def render_dpi(width_pt: float, height_pt: float, dpi: int, max_pixels: int) -> float:
    """``dpi``, or less so that a page of ``width_pt`` x ``height_pt`` points renders to at most ``max_pixels``."""
    pixels = (width_pt * dpi / POINTS_PER_INCH) * (height_pt * dpi / POINTS_PER_INCH)
    return dpi if pixels <= max_pixels else dpi * math.sqrt(max_pixels / pixels)


def free_memory(cap: int) -> int:
    """Bytes this process may still map under ``cap``: the cap less its address space now (VmSize; Linux)."""
    try:
        with open("/proc/self/status") as status:
            size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        return cap  # no procfs: the header checks judge against the whole cap
    return cap - size


def _pixels_reply(number: int, image: Image.Image, dpi: float | None) -> Reply:
    """The reply for a decoded page: blank (no print, not worth an OCR), or its 8-bit grey or RGB pixels."""
    low, high = image.convert("L").getextrema() if image.mode != "L" else image.getextrema()
    page: dict[str, Any] = {"number": number, "dpi": round(dpi) if dpi else None}
    if high - low <= BLANK_SPREAD:
        return {**page, "blank": True}, b""
    pixels = image.tobytes()
    return {**page, "width": image.width, "height": image.height, "mode": image.mode, "bytes": len(pixels)}, pixels


class PdfInput:
    """An open PDF; raise Unreadable for one that is encrypted (password-protected) or corrupt."""

    def __init__(self, path: str):
        try:
            self._document = pdfium.PdfDocument(path)
            self.count = len(self._document)
        except pdfium.PdfiumError as exc:
            if _PASSWORD_ERROR in str(exc).lower():
                raise Unreadable("encrypted PDF (password-protected): its pages cannot be read") from exc
            raise Unreadable(f"not a readable PDF: {exc}") from exc

    def page(self, index: int, dpi: int, max_pixels: int, free: int) -> Reply:
        """Page ``index``: its text layer if it has one, else blank, else rendered to grey pixels at most ``max_pixels``.

        ``free`` is not needed: the render is ``max_pixels`` bytes at most, and what pdfium takes beside it the cap bounds.
        """
        number = index + 1
        try:
            page = self._document[index]
        except pdfium.PdfiumError as exc:
            raise Unreadable(f"page {number} of the PDF cannot be read: {exc}") from exc
        try:
            return self._read(page, number, dpi, max_pixels)
        except pdfium.PdfiumError as exc:
            raise Unreadable(f"page {number} of the PDF cannot be read: {exc}") from exc
        finally:
            page.close()

    @staticmethod
    def _read(page: pdfium.PdfPage, number: int, dpi: int, max_pixels: int) -> Reply:
        textpage = page.get_textpage()
        try:
            text = textpage.get_text_bounded().replace("\r\n", "\n").replace("\r", "\n")
        finally:
            textpage.close()
        images = [(obj, *obj.get_px_size()) for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,))]
        if text.strip() and not (len("".join(text.split())) < STAMP_CHARACTERS and _is_scanned(page, images)):
            return {"number": number, "text": text}, b""
        width, height = page.get_size()
        used_dpi = render_dpi(width, height, dpi, max_pixels)
        if not pdfium_c.FPDFPage_CountObjects(page.raw) and not pdfium_c.FPDFPage_GetAnnotCount(page.raw):
            return {"number": number, "dpi": round(used_dpi), "blank": True}, b""  # nothing on it to draw
        for _, width, height in images:
            if width * height > DECODE_FACTOR * max_pixels:
                # pdfium decodes a page's image whole before it scales it to the page: refused as an image file's frame is.
                raise Refused(number=number, width=width, height=height, limit="pixels", what="an image")
        bitmap = page.render(scale=used_dpi / POINTS_PER_INCH, grayscale=True)
        try:
            image = bitmap.to_pil()  # over the bitmap's own buffer: its reply copies the pixels out before it is freed
            return _pixels_reply(number, image if image.mode == "L" else image.convert("L"), used_dpi)
        finally:
            bitmap.close()

    def close(self) -> None:
        self._document.close()


def _is_scanned(page: pdfium.PdfPage, images: list[tuple[Any, int, int]]) -> bool:
    """Whether one image on ``page`` covers at least SCAN_COVER of its box, as a scanner's page image does."""
    left, bottom, right, top = page.get_bbox()
    area = (right - left) * (top - bottom)
    for image, _, _ in images:
        x0, y0, x1, y1 = image.get_bounds()
        covered = max(0.0, min(x1, right) - max(x0, left)) * max(0.0, min(y1, top) - max(y0, bottom))
        if area > 0 and covered >= SCAN_COVER * area:
            return True
    return False


def decode_bytes(image: Image.Image, full_size: tuple[int, int], size: tuple[int, int]) -> int:
    """At least what decoding ``image``'s current frame takes, from its header: the frame, what it is turned into, and
    a progressive JPEG's coefficients.

    libjpeg keeps every DCT coefficient (two bytes) of a progressive file at
    its full size until the last scan, whatever scale it draft()s to: a
    79-megapixel CMYK one needs 632 MB for them, the 40 MB file notwithstanding.
    """
    width, height = image.size  # after draft(): what the decoder writes
    per_pixel = 1 if image.mode in _ONE_BYTE_MODES else 2 if image.mode.startswith("I;16") else 4
    total = width * height * per_pixel + size[0] * size[1] * 4
    if image.format == "JPEG" and (image.info.get("progressive") or image.info.get("progression")):
        components = getattr(image, "layer", None) or [("", 1, 1, 0)] * len(image.getbands())
        most_h = max(c[1] for c in components) or 1
        most_v = max(c[2] for c in components) or 1
        total += sum(2 * math.ceil(full_size[0] * c[1] / most_h) * math.ceil(full_size[1] * c[2] / most_v) for c in components)
    return total


def _frame_page(image: Image.Image, number: int, max_pixels: int, free: int) -> Reply:
    """The current frame of ``image``, decoded, upright, in 8-bit grey or RGB, at most ``max_pixels``; refused from
    its header where decoding it would pass the pixel bound or the memory left."""
    pixels = image.width * image.height
    if pixels > (Image.MAX_IMAGE_PIXELS or math.inf):
        raise Unreadable(f"page {number} is {image.width}x{image.height} pixels, past the decompression-bomb limit")
    if pixels > DECODE_FACTOR * max_pixels:
        raise Refused(number=number, width=image.width, height=image.height, limit="pixels")
    full_size, dpi = image.size, _image_dpi(image)
    orientation = image.getexif().get(_ORIENTATION)
    size = capped_size(image.width, image.height, max_pixels)
    mode = "L" if image.mode in _GREY_MODES else "RGB"
    if image.format == "JPEG" and size != image.size:
        image.draft(mode, size)  # JPEG decodes at 1/2, 1/4 or 1/8 scale: the full page is never in memory
    needs = decode_bytes(image, full_size, size)
    if needs > free:
        progressive = image.format == "JPEG" and bool(image.info.get("progressive") or image.info.get("progression"))
        what = f"a {'progressive ' if progressive else ''}{image.mode} {image.format or 'image'}"
        raise Refused(number=number, width=full_size[0], height=full_size[1], limit="memory", what=what, needs=needs, free=free)
    frame: Image.Image = image
    factor = min(frame.width // size[0], frame.height // size[1])
    if factor >= 2 and frame.mode in _REDUCIBLE_MODES:
        frame = frame.reduce(factor)  # shrunk in its own mode, so that the conversion below copies the small frame only
    frame = frame.convert(mode)
    if frame.size != size:
        frame = frame.resize(size, Image.Resampling.LANCZOS)
    if dpi:
        dpi *= frame.width / full_size[0]
    if orientation:
        # A phone's photo is stored as its sensor saw it, with the turn to show it upright in EXIF.
        frame.getexif()[_ORIENTATION] = orientation
        frame = ImageOps.exif_transpose(frame)
    return _pixels_reply(number, frame, dpi)


def _image_dpi(image: Image.Image) -> float | None:
    dpi = image.info.get("dpi")
    try:
        return float(dpi[0]) if dpi and float(dpi[0]) > 1 else None
    except (TypeError, ValueError, IndexError):
        return None


class ImageInput:
    """An image file's pages (a TIFF's frames), decoded one at a time; raise Unreadable for one Pillow cannot decode.

    Pillow's decompression-bomb guard stays on, and its warning (an image
    past ``Image.MAX_IMAGE_PIXELS``) is an error here.
    """

    def __init__(self, path: str):
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            try:
                self._image = Image.open(path)
                self.count = getattr(self._image, "n_frames", 1)
            except (*_DECODE_ERRORS, Image.DecompressionBombWarning) as exc:
                raise Unreadable(f"not a readable image: {type(exc).__name__}: {exc}") from exc

    def page(self, index: int, dpi: int, max_pixels: int, free: int) -> Reply:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            try:
                self._image.seek(index)
                return _frame_page(self._image, index + 1, max_pixels, free)
            except (*_DECODE_ERRORS, Image.DecompressionBombWarning) as exc:
                raise Unreadable(f"page {index + 1} of the image cannot be decoded: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        self._image.close()


def _answer(request: dict[str, Any], opened: list[PdfInput | ImageInput], settings: tuple[int, int, int]) -> Reply:
    """The reply to one request; ``opened`` holds the input being read (at most one)."""
    cap, dpi, max_pixels = settings
    if "open" in request:
        while opened:
            opened.pop().close()
        source = PdfInput(request["open"]) if request["kind"] == "pdf" else ImageInput(request["open"])
        opened.append(source)
        return {"count": source.count}, b""
    if not opened:
        raise Unreadable("no input is open")
    return opened[0].page(request["page"], dpi, max_pixels, free_memory(cap))


def serve(requests: BinaryIO, replies: BinaryIO, settings: tuple[int, int, int]) -> None:
    """Answer requests until stdin closes, or until memory ran out (the processor starts another decoder)."""
    opened: list[PdfInput | ImageInput] = []
    for line in requests:
        ending = False
        try:
            header, pixels = _answer(json.loads(line), opened, settings)
        except Unreadable as exc:
            header, pixels = {"error": " ".join(str(exc).split())}, b""
        except Refused as exc:
            header, pixels = {"refused": exc.facts}, b""
        except MemoryError:
            # What was allocated may be anywhere; a fresh process is cheaper than trusting this one.
            header, pixels, ending = {"memory": True}, b"", True
        except Exception as exc:  # noqa: BLE001 -- this process only decodes the input: whatever fails is the input's
            header, pixels = {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}, b""
        header["cpu"] = time.process_time()
        replies.write(json.dumps(header).encode() + b"\n")
        replies.write(pixels)  # apart: a page's pixels are megabytes, not to be copied once more to join them
        replies.flush()
        if ending:
            return


def main(argv: list[str]) -> None:
    cap_mb, dpi, max_pixels = (int(value) for value in argv)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    if sys.platform.startswith("linux"):
        # Elsewhere (macOS) RLIMIT_AS is not enforced: the header checks alone bound the decoding there.
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = cap_mb * MB if hard == resource.RLIM_INFINITY else min(cap_mb * MB, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    replies.write(json.dumps({"ready": True, "cpu": time.process_time()}).encode() + b"\n")
    replies.flush()
    serve(sys.stdin.buffer, replies, (cap_mb * MB, dpi, max_pixels))


if __name__ == "__main__":
    main(sys.argv[1:])
