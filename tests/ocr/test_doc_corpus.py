"""The document corpus (bench/doc_corpus.py) is what it claims: its tests are made from what the pages hold, and its traps trap.

Each PDF's own text layer, read by pypdf with no OCR, is scored on the
document's tests: a born-digital page's layer passes its passages and their
order (the tests come from what was drawn), but keeps its furniture and has
no tables; the earlier-OCR layer fails its passages; the ligature glyphs and
separately drawn accents fail the words they are in. Two builds from one
seed are the same.
"""

from __future__ import annotations

import pytest

from .conftest import once_per_session, run_in_ocr_venv


@pytest.fixture(scope="module")
def checked(ocr_python, tmp_path_factory) -> dict:
    return once_per_session(
        tmp_path_factory, "doc-corpus-check", lambda folder: run_in_ocr_venv(ocr_python, "corpus_check.py", str(folder))
    )


def rates_of(checked: dict, kind: str) -> dict[str, float]:
    (document,) = [d for d in checked["documents"].values() if d["kind"] == kind]
    return document["pass_rates"]


def test_a_born_digital_text_layer_passes_its_passages_and_their_order_but_keeps_its_furniture(checked):
    rates = rates_of(checked, "born-digital")
    assert rates["present"] == 1 and rates["order"] >= 0.9
    assert rates["absent"] == 0 and rates["table"] == 0


def test_an_earlier_ocr_layer_fails_most_of_its_passages(checked):
    assert rates_of(checked, "old-ocr-layer")["present"] < 0.3


def test_ligature_glyphs_and_split_accents_fail_the_words_they_are_in(checked):
    assert rates_of(checked, "ligatures-accents")["present"] < 0.2


def test_the_image_headline_is_not_in_the_text_layer_but_the_caption_is(checked):
    rates = rates_of(checked, "image-headline")
    assert 0 < rates["present"] < 0.5


def test_one_seed_builds_one_corpus(checked):
    assert checked["same_tests"]
    assert all(d["same_bytes"] in (True, None) for d in checked["documents"].values())
