"""The ocr processor on generated inputs, run in the OCR venv: text layers exact, scans OCR'd within a CER, bad inputs counted.

One group holds every input (scans.py draws them), so the engine loads once
and the whole module OCRs nine short pages and two letter pages.
"""

from __future__ import annotations

import pytest

from .conftest import once_per_session, run_in_ocr_venv

# Clean scans drawn at 200 dpi in DejaVu Sans: the target for clean pages is CER <= 2 %;
# a little slack over it for the JPEG artefacts of page.jpg.
MAX_CER = 0.05


def levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i]
        for j, y in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def cer(known: list[list[str]], text: str) -> float:
    reference = " ".join(" ".join(line for page in known for line in page).split())
    return levenshtein(reference, " ".join(text.split())) / len(reference)


@pytest.fixture(scope="session")
def run(ocr_python, scans, tmp_path_factory) -> dict:
    folder, known = scans
    result = once_per_session(
        tmp_path_factory,
        "ocr-group",
        lambda workspace: run_in_ocr_venv(ocr_python, "run_group.py", str(workspace), *(str(folder / name) for name in known)),
    )
    result["by_name"] = {record["source"].rsplit("/", 1)[-1]: record for record in result["records"]}
    result["known"] = known
    return result


@pytest.mark.parametrize("name", ["scan.pdf", "page.png", "page.jpg", "fax.tiff", "mixed.pdf", "columns.png", "stamped.pdf", "rotated.jpg"])
def test_a_scanned_page_is_read_within_the_cer_target(run, name):
    record = run["by_name"][name]

    assert "error" not in record
    assert cer(run["known"][name], record["text"]) <= MAX_CER, record["text"]


@pytest.mark.parametrize("name", ["fax.tiff", "columns.png", "rotated.jpg"])
def test_pages_are_read_in_order_and_every_line_in_print_order(run, name):
    text = run["by_name"][name]["text"]
    # Every known line comes out, in the order printed: page 1 before page 2, the left column before the right, and a
    # photo turned upright as its EXIF says. Lines of one paragraph are joined into it (layout), so the words are compared.
    lines = [line for page in run["known"][name] for line in page]
    assert " ".join(text.split()) == " ".join(lines)


def test_each_page_says_how_it_was_read(run):
    pages = {name: run["by_name"][name]["metadata"]["pages"] for name in ("scan.pdf", "text.pdf", "mixed.pdf", "fax.tiff", "page.png")}

    assert [p["method"] for p in pages["mixed.pdf"]] == ["text_layer", "ocr"]
    assert [p["method"] for p in pages["text.pdf"]] == ["text_layer", "text_layer"]
    # A scan whose text layer is only a Bates number is OCR'd: its body is read, and the stamp with it.
    assert [p["method"] for p in run["by_name"]["stamped.pdf"]["metadata"]["pages"]] == ["ocr"]
    # A searchable scan's text layer (its whole print) is an earlier OCR's: judged against an OCR of the page, the better kept.
    (searchable,) = run["by_name"]["searchable.pdf"]["metadata"]["pages"]
    assert "judged against an OCR of the page" in searchable["reason"]
    # (This file's layer is drawn visibly beside the scan's print, so an OCR of the page reads both.)
    assert " ".join(run["known"]["searchable.pdf"][0]) in " ".join(run["by_name"]["searchable.pdf"]["text"].split())
    assert [p["page"] for p in pages["fax.tiff"]] == [1, 2]
    # A page with no print on it is found so before the engine, which would take a second to find nothing.
    assert [(p["method"], p["dpi"]) for p in run["by_name"]["blank.pdf"]["metadata"]["pages"]] == [("blank", 200)]
    for page in (p for listed in pages.values() for p in listed):
        assert page["seconds"] >= 0
        if page["method"] == "ocr":
            assert page["dpi"] == 200  # PDFs rendered at the default dpi; the images were saved at 200 dpi
            assert 0.8 <= page["confidence"] <= 1.0
        else:
            assert page["dpi"] is None and page["confidence"] is None


def test_a_text_layer_is_taken_exactly_as_it_is(run):
    record = run["by_name"]["text.pdf"]

    assert " ".join(record["text"].split()) == " ".join(line for page in run["known"]["text.pdf"] for line in page)
    assert record["metadata"]["content_type"] == "application/pdf"


def test_records_keep_the_text_processors_shape_one_per_input_in_order(run):
    names = list(run["known"])
    assert [r["source"].rsplit("/", 1)[-1] for r in run["records"]] == names
    for position, record in enumerate(run["records"]):
        group_hash, index = record["id"].split(":")
        assert len(group_hash) == 40 and int(index) == position
        assert {"bytes", "sha256", "content_type", "pages"} <= record["metadata"].keys()
    assert run["by_name"]["fax.tiff"]["metadata"]["content_type"] == "image/tiff"


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("encrypted.pdf", "encrypted PDF (password-protected)"),
        ("corrupt.pdf", "not a readable PDF"),
        ("corrupt.png", "page 1 of the image cannot be decoded"),
        ("blank.pdf", "OCR found no text on page 1 of 1"),
        ("strip.tiff", "page 1: OCR failed: ResizeImgError"),
        (
            "huge.png",
            "page 1 is 9000x9000 pixels (81000000), more than the 80000000 that may be decoded (5 x S3WQ_OCR_MAX_PIXELS=16000000)",
        ),
        (
            "huge-image.pdf",
            "page 1 holds an image of 9000x9000 pixels (81000000), more than the 80000000 that may be decoded "
            "(5 x S3WQ_OCR_MAX_PIXELS=16000000)",
        ),
    ],
)
def test_an_input_that_gives_no_text_is_an_input_error_named_in_its_record(run, name, error):
    record = run["by_name"][name]

    assert record["error"].startswith(error), record["error"]
    assert "\n" not in record["error"]
    assert {"path": record["source"], "error": record["error"]} in run["input_errors"]


def test_only_the_inputs_that_gave_no_text_are_counted_as_input_errors(run):
    bad = {"encrypted.pdf", "corrupt.pdf", "corrupt.png", "blank.pdf", "strip.tiff", "huge.png", "huge-image.pdf"}
    assert run["input_error_count"] == len(bad)
    assert {e["path"].rsplit("/", 1)[-1] for e in run["input_errors"]} == bad


def test_a_page_the_engine_fails_on_is_that_pages_error_and_the_rest_is_read(run):
    # RapidOCR raises on a 4000x10 strip (its short side rounds to 0 at 1280 px): the TIFF's next page, and the group, are still read.
    record = run["by_name"]["strip.tiff"]

    assert [p["page"] for p in record["metadata"]["pages"]] == [1, 2]
    assert cer(run["known"]["strip.tiff"], record["text"]) <= MAX_CER, record["text"]


def test_a_frame_far_past_the_pixel_cap_is_refused_from_its_header_never_decoded(run):
    record = run["by_name"]["huge.png"]

    assert record["text"] is None and record["metadata"]["pages"] == []  # no page reached the engine
    assert record["metadata"]["bytes"] < 100_000  # 81 Mpx in a few KB: what a decode would have paid for


def test_a_text_file_beside_the_scans_is_taken_as_it_is_with_no_pages(run):
    record = run["by_name"]["note.txt"]

    assert "error" not in record
    assert record["text"].splitlines() == run["known"]["note.txt"][0]
    assert record["metadata"]["pages"] == [] and record["metadata"]["content_type"] == "text/plain"
