"""read_page's words: boxes in points, spacing from the ink, no stray CJK, garbage lines read again, and its flags, on drawn pages."""

from __future__ import annotations

import pytest

from s3wq.processors.ocr.plausibility import plausibility

from .conftest import once_per_session, run_in_ocr_venv

POINTS_PER_PIXEL = 72 / 200  # engine_pages.py draws at 200 dpi


@pytest.fixture(scope="module")
def read(ocr_python, tmp_path_factory) -> dict:
    """What the engine read on each page of engine_pages.py (first readings, read_page's readings)."""
    return once_per_session(tmp_path_factory, "engine-pages", lambda _: run_in_ocr_venv(ocr_python, "engine_pages.py", timeout=600))


def _texts(reading: dict) -> list[str]:
    return [w["text"] for w in reading["words"]]


def test_word_boxes_are_in_points_from_the_page_origin(read):
    plain, shifted = read["split"]["read"], read["origin"]
    first = plain["words"][0]
    # "The" is drawn from x = 150 px at 200 dpi: 54 pt; its line box holds 12 pt print with its ascenders and descenders.
    assert first["text"] == "The"
    assert first["box"][0] == pytest.approx(150 * POINTS_PER_PIXEL, abs=2)
    assert 12 <= first["size"] <= 18
    assert first["size"] == pytest.approx(first["box"][3] - first["box"][1], abs=0.01)
    assert 0.9 <= first["confidence"] <= 1
    for a, b in zip(plain["words"], shifted["words"], strict=True):
        assert b["box"] == pytest.approx([a["box"][0] + 36, a["box"][1] + 500, a["box"][2] + 36, a["box"][3] + 500], abs=0.01)
    lefts = [w["box"][0] for w in plain["words"]]
    assert lefts == sorted(lefts) and all(w["box"][0] < w["box"][2] for w in plain["words"])


def test_a_word_split_inside_is_joined(read):
    assert "m ajor" in read["split"]["first"][0] and "becam e" in read["split"]["first"][0]  # what the engine reads

    assert read["split"]["read"]["lines"] == [read["known"]["split"]]
    assert _texts(read["split"]["read"]) == read["known"]["split"].split()


def test_words_run_together_are_split_where_the_ink_shows_a_word_gap(read):
    assert "Apriltimber" in read["joined"]["first"][0] and "barrelstreasurer" in read["joined"]["first"][0]

    assert read["joined"]["read"]["lines"] == [read["known"]["joined"]]
    words = _texts(read["joined"]["read"])
    assert words == read["known"]["joined"].split()


def test_spacing_leaves_clean_and_grainy_print_as_the_engine_read_it(read):
    for reading in [read["letter"], *read["letter_degraded"]]:
        # Where the engine's first reading spaced the words right, so does read_page: nothing joined or split that should not be.
        for first, line, printed in zip(reading["first"], reading["lines"], read["known"]["letter"], strict=True):
            if len(first.split()) == len(printed.split()):
                assert len(line.split()) == len(printed.split()), (first, line)


def test_a_stray_cjk_character_is_dropped(read):
    assert read["speck"]["first"] == ["The office is open 米 on Monday"]  # RapidOCR's model reads the speck as "米"

    assert read["speck"]["read"]["lines"] == [read["known"]["speck"]]
    assert _texts(read["speck"]["read"]) == read["known"]["speck"].split()
    for reading in [read["letter"], *read["handwritten"], *read["letter_severe"]]:
        assert not any(0x2E80 <= ord(c) <= 0x9FFF for w in reading["words"] for c in w["text"])


def test_a_line_read_as_garbage_is_read_again_and_read_well(read):
    first = read["garbled"]["first"]
    assert first[0] != read["known"]["garbled"][0] and plausibility(first[0]) < 0.7  # the engine's first reading: "lnv    - ry"

    reading = read["garbled"]["read"]
    assert reading["lines"] == read["known"]["garbled"]
    assert [line["reread"] for line in reading["read_lines"]] == [True, False]
    assert reading["read_lines"][0]["score"] > 0.95


def test_a_pseudo_handwritten_page_is_flagged_and_print_is_not(read):
    for reading in read["handwritten"]:
        assert reading["handwriting"], reading["confidence"]
    for reading in [read["letter"], *read["letter_degraded"]]:
        assert not reading["handwriting"] and not reading["low_confidence"], reading["confidence"]
        assert reading["confidence"] > 0.95
    # A fax of a photocopy reads poorly (low confidence), but its print stands evenly: no handwriting.
    for reading in read["letter_severe"]:
        assert reading["low_confidence"] and not reading["handwriting"], (reading["confidence"], reading["unevenness"])
