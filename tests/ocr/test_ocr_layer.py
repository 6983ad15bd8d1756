"""A PDF page's layer as the decoder gives it (layers.py, in the OCR venv): words and their boxes, split accents and
ligatures, a hidden OCR layer over a scan, a drawn table's rules, rotated and cropped pages, a crop rendered, and the
decoder's speed on a dense page."""

from __future__ import annotations

import itertools

import pytest

from .conftest import once_per_session, run_in_ocr_venv

# The least the decoder must do of a dense page's layer (~3,000 characters) a core-second, that the whole text-layer
# path (layout after it) may do 50.
DECODER_PAGES_PER_S = 50
# Rendered ink lies within the words' boxes, but for antialiasing and a glyph's side bearings.
SLACK = 2.0


@pytest.fixture(scope="session")
def layers(ocr_python, tmp_path_factory) -> dict:
    return once_per_session(tmp_path_factory, "ocr-layers", lambda folder: run_in_ocr_venv(ocr_python, "layers.py", str(folder)))


def around(words: list[list]) -> list[float]:
    return [min(w[1] for w in words), min(w[2] for w in words), max(w[3] for w in words), max(w[4] for w in words)]


def assert_inside(inner: list[float], outer: list[float]) -> None:
    left, top, right, bottom = outer
    assert inner[0] >= left - SLACK and inner[1] >= top - SLACK and inner[2] <= right + SLACK and inner[3] <= bottom + SLACK, (inner, outer)


def test_a_text_layers_words_come_with_their_boxes_in_points_from_the_top_left(layers):
    page = layers["text.pdf"]
    words = page["words"]

    assert [w[0] for w in words] == "Minutes of the board meeting Approved by the committee".split()
    assert page["text"] == "Minutes of the board meeting\nApproved by the committee"
    # make_pdf sets 12 pt Helvetica from x=72 on a baseline 720 pt up a 792 pt page: 72 pt from the top, the next 14 below.
    first, second_line = words[0], words[5]
    assert first[1] == 72 and first[2] < 72 < first[4] and first[5] == 12 and first[6] is False
    assert second_line[2] - first[2] == pytest.approx(14, abs=0.01)
    assert all(a[3] < b[1] for a, b in itertools.pairwise(words[:5]))  # left to right, apart
    assert_inside(page["ink"], around(words))
    assert (page["width"], page["height"]) == (612, 792)


def test_split_accents_are_joined_to_their_letters_and_ligatures_spelt_out(layers):
    words = [w[0] for w in layers["accents.pdf"]["words"]]

    # A tilde and an acute drawn over letters (after them, or before as TeX does); an acute beside letters stays.
    assert words == ["Miñác", "office", "café", "it\u00b4s"]
    assert layers["accents.pdf"]["facts"]["visible_chars"] == len("".join(words))


def test_a_word_set_in_pieces_is_one_word_unless_a_gap_of_a_fifth_of_an_em_parts_them(layers):
    words = layers["fragments.pdf"]["words"]

    assert [w[0] for w in words] == ["Hello", "World", "Wor", "ld"]
    assert words[0][1] == 72 and words[0][3] == pytest.approx(100.02, abs=0.01)  # the box around both pieces


def test_a_hidden_ocr_layer_over_a_scan_says_so_in_its_facts(layers):
    page = layers["hidden.pdf"]

    assert page["facts"] == {"visible_chars": 0, "invisible_chars": 31, "ocr_font": True, "scanned": True}
    assert page["text"] == "Deposition exhibit of the plaintiff"
    assert page["images"] == [[0, 0, 612, 792]]
    assert "ink" not in page  # one grey over the page: a blank render


def test_the_ruling_lines_of_a_drawn_table_are_its_rules(layers):
    rules = {tuple(rule) for rule in layers["table.pdf"]["rules"]}

    # Lines of 1 pt at y = 600, 560, 520 (192, 232, 272 from the top) and x = 72, 222, 372; a stroked cell's four edges;
    # a filled rectangle 0.8 pt high; not the diagonal.
    horizontal = {(71, 191, 373, 193), (71, 231, 373, 233), (71, 271, 373, 273)}
    vertical = {(71.5, 191.5, 72.5, 272.5), (221.5, 191.5, 222.5, 272.5), (371.5, 191.5, 372.5, 272.5)}
    cell = {(399.5, 291.5, 500.5, 292.5), (499.5, 251.5, 500.5, 292.5), (399.5, 251.5, 500.5, 252.5), (399.5, 251.5, 400.5, 292.5)}
    assert rules == horizontal | vertical | cell | {(72, 311.2, 372, 312)}
    assert layers["table.pdf"]["text"] == "Item Price\nLamp 12"


@pytest.mark.parametrize(("name", "size"), [("rotated.pdf", (792, 612)), ("cropped.pdf", (400, 500))])
def test_a_rotated_or_cropped_pages_words_are_where_its_render_draws_them(layers, name, size):
    page = layers[name]

    assert (page["width"], page["height"]) == size
    assert page["render"]["shape"] == [size[1], size[0]]  # at 72 dpi: a pixel a point
    assert [w[0] for w in page["words"]] == ["Rotated", "page"]
    words = around(page["words"])
    assert_inside(page["ink"], words)
    # The ink fills the words' boxes but for the font's ascent and descent.
    ink = page["ink"]
    assert (ink[2] - ink[0]) * (ink[3] - ink[1]) >= 0.5 * (words[2] - words[0]) * (words[3] - words[1])


def test_a_crop_renders_to_the_crops_size_and_maps_back_to_the_page(layers):
    crop = layers["crop"]
    text_words = layers["text.pdf"]["words"]

    assert crop["shape"] == [60, 200] and crop["origin"] == [100, 40]  # Box(100, 40, 300, 100) at 72 dpi
    inside = [w for w in text_words if w[3] > 100 and w[1] < 300 and w[4] > 40 and w[2] < 100]
    expected = around(inside)
    assert_inside(crop["ink"], [max(expected[0], 100), expected[1], min(expected[2], 300), expected[3]])
    assert crop["ink"][0] == pytest.approx(100, abs=SLACK)  # "Minutes" runs across the crop's left edge


def test_the_decoder_reads_a_dense_pages_layer_fast_enough(layers):
    assert layers["speed"]["decoder_pages_per_s"] >= DECODER_PAGES_PER_S, layers["speed"]
