"""The processor's side of the decoder (decoder.py): the process started, asked for pages, and ended, within a group's run.

One decoder serves a group: started when an input first needs one, and
ended (closed, and waited for) before the processor returns, because the
processor host counts any process a run leaves alive as a failure of the
run (``leftover``). It is a fresh interpreter (``subprocess``), never a
fork: the host has threads by then, and multiprocessing's spawn and
forkserver machinery leaves helper processes of its own. Its start costs
~0.15 s of a core (it imports pypdfium2 and Pillow only; bench/ocr.py
measures it), once a group and again after it dies, against ~2.25 s for
each OCR'd page.

An input reaches it as a file (a temporary file, removed once opened), so
what decoding takes under the memory cap does not include the input's own
size. A reply that does not come by the time given (the input's share of
the run) ends the decoder and raises OutOfTime; a decoder that dies while it
decodes (pdfium aborts where an allocation fails under the cap) is that
input's error, worded here with the cap, and the next input gets a new one.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

from s3wq.errors import ProcessorNotFound
from s3wq.processors.builtins import ExtractionFailed
from s3wq.processors.ocr import decoder
from s3wq.processors.ocr.decoder_words import BOLD, HUNDREDTHS
from s3wq.processors.ocr.layout.model import Box, PageWords, Rule, Source, Word
from s3wq.processors.ocr.routing import LayerFacts
from s3wq.processors.ocr.settings import ENV_MAX_DECODE_MB, ENV_MAX_PIXELS, OcrSettings

# The image types read, by the first bytes of their files: a scan's name does not always say what it is.
_MAGIC = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"II*\x00": "image/tiff", b"MM\x00*": "image/tiff"}
IMAGE_TYPES = set(_MAGIC.values())
# How long a decoder may take to start (a cold Lambda's first import of pypdfium2 and Pillow) and to exit once told.
_START_SECONDS = 60.0
_EXIT_SECONDS = 5.0
# How a decoder that ran out of memory under its cap dies: pdfium calls abort() where an allocation
# fails (Pillow raises MemoryError, which the decoder reports). Its other crashes are faults or traps.
# (The child's peak RSS cannot tell: Linux carries the parent's into a child's ru_maxrss across exec.)
_OUT_OF_MEMORY = -signal.SIGABRT
_READ_CHUNK = 1 << 20
# Linux's most for a pipe an unprivileged process may ask for (/proc/sys/fs/pipe-max-size).
_PIPE_BYTES = 1 << 20
MB = decoder.MB


@dataclass(frozen=True)
class LayerPage:
    """A PDF page as its objects give it, before any render: its number (from 1), size in points, text layer's words in
    pdfium's order (maybe none), facts, images and ruling lines; boxes in points from its top-left, y down."""

    number: int
    width: float
    height: float
    words: list[Word]
    facts: LayerFacts
    images: list[Box]
    rules: list[Rule]

    @property
    def text(self) -> str:
        """The words as plain text in pdfium's order: a new line where a word starts off the last one's line, or left of it."""
        lines: list[list[str]] = []
        last: Box | None = None
        for word in self.words:
            box = word.box
            if last is None or not last.top <= box.middle <= last.bottom or box.left < last.left:
                lines.append([])
            lines[-1].append(word.text)
            last = box
        return "\n".join(" ".join(line) for line in lines)

    def page_words(self) -> PageWords:
        """What layout is given of this page."""
        return PageWords(self.number, self.width, self.height, self.words, Source.TEXT_LAYER, self.rules, self.images)


@dataclass(frozen=True)
class ScannedPage:
    """One page (or a crop of one) to OCR: its number (from 1), its pixels (8-bit grey or RGB), the dpi they are at
    (None: unknown), and where they are on the page: ``origin`` (the crop's top-left, in points) and
    ``pixels_per_point`` (exact; an image of unknown dpi is taken to be at the settings' dpi)."""

    number: int
    pixels: np.ndarray
    dpi: int | None
    origin: tuple[float, float] = (0.0, 0.0)
    pixels_per_point: float = 1.0

    def box_in_points(self, left: float, top: float, right: float, bottom: float) -> Box:
        """A box in these pixels as a box in the page's points, as layout's words are."""
        scale, (x, y) = self.pixels_per_point, self.origin
        return Box(x + left / scale, y + top / scale, x + right / scale, y + bottom / scale)


