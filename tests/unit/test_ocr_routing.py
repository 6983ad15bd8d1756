"""Routing (s3wq.processors.ocr.routing): a page is read by what its layer holds, not by its length; each route says why."""

from __future__ import annotations

import pytest

from s3wq.processors.ocr.layout.model import Box, Word
from s3wq.processors.ocr.routing import LAYER_PLAUSIBLE, LayerFacts, Quality, Route, first_decision, judged, uncovered_images
from s3wq.processors.ocr.settings import OcrMode

BORN_DIGITAL = LayerFacts(visible_chars=2400, invisible_chars=0, ocr_font=False, scanned=False)
HIDDEN_OCR = LayerFacts(visible_chars=0, invisible_chars=2400, ocr_font=True, scanned=True)
STAMPED_SCAN = LayerFacts(visible_chars=12, invisible_chars=0, ocr_font=False, scanned=True)
PAGE = Box(0, 0, 612, 792)


def words(*boxes: Box) -> list[Word]:
    return [Word("word", box, 10.0) for box in boxes]


LINE = words(Box(72, 72, 300, 84))


@pytest.mark.parametrize("mode", list(OcrMode))
def test_a_page_with_no_layer_is_ocrd_in_every_mode(mode):
    decision = first_decision(mode, [], LayerFacts(0, 0, False, False), None)
    assert (decision.route, decision.reason) == (Route.OCR, "no text layer")


def test_an_earlier_ocr_layer_is_judged_against_an_ocr_of_the_page_however_long_it_is():
    decision = first_decision(OcrMode.AUTO, LINE, HIDDEN_OCR, 0.99)
    assert decision.route is Route.OCR and decision.compare
    assert "hidden OCR layer" in decision.reason


def test_a_stamp_over_a_scan_is_judged_too():
    decision = first_decision(OcrMode.AUTO, LINE, STAMPED_SCAN, 0.99)
    assert decision.compare and "text over a page image" in decision.reason


def test_a_visible_layer_that_does_not_read_as_text_is_replaced_by_ocr():
    decision = first_decision(OcrMode.AUTO, LINE, BORN_DIGITAL, LAYER_PLAUSIBLE - 0.2)
    assert decision.route is Route.OCR and not decision.compare
    assert "does not read as text (plausibility 0.40)" in decision.reason


def test_a_visible_layer_that_reads_as_text_is_kept():
    decision = first_decision(OcrMode.AUTO, LINE, BORN_DIGITAL, 0.95)
    assert decision.route is Route.TEXT_LAYER and "reads as text" in decision.reason


def test_force_ocrs_a_good_layer_and_text_layer_keeps_a_bad_one():
    assert first_decision(OcrMode.FORCE, LINE, BORN_DIGITAL, 0.99).route is Route.OCR
    assert first_decision(OcrMode.TEXT_LAYER, LINE, HIDDEN_OCR, 0.1).route is Route.TEXT_LAYER


@pytest.mark.parametrize(
    ("layer", "ocr", "route"),
    [(0.42, 0.91, Route.OCR), (0.90, 0.91, Route.TEXT_LAYER), (0.95, 0.60, Route.TEXT_LAYER)],
    ids=["ocr-reads-better", "tie-keeps-the-layer", "layer-reads-better"],
)
def test_judging_keeps_the_better_reading_and_the_layer_on_a_tie(layer, ocr, route):
    verdict = judged(Quality(layer, 2000), Quality(ocr, 2000), "a hidden OCR layer")
    assert verdict.route is route
    assert f"OCR {ocr:.2f}, layer {layer:.2f}" in verdict.reason


def test_a_stamp_that_reads_perfectly_loses_to_the_ocr_of_the_whole_page():
    verdict = judged(Quality(1.0, 12), Quality(0.9, 1500), "text over a page image")
    assert verdict.route is Route.OCR and "layer 0.01" in verdict.reason


def test_a_layer_holding_more_than_the_ocr_found_is_not_marked_down_for_it():
    assert judged(Quality(0.95, 3000), Quality(0.93, 1000), "a hidden OCR layer").route is Route.TEXT_LAYER


def test_an_image_the_layer_leaves_uncovered_is_read_and_a_covered_or_tiny_one_is_not():
    headline = Box(72, 40, 540, 110)
    logo = Box(20, 20, 34, 34)  # under IMAGE_SIDE_POINTS
    covered_figure = Box(72, 300, 300, 400)
    layer = words(Box(72, 300, 300, 400))  # text over the figure: its caption layer covers it
    assert uncovered_images([headline, logo, covered_figure], layer, PAGE) == [headline]


def test_an_image_reaching_past_the_page_is_clipped_to_it():
    (region,) = uncovered_images([Box(-50, 700, 700, 900)], [], PAGE)
    assert region == Box(0, 700, 612, 792)
