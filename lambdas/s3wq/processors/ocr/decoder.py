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
its settings' names. Its parts (decoder_base.py, decoder_pdf.py,
decoder_words.py, decoder_drawings.py) are imported from this folder as
modules of their own, never through s3wq's package.

Wire: a request is a JSON line on stdin: ``{"open": path, "kind": "pdf"}``
(the reply holds ``count``), ``{"page": index}`` (a PDF page's ``layer``:
its size, words, facts, images and rules, decoder_pdf.py; an image's frame
as pixels), ``{"render": index, "crop": [left, top, right, bottom] | null}``
(a PDF page, or a crop of it in points, as pixels; an image's frame, or a
crop of it), which may add ``"longest_side": pixels`` (the page scaled so,
in place of the dpi: the vlm processor's size) and ``"colour": true`` (RGB,
not grey). Each reply is a JSON line, followed by ``bytes`` bytes of
pixels when it has them, on what was stdout: fd 1 is pointed at stderr, so
nothing a library prints can break a reply.
"""

from __future__ import annotations

import json
import math
import os
import resource
import sys
import time
import warnings
from typing import TYPE_CHECKING, Any, BinaryIO

from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

if not __package__:  # the decoder process: its parts from its own folder, after everything else on the path
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
if TYPE_CHECKING or __package__:  # imported by the processor, for the bounds it words
    from s3wq.processors.ocr.decoder_base import (
        DECODE_FACTOR,
        MB,
        POINTS_PER_INCH,
        Refused,
        Reply,
        Unreadable,
        capped_size,
        longest_side_scale,
        pixels_reply,
    )
    from s3wq.processors.ocr.decoder_pdf import PdfInput
else:
    from decoder_base import DECODE_FACTOR, MB, POINTS_PER_INCH, Refused, Reply, Unreadable, capped_size, longest_side_scale, pixels_reply
    from decoder_pdf import PdfInput

__all__ = ["DECODE_FACTOR", "MB", "POINTS_PER_INCH", "decode_bytes", "free_memory", "main"]

# Modes that hold no colour: kept 8-bit grey, a third of RGB's memory; RapidOCR takes either.
_GREY_MODES = {"1", "L", "LA", "I", "I;16", "F"}
# The modes Image.reduce() shrinks in place of decoding, then converting, at full size.
_REDUCIBLE_MODES = {"L", "LA", "RGB", "RGBA", "CMYK", "I", "F"}
# Bytes a pixel takes in Pillow's memory (RGB and two-band modes are stored in four).
_ONE_BYTE_MODES = {"1", "L", "P"}
_ORIENTATION = ExifTags.Base.Orientation
# How a render is asked to look: the longest side in pixels (None: the settings' dpi, or an image's own size), and colour.
Look = tuple[int | None, bool]
_DECODE_ERRORS = (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError)


def free_memory(cap: int) -> int:
    """Bytes this process may still map under ``cap``: the cap less its address space now (VmSize; Linux)."""
    try:
        with open("/proc/self/status") as status:
            size = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    except (OSError, StopIteration):
        return cap  # no procfs: the header checks judge against the whole cap
    return cap - size


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


def _frame_page(
    image: Image.Image, number: int, max_pixels: int, free: int, crop: tuple[list[float], int] | None = None, look: Look = (None, False)
) -> Reply:
    """The current frame of ``image``, decoded, upright, in 8-bit grey or RGB, at most ``max_pixels``; refused from
    its header where decoding it would pass the pixel bound or the memory left. ``look``: the longest side to scale it
    to (up or down; None: its own size) and whether it must be RGB."""
    pixels = image.width * image.height
    if pixels > (Image.MAX_IMAGE_PIXELS or math.inf):
        raise Unreadable(f"page {number} is {image.width}x{image.height} pixels, past the decompression-bomb limit")
    if pixels > DECODE_FACTOR * max_pixels:
        raise Refused(number=number, width=image.width, height=image.height, limit="pixels")
    full_size, dpi = image.size, _image_dpi(image)
    orientation = image.getexif().get(_ORIENTATION)
    longest_side, colour = look
    size = _scaled_size(image.width, image.height, longest_side) if longest_side else image.size
    size = capped_size(size[0], size[1], max_pixels)
    mode = "RGB" if colour or image.mode not in _GREY_MODES else "L"
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
    if crop:
        return _cropped(frame, number, dpi, crop)
    return pixels_reply(number, frame, dpi)


def _scaled_size(width: int, height: int, longest_side: int) -> tuple[int, int]:
    """``width`` x ``height`` scaled, ratio kept, so that the longer side is ``longest_side``; each side rounded up, as a
    PDF page's are when rendered."""
    scale = longest_side_scale(width, height, longest_side)
    return max(1, math.ceil(width * scale)), max(1, math.ceil(height * scale))


def _cropped(frame: Image.Image, number: int, dpi: float | None, crop: tuple[list[float], int]) -> Reply:
    """The crop ([left, top, right, bottom] in points) of a decoded ``frame`` at ``dpi`` (unknown: the dpi ``crop`` assumes)."""
    sides, assumed_dpi = crop
    scale = (dpi or assumed_dpi) / POINTS_PER_INCH
    box = tuple(max(0, min(side, round(value * scale))) for value, side in zip(sides, (*frame.size, *frame.size)))
    left, top = box[0] / scale, box[1] / scale
    return pixels_reply(number, frame.crop(box) if box[2] > box[0] and box[3] > box[1] else Image.new("L", (1, 1), 255), dpi, (left, top))


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

    def page(
        self, index: int, max_pixels: int, free: int, crop: list[float] | None = None, assumed_dpi: int = 72, look: Look = (None, False)
    ) -> Reply:
        """Frame ``index``, decoded as _frame_page says; only its ``crop`` (in points at its dpi, else at ``assumed_dpi``)."""
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            try:
                self._image.seek(index)
                return _frame_page(self._image, index + 1, max_pixels, free, (crop, assumed_dpi) if crop else None, look)
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
    source = opened[0]
    look: Look = (request.get("longest_side"), bool(request.get("colour")))
    if isinstance(source, ImageInput):
        index = request["render"] if "render" in request else request["page"]
        return source.page(index, max_pixels, free_memory(cap), request.get("crop"), dpi, look)
    if "render" in request:
        return source.render(request["render"], request.get("crop"), dpi, max_pixels, *look)
    return source.layer(request["page"])


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