@dataclass(frozen=True)
class BlankPage:
    """A page with no print on it (nothing drawn, or no pixel darker than the paper): not OCR'd."""

    number: int
    dpi: int | None


Page = LayerPage | ScannedPage | BlankPage


class OutOfTime(Exception):
    """The input's share of the run ended before the decoder answered: it was ended, and the input is read no further."""


class DecoderNotStarted(ProcessorNotFound):
    """The decoder process did not start (its Python cannot import pypdfium2 or Pillow, say): no input could be read."""


def sniffed_image_type(data: bytes) -> str | None:
    """``image/png``, ``image/jpeg`` or ``image/tiff`` when ``data`` starts as such a file does, else None."""
    return next((kind for magic, kind in _MAGIC.items() if data.startswith(magic)), None)


class _Died(Exception):
    pass


class _Replies:
    """The decoder's replies, read from its pipe without ever waiting past a deadline."""

    def __init__(self, fd: int, most_bytes: int):
        self.fd = fd
        self.most_bytes = most_bytes
        self.buffer = bytearray()

    def _fill(self, until: float) -> None:
        self._wait(until)
        chunk = os.read(self.fd, _READ_CHUNK)
        if not chunk:
            raise _Died
        self.buffer += chunk

    def _wait(self, until: float) -> None:
        left = until - time.monotonic()
        if left <= 0 or not select.select([self.fd], [], [], left)[0]:
            raise OutOfTime

    def next(self, until: float) -> tuple[dict[str, Any], bytearray]:
        """The next reply: its header, and the pixels it announces (read straight into their own buffer: no copy of megabytes)."""
        while (end := self.buffer.find(b"\n")) < 0:
            self._fill(until)
        header = json.loads(self.buffer[:end])
        del self.buffer[: end + 1]
        size = header.get("bytes", 0)
        if size > self.most_bytes:
            raise ValueError(f"the decoder announced {size} bytes of pixels, more than a page at the pixel cap")
        pixels = bytearray(size)
        got = min(size, len(self.buffer))
        pixels[:got] = self.buffer[:got]
        del self.buffer[:got]
        view = memoryview(pixels)
        while got < size:
            self._wait(until)
            read = os.readv(self.fd, [view[got:]])
            if not read:
                raise _Died
            got += read
        return header, pixels


