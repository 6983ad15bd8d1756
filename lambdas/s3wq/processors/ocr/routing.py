"""Which way each page is read, judged by what its text layer holds, not by how much of it there is.

A PDF page may carry a layer typed by its author (born digital), one an
earlier OCR tool hid over its scan (render mode 3, GlyphLessFont), a stamp
over a scan, garbage from a font without a Unicode map, or nothing. Its
length says none of that: a 57-character layer may sit beside a headline
set as an image, and a full page of layer may read "The i'lfinomedan faith".

So, in ``auto``:

* a layer that is an earlier OCR's (hidden, or over a page-sized image) is
  judged against an OCR of the page: the reading that reads better as text
  is kept, the layer on a tie (its boxes are the tool's own);
* a visible layer that does not read as text is replaced by an OCR of the page;
* a layer that reads as text is kept, and images on the page that it does
  not cover are OCR'd for the text set in them.

``force`` OCRs every page; ``text-layer`` takes any layer as it is. Each
page's record says which route it took and why (``Route``, ``reason``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from s3wq.processors.ocr.layout.model import Box, Word
from s3wq.processors.ocr.settings import OcrMode

# A layer whose plausibility (plausibility.py) is below this reads as garbage: replaced by OCR.
LAYER_PLAUSIBLE = 0.6
# An OCR reading wins over an earlier OCR's layer when it reads better by more than this.
OCR_BETTER_BY = 0.03
# An image is read for its text when it is at least this share of the page and this large in points
# (a logo or a rule drawn as an image is not), and the layer's words cover at most this share of it.
IMAGE_SHARE = 0.01
IMAGE_SIDE_POINTS = 24.0
IMAGE_COVERED = 0.1
# At most this many image regions are OCR'd on one page: a page tiled into more images is OCR'd whole.
MOST_REGIONS = 8


class Route(StrEnum):
    """How a page was read."""

    TEXT_LAYER = "text_layer"  # its layer, as it is
    TEXT_LAYER_AND_IMAGES = "text_layer+ocr"  # its layer, and OCR of images it does not cover
    OCR = "ocr"  # an OCR of the whole page
    BLANK = "blank"  # no print on it


@dataclass(frozen=True)
class LayerFacts:
    """What a page's text layer is: its visible and hidden characters, whether its fonts are an OCR tool's, and whether
    an image covers the page as a scanner's does."""

    visible_chars: int
    invisible_chars: int
    ocr_font: bool
    scanned: bool

    @property
    def chars(self) -> int:
        """The text layer's characters (not spaces), drawn or hidden."""
        return self.visible_chars + self.invisible_chars

    @property
    def earlier_ocr(self) -> bool:
        """The layer is an earlier OCR's: hidden text, an OCR tool's font, or any text over a page-sized image."""
        return self.chars > 0 and (self.ocr_font or self.scanned or self.invisible_chars * 2 >= self.chars)


@dataclass(frozen=True)
class Decision:
    """Which way to read a page first, and why; ``compare`` asks for an OCR to judge the layer against."""

    route: Route
    reason: str
    compare: bool = False


def first_decision(mode: OcrMode, words: Sequence[Word], facts: LayerFacts, layer_plausibility: float | None) -> Decision:
    """How to read a page from its layer alone (``layer_plausibility`` None: it has no words)."""
    if not words:
        return Decision(Route.OCR, "no text layer")
    if mode is OcrMode.FORCE:
        return Decision(Route.OCR, "OCR forced (mode force)")
    if mode is OcrMode.TEXT_LAYER:
        return Decision(Route.TEXT_LAYER, "text layer taken as it is (mode text-layer)")
    assert layer_plausibility is not None
    if facts.earlier_ocr:
        what = "a hidden OCR layer" if facts.invisible_chars or facts.ocr_font else "text over a page image"
        return Decision(Route.OCR, f"{what}: judged against an OCR of the page", compare=True)
    if layer_plausibility < LAYER_PLAUSIBLE:
        return Decision(Route.OCR, f"the text layer does not read as text (plausibility {layer_plausibility:.2f})")
    return Decision(Route.TEXT_LAYER, f"the text layer reads as text (plausibility {layer_plausibility:.2f})")


@dataclass(frozen=True)
class Quality:
    """How well a reading of a page reads: its plausibility (plausibility.py) and its characters, not spaces."""

    plausibility: float
    chars: int


def judged(layer: Quality, ocr: Quality, reason: str) -> Decision:
    """Between an earlier OCR's layer and an OCR of the page, the one that reads better; the layer on a tie.

    A layer is worth what it reads as, over the share of the page's print it
    holds: a stamp of 12 characters that reads perfectly is still not the
    page, and the OCR of the whole page wins over it.
    """
    coverage = min(1.0, layer.chars / ocr.chars) if ocr.chars else 1.0
    layer_score = layer.plausibility * coverage
    scores = f"OCR {ocr.plausibility:.2f}, layer {layer_score:.2f}"
    if ocr.plausibility > layer_score + OCR_BETTER_BY:
        return Decision(Route.OCR, f"{reason}: the OCR read better ({scores})")
    return Decision(Route.TEXT_LAYER, f"{reason}: the layer read as well ({scores})")


def uncovered_images(images: Sequence[Box], words: Sequence[Word], page: Box) -> list[Box]:
    """The images on ``page`` large enough to hold print that the layer's words leave (nearly) uncovered: read by OCR."""
    regions = []
    for image in images:
        clipped = Box(max(image.left, page.left), max(image.top, page.top), min(image.right, page.right), min(image.bottom, page.bottom))
        if clipped.width < IMAGE_SIDE_POINTS or clipped.height < IMAGE_SIDE_POINTS or clipped.area < IMAGE_SHARE * page.area:
            continue
        covered = sum(clipped.overlap(word.box) for word in words)
        if covered <= IMAGE_COVERED * clipped.area:
            regions.append(clipped)
    return regions
