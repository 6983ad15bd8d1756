"""The defects issue #29 found in ``ocr``, each on a document made to show it (documents.py), read as a worker reads it.

Each test failed on the processor before #29: a bad hidden layer taken as
text, a headline in an image lost, no way to force OCR, a page read in its
content stream's order, furniture in the body, a table as loose lines,
columns read straight across (a skewed scan's merged, a sidebar woven in),
and a record with no page offsets, Markdown or processor.
"""

from __future__ import annotations

import re

import pytest

from . import documents as known
from .conftest import once_per_session, run_in_ocr_venv


def _read(ocr_python, folder, names: list[str], **env: str) -> dict[str, dict]:
    paths = [str(folder / name) for name in names]
    run = run_in_ocr_venv(ocr_python, "run_group.py", str(folder / f"ws-{len(env)}"), *paths, timeout=600, **env)
    return {record["source"].rsplit("/", 1)[-1]: record for record in run["records"]}


AUTO = ["bad_layer.pdf", "good_layer.pdf", "headline_image.pdf", "sections.pdf", "furniture.pdf", "table.pdf", "layer.pdf"]
SCANS = ["columns.pdf", "skewed_columns.pdf", "sidebar.pdf"]


@pytest.fixture(scope="module")
def read(ocr_python, tmp_path_factory) -> dict[str, dict]:
    """Every document read once in the default mode, and layer.pdf again with S3WQ_OCR_MODE=force (as ``forced.pdf``)."""

    def make(folder):
        written = run_in_ocr_venv(ocr_python, "documents.py", str(folder))
        assert set(written) >= {*AUTO, *SCANS}
        records = _read(ocr_python, folder, AUTO + SCANS)
        records["forced.pdf"] = _read(ocr_python, folder, ["layer.pdf"], S3WQ_OCR_MODE="force")["layer.pdf"]
        return records

    return once_per_session(tmp_path_factory, "ocr-documents", make)


def flat(text: str | None) -> str:
    return " ".join((text or "").split())


def test_a_bad_hidden_ocr_layer_is_replaced_by_a_better_ocr_of_the_page(read):
    record = read["bad_layer.pdf"]
    (page,) = record["metadata"]["pages"]
    assert "The Mahomedan faith spread along the coast" in flat(record["text"])
    assert "i'lfinomedan" not in record["text"]
    assert (page["method"], page["route"]) == ("ocr", "ocr")
    assert "hidden OCR layer" in page["reason"] and "the OCR read better" in page["reason"]


def test_a_good_hidden_layer_is_judged_and_kept(read):
    record = read["good_layer.pdf"]
    (page,) = record["metadata"]["pages"]
    assert "The Mahomedan faith spread along the coast" in flat(record["text"])
    assert page["route"] == "text_layer" and "judged against an OCR of the page" in page["reason"]


def test_a_headline_set_in_an_image_beside_a_short_layer_is_read(read):
    record = read["headline_image.pdf"]
    (page,) = record["metadata"]["pages"]
    assert known.HEADLINE.lower() in flat(record["text"]).lower()
    assert known.UNDER_HEADLINE in flat(record["text"])
    assert page["route"] == "text_layer+ocr"
    assert flat(record["text"]).lower().index("harbour strike") < flat(record["text"]).index("Dockers voted")


def test_ocr_can_be_forced_on_a_page_with_a_good_layer(read):
    forced, layered = read["forced.pdf"], read["layer.pdf"]
    assert [page["route"] for page in forced["metadata"]["pages"]] == ["ocr", "ocr"]
    assert all("mode force" in page["reason"] for page in forced["metadata"]["pages"])
    assert [page["route"] for page in layered["metadata"]["pages"]] == ["text_layer", "text_layer"]
    assert known.BODY[0][0] in flat(forced["text"])
    assert forced["metadata"]["processor"]["settings"]["mode"] == "force"


def test_sections_come_out_in_the_order_they_are_printed_not_the_content_streams(read):
    text = flat(read["sections.pdf"]["text"])
    positions = [text.index(heading) for heading, _ in known.SECTIONS]
    assert positions == sorted(positions)


def test_running_headers_page_numbers_and_banners_leave_the_body_for_the_pages_furniture(read):
    record = read["furniture.pdf"]
    text = record["text"]
    assert known.JOURNAL not in text and "Downloaded from" not in text
    assert not re.search(r"(?m)^\s*[123]\s*$", text)  # no page number on a line of its own
    for lines in known.BODY:
        assert all(line in flat(text) for line in lines)
    for number, page in enumerate(record["metadata"]["pages"], start=1):
        furniture = {(item["kind"], flat(item["text"])) for item in page["furniture"]}
        assert ("header", known.JOURNAL) in furniture
        assert ("page_number", str(number)) in furniture
        assert any(kind in ("banner", "footer") and text_ == known.DOWNLOADED for kind, text_ in furniture)


def _rows(markdown: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in markdown.splitlines() if line.strip().startswith("|")]


def test_a_table_comes_out_as_a_markdown_table_with_its_rows_and_cells(read):
    record = read["table.pdf"]
    rows = [row for row in _rows(record["markdown"]) if not set("".join(row)) <= set("-: ")]
    assert rows == known.TABLE
    assert record["metadata"]["pages"][0]["tables"] == 1


@pytest.mark.parametrize("name", ["columns.pdf", "skewed_columns.pdf"])
def test_a_scan_in_two_columns_is_read_column_by_column(read, name):
    record = read[name]
    text = flat(record["text"])
    assert text.index("eastern quay") < text.index("Payments are due")
    assert not any("Monday" in line and "thirty" in line for line in record["text"].splitlines())


def test_a_sidebar_is_kept_apart_from_the_body_it_stands_beside(read):
    text = flat(read["sidebar.pdf"]["text"])
    body_start, body_end = text.index("The committee met"), text.index("section four of the agreement")
    for line in known.SIDEBAR[1:]:
        assert not body_start < text.index(line) < body_end, f"{line!r} woven into the body"


def test_the_record_has_per_page_text_offsets_markdown_and_its_processor(read):
    record = read["layer.pdf"]
    spans = record["attributes"]["pdf_page_numbers"]
    assert [page for _, _, page in spans] == [1, 2]
    first, second = (record["text"][start:end] for start, end, _ in spans)
    assert known.BODY[0][0] in flat(first) and known.BODY[1][0] in flat(second)
    assert known.BODY[1][0] not in first
    assert known.BODY[0][0] in record["markdown"]
    processor = record["metadata"]["processor"]
    assert processor["name"] == "ocr" and processor["version"] and processor["settings"]["scripts"] == ["latin"]
