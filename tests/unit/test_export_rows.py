"""The rows of ``s3wq export``: any record exports without loss, pages are their spans' slices, and a file is whole or absent."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3wq.errors import BadInput
from s3wq.ops.export import INPUT_COLUMNS, PAGE_COLUMNS, Per, export_rows, input_row, page_rows
from s3wq.ops.export_files import ExportFormat, format_of, output_file
from s3wq.store import LocalBackend, layout

GROUP = "c" * 40
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
# Records of any shape: the known fields, of the right type or not, among anything a user's processor writes.
_records = st.dictionaries(st.sampled_from(["id", "source", "text", "error", "metadata", "attributes", "x"]) | st.text(max_size=6), _json)


@given(_records)
def test_any_record_is_its_columns_and_extra_nothing_lost(record):
    row = input_row(GROUP, record)

    assert list(row) == list(INPUT_COLUMNS)
    rebuilt = dict(row["extra"])
    for name in ("id", "text", "error"):
        if row[name] is not None:
            rebuilt[name] = row[name]
    if "source" not in rebuilt and row["source"] is not None:
        rebuilt["source"] = row["source"]
    assert rebuilt == {k: v for k, v in record.items() if v is not None or k in rebuilt}
    json.dumps(row)  # a row is JSON as it is


@given(st.text(max_size=60), st.lists(st.integers(0, 60), max_size=6))
def test_the_pages_are_the_slices_of_the_text_by_their_spans(text, cuts):
    bounds = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    spans = [[start, end, number] for number, (start, end) in enumerate(itertools.pairwise(bounds), start=1)]
    record = {"id": "r", "source": "a.pdf", "text": text, "attributes": {"pdf_page_numbers": spans}}

    rows = page_rows(GROUP, record)

    if not spans:  # an empty text: one row, no page
        assert [(r["page"], r["text"]) for r in rows] == [(None, text)]
        return
    assert [r["page"] for r in rows] == [s[2] for s in spans]
    assert "".join(r["text"] for r in rows) == text
    assert all(r["text"] == text[s:e] for r, (s, e, _) in zip(rows, spans))
    assert all(list(r) == list(PAGE_COLUMNS) for r in rows)


def test_a_page_entry_gives_its_columns_and_keeps_the_rest():
    record = {
        "text": "ab",
        "attributes": {"pdf_page_numbers": [[0, 1, 1], [1, 2, 2]], "is_table": [True, False]},
        "metadata": {
            "Source-File": "s3://b/a.pdf",
            "total-fallback-pages": 1,
            "s3wq-processor": {"name": "auto", "version": "0.1.0"},
            "pages": [{"page": 1, "route": "vlm", "confidence": 1, "tokens": 9}, {"page": 2, "route": "ocr", "is_fallback": True}],
        },
    }

    first, second = page_rows(GROUP, record)

    assert (first["route"], first["confidence"], first["is_fallback"], first["extra"]) == (
        "vlm",
        1.0,
        False,
        {"tokens": 9, "attributes": {"is_table": True}},
    )
    assert (second["route"], second["is_fallback"], second["source"], second["processor"]) == ("ocr", True, "s3://b/a.pdf", "auto")


def test_the_format_is_the_suffix_or_the_flag(tmp_path):
    assert format_of(tmp_path / "a.PARQUET", None) is ExportFormat.PARQUET
    assert format_of(tmp_path / "a.parquet", "jsonl") is ExportFormat.JSONL
    with pytest.raises(BadInput, match=r"\.jsonl or \.parquet"):
        format_of(tmp_path / "a.csv", None)


def test_an_export_interrupted_leaves_no_file_half_written(tmp_path):
    backend = LocalBackend(str(tmp_path / "ws"))
    for index in range(3):
        backend.write(layout.result_key(f"{index:040x}"), b"".join(json.dumps({"id": f"{index}:{n}"}).encode() + b"\n" for n in range(10)))
    out = tmp_path / "out.jsonl"
    written = []

    def write_then_stop(row):
        written.append(row)
        if len(written) == 15:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), output_file(out, ExportFormat.JSONL, Per.INPUT, force=False) as writer:
        export_rows(backend, Per.INPUT, lambda row: (writer.write(row), write_then_stop(row)))

    assert len(written) == 15
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]  # no out.jsonl, no .out.jsonl.*.partial