class Decoder:
    """The group's decoder: ``open`` an input, then ask for its ``page``s; ``close`` (or leave the ``with``) ends it."""

    def __init__(self, settings: OcrSettings):
        self.settings = settings
        self._process: subprocess.Popen | None = None
        self._replies: _Replies | None = None
        self.cpu_seconds = 0.0  # the decoder's own CPU time, as its last reply said (bench/ocr.py adds it to a page's)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the decoder and wait until it is ready; raise DecoderNotStarted if it is not."""
        settings = self.settings
        command = [sys.executable, "-P", decoder.__file__, str(settings.max_decode_mb), str(settings.dpi), str(settings.max_pixels)]
        # The host's own import path, whatever put it there (a Lambda's task root is added at run time, not by an environment variable).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert self._process.stdout is not None
        if hasattr(fcntl, "F_SETPIPE_SZ"):  # Linux: a page's pixels in a few writes, not sixty of the default 64 KB
            fcntl.fcntl(self._process.stdout.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        # RGB at the pixel cap, and the pixel a rounded-up side adds to each row and column.
        self._replies = _Replies(self._process.stdout.fileno(), most_bytes=4 * settings.max_pixels)
        try:
            ready, _ = self._replies.next(time.monotonic() + _START_SECONDS)
            self.cpu_seconds = ready["cpu"]
        except (OutOfTime, _Died, ValueError, KeyError):
            self.close()
            raise DecoderNotStarted(f"the ocr processor's decoder ({decoder.__file__}) did not start: its error is on stderr") from None

    def _ask(self, request: dict[str, Any], until: float, what: str) -> tuple[dict[str, Any], bytearray]:
        """The reply to ``request``; raise OutOfTime past ``until``, ExtractionFailed where the decoder died on ``what``."""
        if self._process is None:
            self.start()
        assert self._process is not None and self._process.stdin is not None and self._replies is not None
        try:
            self._process.stdin.write(json.dumps(request).encode() + b"\n")
            self._process.stdin.flush()
            reply, pixels = self._replies.next(until)
        except OutOfTime:
            self._end(kill=True)
            raise
        except (_Died, BrokenPipeError):
            raise ExtractionFailed(self._death(what)) from None
        except ValueError as exc:  # a reply that is not JSON, or announces too much
            self._end(kill=True)
            raise ExtractionFailed(f"{what}: the decoder's reply was not understood: {exc}") from None
        self.cpu_seconds = reply.get("cpu", self.cpu_seconds)
        if reply.get("memory"):
            self._end(kill=False)
            raise ExtractionFailed(self._out_of_memory(what))
        if "error" in reply:
            raise ExtractionFailed(reply["error"])
        if "refused" in reply:
            raise ExtractionFailed(self._refusal(reply["refused"]))
        return reply, pixels

    def open(self, data: bytes, kind: str, until: float) -> int:
        """Open ``data``, a ``pdf`` or an ``image``, as the input to read: its page count."""
        handle, path = tempfile.mkstemp(prefix="s3wq-ocr-")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            reply, _ = self._ask({"open": path, "kind": kind}, until, "opening the file")
        finally:
            os.unlink(path)  # the decoder holds it open by now, or has failed
        return int(reply["count"])

    def page(self, index: int, until: float) -> Page:
        """Page ``index`` (from 0) of the open input: a PDF page's layer (no pixels: ``render`` them if need be), or an
        image file's frame, decoded."""
        reply, pixels = self._ask({"page": index}, until, f"page {index + 1}: decoding it")
        if "layer" in reply:
            return _layer_page(int(reply["number"]), reply["layer"])
        return self._pixels_page(reply, pixels)

    def render(
        self, index: int, until: float, crop: Box | None = None, *, longest_side: int | None = None, colour: bool = False
    ) -> ScannedPage | BlankPage:
        """Page ``index`` (from 0) as pixels at the settings' dpi (or less, under the pixel cap), or only its ``crop``
        (in points): an image region the text layer does not cover, say.

        ``longest_side``: the whole page scaled (up or down) so that its longer side is that many pixels, in place of the
        dpi, as olmocr sizes a page for its model; the pixel cap still holds. A PDF page is its CropBox, as a viewer
        shows it (olmocr's pdftoppm draws the MediaBox: the same page but where a PDF crops it). ``colour``: RGB pixels.
        """
        if crop is not None and longest_side is not None:
            raise ValueError("a render is of a crop or at a longest side, not both")
        request: dict[str, Any] = {"render": index, "crop": None if crop is None else [crop.left, crop.top, crop.right, crop.bottom]}
        if longest_side is not None:
            request["longest_side"] = int(longest_side)
        if colour:
            request["colour"] = True
        reply, pixels = self._ask(request, until, f"page {index + 1}: decoding it")
        return self._pixels_page(reply, pixels)

    def _pixels_page(self, reply: dict[str, Any], pixels: bytearray) -> ScannedPage | BlankPage:
        number, dpi = int(reply["number"]), reply.get("dpi")
        if reply.get("blank"):
            return BlankPage(number=number, dpi=dpi)
        width, height, bands = int(reply["width"]), int(reply["height"]), 3 if reply["mode"] == "RGB" else 1
        if len(pixels) != width * height * bands:
            raise ExtractionFailed(f"page {number}: the decoder sent {len(pixels)} bytes for {width}x{height} pixels")
        shape = (height, width, 3) if bands == 3 else (height, width)
        left, top = reply.get("origin") or (0.0, 0.0)
        return ScannedPage(
            number=number,
            pixels=np.frombuffer(pixels, dtype=np.uint8).reshape(shape),
            dpi=dpi,
            origin=(float(left), float(top)),
            pixels_per_point=float(reply.get("scale") or self.settings.dpi / decoder.POINTS_PER_INCH),
        )

    def _end(self, *, kill: bool) -> int:
        """End the decoder (killed, or told by its stdin closing) and wait for it: its exit code (-N: killed by signal N)."""
        process, self._process, self._replies = self._process, None, None
        if process is None:
            return 0
        assert process.stdin is not None and process.stdout is not None
        if kill:
            process.kill()
        try:
            process.stdin.close()  # its end of file tells a live decoder to exit
        except BrokenPipeError:
            pass  # it is dead already: a request it never read was still buffered
        try:
            process.wait(_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
        return process.returncode

    def close(self) -> None:
        self._end(kill=False)

    def _death(self, what: str) -> str:
        """Why the decoder died on ``what``: out of memory under its cap, or how else it ended."""
        code = self._end(kill=False)
        if code == _OUT_OF_MEMORY:
            return self._out_of_memory(what)
        how = signal.Signals(-code).name if code < 0 else f"exit code {code}"
        return f"{what} killed the decoder ({how}; its memory cap is {self.settings.max_decode_mb} MB, {ENV_MAX_DECODE_MB})"

    def _out_of_memory(self, what: str) -> str:
        return f"{what} needed more than the decoder's memory cap of {self.settings.max_decode_mb} MB ({ENV_MAX_DECODE_MB})"

    def _refusal(self, facts: dict[str, Any]) -> str:
        number, width, height = facts["number"], facts["width"], facts["height"]
        if facts["limit"] == "memory":
            return (
                f"page {number} is {width}x{height} pixels, {facts['what']}: decoding it takes about {facts['needs'] // MB} MB, "
                f"more than the {facts['free'] // MB} MB the decoder has free under its memory cap of "
                f"{self.settings.max_decode_mb} MB ({ENV_MAX_DECODE_MB})"
            )
        held = f"page {number} holds {facts['what']} of" if facts.get("what") else f"page {number} is"
        most = decoder.DECODE_FACTOR * self.settings.max_pixels
        return (
            f"{held} {width}x{height} pixels ({width * height}), more than the {most} that may be decoded "
            f"({decoder.DECODE_FACTOR} x {ENV_MAX_PIXELS}={self.settings.max_pixels})"
        )


def _box(values: list[int]) -> Box:
    return Box(values[0] / HUNDREDTHS, values[1] / HUNDREDTHS, values[2] / HUNDREDTHS, values[3] / HUNDREDTHS)


def _layer_page(number: int, layer: dict[str, Any]) -> LayerPage:
    """A layer reply (decoder_pdf.py; its boxes in hundredths of a point) as a LayerPage."""
    words = [
        Word(
            text,
            Box(left / HUNDREDTHS, top / HUNDREDTHS, right / HUNDREDTHS, bottom / HUNDREDTHS),
            size / HUNDREDTHS,
            None,
            bool(flags & BOLD),
        )
        for text, left, top, right, bottom, size, flags in layer["words"]
    ]
    facts = LayerFacts(int(layer["visible"]), int(layer["invisible"]), bool(layer["ocr_font"]), bool(layer["scanned"]))
    images = [_box(box) for box in layer["images"]]
    rules = [Rule(_box(box)) for box in layer["rules"]]
    return LayerPage(number, layer["width"] / HUNDREDTHS, layer["height"] / HUNDREDTHS, words, facts, images, rules)
