"""One page read the way routing.py chooses: its words (with boxes, cleaned), and its account for the record.

A PDF page comes from the decoder as its layer (words, facts, images); an
image file's frame as pixels. What is OCR'd is rendered by the decoder (the
whole page, or an image region the layer leaves uncovered) and read by the
engine here, where it stays loaded. Every word, from either source, is in
points from the page's top-left corner, cleaned (cleaning.py) to the
settings' scripts, so that layout treats both alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from s3wq.processors.ocr.cleaning import clean_words
from s3wq.processors.ocr.decoding import BlankPage, Decoder, LayerPage, ScannedPage
from s3wq.processors.ocr.engine import PageNotRead, PageReading, read_page
from s3wq.processors.ocr.layout.model import Box, PageWords, Source, Word
from s3wq.processors.ocr.plausibility import plausibility
from s3wq.processors.ocr.routing import MOST_REGIONS, Decision, Quality, Route, first_decision, judged, uncovered_images
from s3wq.processors.ocr.settings import OcrMode, OcrSettings

POINTS_PER_INCH = 72


@dataclass
class PageRead:
    """What one page gave: its words for layout (None: nothing to lay out), its account, and what went wrong on it."""

    number: int
    words: PageWords | None
    entry: dict[str, Any]
    problem: str | None = None
    empty: bool = False  # OCR'd, and no text found: the input's error unless another page explains it
    flags: list[str] = field(default_factory=list)


def _text(words: list[Word]) -> str:
    return " ".join(word.text for word in words)


def _entry(number: int, decision: Decision, dpi: float | None, confidence: float | None) -> dict[str, Any]:
    # ``method`` is the record's field from before routing (text_layer, ocr, blank): readers of it keep working.
    method = Route.TEXT_LAYER.value if decision.route is Route.TEXT_LAYER_AND_IMAGES else decision.route.value
    return {
        "page": number,
        "method": method,
        "route": decision.route.value,
        "reason": decision.reason,
        "confidence": confidence,
        "dpi": round(dpi) if dpi else None,
    }


class PageReader:
    """Reads the open input's pages with ``decoder``, as ``settings`` say."""

    def __init__(self, decoder: Decoder, settings: OcrSettings):
        self.decoder = decoder
        self.settings = settings

    def read(self, index: int, until: float) -> PageRead:
        page = self.decoder.page(index, until)
        if isinstance(page, BlankPage):
            return PageRead(
                page.number, None, _entry(page.number, Decision(Route.BLANK, "no print on the page"), page.dpi, None), empty=True
            )
        if isinstance(page, ScannedPage):
            return self._ocr_frame(page)
        return self._layer_page(page, index, until)

    def _ocr_frame(self, frame: ScannedPage) -> PageRead:
        """An image file's frame: OCR is the only way to read it (the decoder takes one that says no dpi to be at the settings')."""
        height, width = frame.pixels.shape[:2]
        size = (width / frame.pixels_per_point, height / frame.pixels_per_point)
        return self._ocr_read(frame.number, frame, size, Decision(Route.OCR, "an image: no text layer"))

    def _ocr_read(self, number: int, scan: ScannedPage, size: tuple[float, float], decision: Decision) -> PageRead:
        dpi = scan.pixels_per_point * POINTS_PER_INCH
        try:
            reading = read_page(scan.pixels, dpi, scan.origin)
        except PageNotRead as exc:
            return PageRead(number, None, _entry(number, decision, scan.dpi, None), problem=f"page {number}: {exc}")
        words = clean_words(reading.words, self.settings.scripts)
        entry = {**_entry(number, decision, scan.dpi, reading.confidence), **_reading_flags(reading)}
        page_words = PageWords(number, size[0], size[1], words, Source.OCR)
        return PageRead(number, page_words, entry, empty=not words, flags=list(entry.get("flags", [])))

    def _layer_page(self, page: LayerPage, index: int, until: float) -> PageRead:
        words = clean_words(page.words, self.settings.scripts)
        layer_plausibility = plausibility(_text(words)) if words else None
        decision = first_decision(self.settings.mode, words, page.facts, layer_plausibility)
        size = (page.width, page.height)
        if decision.route is Route.TEXT_LAYER:
            return self._with_images(page, index, until, words, decision)
        scan = self.decoder.render(index, until)
        if isinstance(scan, BlankPage):
            if decision.compare:  # nothing drawn under the hidden layer: it is all there is
                return self._layer_read(page, words, Decision(Route.TEXT_LAYER, f"{decision.reason}: nothing to OCR under it"))
            return PageRead(
                page.number, None, _entry(page.number, Decision(Route.BLANK, "no print on the page"), scan.dpi, None), empty=True
            )
        read = self._ocr_read(page.number, scan, size, decision)
        if decision.compare and layer_plausibility is not None:
            ocr_words = list(read.words.words) if read.words else []
            verdict = judged(_quality(words), _quality(ocr_words), decision.reason)
            if verdict.route is Route.TEXT_LAYER:
                return self._layer_read(page, words, verdict)
            read.entry.update(route=verdict.route.value, reason=verdict.reason)
        return read

    def _layer_read(self, page: LayerPage, words: list[Word], decision: Decision, extra: list[Word] | None = None) -> PageRead:
        page_words = PageWords(page.number, page.width, page.height, [*words, *(extra or [])], Source.TEXT_LAYER, page.rules, page.images)
        return PageRead(page.number, page_words, _entry(page.number, decision, None, None))

    def _with_images(self, page: LayerPage, index: int, until: float, words: list[Word], decision: Decision) -> PageRead:
        """The layer, and an OCR of each image on the page that it leaves uncovered (a headline set as a picture)."""
        if self.settings.mode is not OcrMode.AUTO:
            return self._layer_read(page, words, decision)
        regions = uncovered_images(page.images, words, Box(0.0, 0.0, page.width, page.height))
        if len(regions) > MOST_REGIONS:
            whole = Decision(Route.OCR, f"{len(regions)} images the text layer leaves uncovered: the page OCR'd whole")
            scan = self.decoder.render(index, until)
            if isinstance(scan, BlankPage):
                return self._layer_read(page, words, decision)
            return self._ocr_read(page.number, scan, (page.width, page.height), whole)
        found: list[Word] = []
        for region in regions:
            scan = self.decoder.render(index, until, crop=region)
            if isinstance(scan, ScannedPage):
                try:
                    reading = read_page(scan.pixels, scan.pixels_per_point * POINTS_PER_INCH, scan.origin)
                except PageNotRead:
                    continue  # the layer still reads: an image that cannot be OCR'd costs the page nothing it had
                found += clean_words(reading.words, self.settings.scripts)
        if found:
            n = len(regions)
            decision = Decision(
                Route.TEXT_LAYER_AND_IMAGES, f"{decision.reason}; text read in {n} image{'s' if n > 1 else ''} it leaves uncovered"
            )
        return self._layer_read(page, words, decision, found)


def _quality(words: list[Word]) -> Quality:
    return Quality(plausibility(_text(words)) if words else 0.0, sum(len(word.text) for word in words))


def _reading_flags(reading: PageReading) -> dict[str, Any]:
    """The engine's flags for the page: low confidence, suspected handwriting."""
    flags = [name for name, on in (("low_confidence", reading.low_confidence), ("handwriting", reading.handwriting)) if on]
    return {"flags": flags} if flags else {}
