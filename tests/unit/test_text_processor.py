"""The built-in ``text`` processor on real files: one JSON line per input, in order; a bad input is an error record, never a failed group."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import time
from pathlib import Path

import pytest

from s3wq.config import WorkerSettings
from s3wq.dev.samples import make_pdf
from s3wq.index import WorkIndex
from s3wq.model import Group
from s3wq.ops.problems import workspace_problems
from s3wq.processors import ProcessorContext, text
from s3wq.processors.builtins import processor_account
from s3wq.store import layout
from s3wq.worker import Worker

PDF_PAGES = [["Invoice 2024-001", "Total due: 42 EUR (net)"], ["Page two says hello"]]
UNICODE_TEXT = "Grüße aus Köln — naïve café, 東京, ✓\nsecond line\n"
# Who made a text record: s3wq's text processor, at the version installed (as the ocr record names itself).
TEXT_ACCOUNT = {"name": "text", "version": importlib.metadata.version("s3wq")}
PNG_BYTES = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"


def group_of(paths: list[str]) -> Group:
    return Group(layout.group_hash(paths), tuple(paths))


def run_text(backend, paths: list[str]) -> tuple[Group, list[dict]]:
    """Run the processor on one group, as a worker would, and read back the records it wrote."""
    group = group_of(paths)
    ctx = ProcessorContext(worker_id="w-test", attempt=1, deadline=time.time() + 60, group=group, backend=backend)
    text(group, ctx)
    return group, read_records(backend, group)


def read_records(backend, group: Group) -> list[dict]:
    body = backend.read(layout.result_key(group.hash)).body.decode("utf-8")
    assert body.endswith("\n")
    return [json.loads(line) for line in body.splitlines()]


@pytest.fixture
def inputs(tmp_path):
    """Write named inputs under tmp_path and return their paths, in the order given."""

    def write(**files: bytes) -> list[str]:
        paths = []
        for name, data in files.items():
            path = tmp_path / "inputs" / name.replace("_", ".", 1)
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data)
            paths.append(str(path))
        return paths

    return write


def test_a_pdf_becomes_its_text_with_page_count_size_and_digest(local_backend, inputs):
    data = make_pdf(PDF_PAGES)
    [path] = inputs(scan_pdf=data)

    group, [record] = run_text(local_backend, [path])

    assert "error" not in record
    assert record["id"] == f"{group.hash}:0"
    assert record["source"] == path
    for line in PDF_PAGES[0] + PDF_PAGES[1]:
        assert line in record["text"]
    # Page one's lines come before page two's.
    assert record["text"].index(PDF_PAGES[0][1]) < record["text"].index(PDF_PAGES[1][0])
    assert record["metadata"] == {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "content_type": "application/pdf",
        "pages": 2,
        "processor": TEXT_ACCOUNT,
    }


def test_a_utf8_text_file_is_kept_exactly_and_written_unescaped(local_backend, inputs):
    data = UNICODE_TEXT.encode("utf-8")
    [path] = inputs(notes_txt=data)

    group, [record] = run_text(local_backend, [path])

    assert "error" not in record
    assert record["text"] == UNICODE_TEXT
    assert record["metadata"] == {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "content_type": "text/plain",
        "pages": None,
        "processor": TEXT_ACCOUNT,
    }
    # The result object is UTF-8 JSON, not \\u escapes.
    assert "Grüße aus Köln" in local_backend.read(layout.result_key(group.hash)).body.decode("utf-8")


def test_a_text_file_that_is_not_utf8_is_an_error_record(local_backend, inputs):
    [path] = inputs(latin1_txt="Grüße".encode("latin-1"))

    _, [record] = run_text(local_backend, [path])

    assert record["text"] is None
    assert "not UTF-8" in record["error"]
    assert record["metadata"]["content_type"] == "text/plain"


def test_a_missing_input_is_an_error_record(local_backend, tmp_path):
    path = str(tmp_path / "inputs" / "gone.pdf")

    _, [record] = run_text(local_backend, [path])

    assert record["source"] == path
    assert record["text"] is None
    assert record["metadata"] == {"processor": TEXT_ACCOUNT}
    assert "does not exist" in record["error"]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"%PDF-1.4 garbage", id="garbage-after-header"),
        pytest.param(make_pdf(PDF_PAGES)[: len(make_pdf(PDF_PAGES)) // 2], id="truncated"),
    ],
)
def test_a_corrupt_pdf_is_an_error_record_with_its_metadata(local_backend, inputs, data):
    [path] = inputs(broken_pdf=data)

    _, [record] = run_text(local_backend, [path])

    assert record["text"] is None
    assert "not a readable PDF" in record["error"]
    assert record["metadata"] == {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "content_type": "application/pdf",
        "pages": None,
        "processor": TEXT_ACCOUNT,
    }


def test_an_unsupported_binary_is_an_error_record(local_backend, inputs):
    [path] = inputs(pixel_png=PNG_BYTES)

    _, [record] = run_text(local_backend, [path])

    assert record["text"] is None
    # An image is the ocr processor's: the error says so, with the flag that runs it.
    assert record["error"].startswith("unsupported content type image/png: ")
    assert "use the ocr processor for images (--processor ocr; -c processor=ocr on Lambda)" in record["error"]
    assert record["metadata"]["content_type"] == "image/png"
    assert record["metadata"]["bytes"] == len(PNG_BYTES)


def test_every_text_record_names_its_processor_and_version(local_backend, inputs, tmp_path):
    paths = inputs(a_txt=b"plain", b_jpg=b"\xff\xd8\xff\xe0 not much of a photo")
    _, records = run_text(local_backend, [*paths, str(tmp_path / "inputs" / "gone.txt")])

    assert [record["metadata"]["processor"] for record in records] == [TEXT_ACCOUNT] * 3
    assert processor_account("text") == TEXT_ACCOUNT
    assert "unsupported content type image/jpeg: " in records[1]["error"] and "--processor ocr" in records[1]["error"]


def test_a_worker_completes_a_group_of_good_and_bad_inputs_with_one_line_per_input_in_order(local_backend, inputs, tmp_path):
    paths = inputs(a_pdf=make_pdf(PDF_PAGES), b_txt=UNICODE_TEXT.encode("utf-8"), d_pdf=b"%PDF-1.4 garbage", e_png=PNG_BYTES)
    paths.insert(2, str(tmp_path / "inputs" / "c-missing.pdf"))
    WorkIndex(local_backend).populate(paths, group_size=len(paths))
    [group] = WorkIndex(local_backend).iter_groups()

    report = Worker(local_backend, text, WorkerSettings(time_limit=60, max_attempts=1), worker_id="w-text").run()

    assert (report.processed, report.failed, report.stopped_reason) == (1, 0, "queue_empty")
    assert local_backend.exists(layout.done_key(group.hash))
    assert list(local_backend.list_keys("failed_flags/")) == []
    assert list(local_backend.list_keys("worker_locks/")) == []
    assert list(local_backend.list_keys("results/")) == [f"results/output_{group.hash}.jsonl"]
    records = read_records(local_backend, group)
    assert [r["source"] for r in records] == list(group.paths)
    assert [r["id"] for r in records] == [f"{group.hash}:{i}" for i in range(len(paths))]
    errors = {Path(r["source"]).name: "error" in r for r in records}
    assert errors == {"a.pdf": False, "b.txt": False, "c-missing.pdf": True, "d.pdf": True, "e.png": True}


# --- a page with no text layer (a scan) is an input error, not an empty success -------------------------------


def run_text_counting(backend, paths: list[str]) -> tuple[ProcessorContext, list[dict]]:
    group = group_of(paths)
    ctx = ProcessorContext(worker_id="w-test", attempt=1, deadline=time.time() + 60, group=group, backend=backend)
    text(group, ctx)
    return ctx, read_records(backend, group)


def test_a_pdf_whose_page_has_no_text_layer_is_an_input_error_naming_the_page(local_backend, inputs):
    data = make_pdf([[]])  # a page with no text, as a scan's page is to a text extractor
    [path] = inputs(scan_pdf=data)

    ctx, [record] = run_text_counting(local_backend, [path])

    assert record["text"] == ""
    assert record["error"].startswith("no text layer on page 1 of 1")
    assert record["metadata"]["pages"] == 1
    assert ctx.input_error_count == 1
    assert ctx.input_errors == [{"path": path, "error": record["error"]}]


def test_a_mixed_pdf_keeps_the_text_of_its_other_pages_and_names_the_blank_ones(local_backend, inputs):
    [path] = inputs(mixed_pdf=make_pdf([PDF_PAGES[0], [], PDF_PAGES[1], ["   "]]))

    ctx, [record] = run_text_counting(local_backend, [path])

    for line in PDF_PAGES[0] + PDF_PAGES[1]:
        assert line in record["text"]
    assert record["error"].startswith("no text layer on pages 2, 4 of 4")
    assert ctx.input_error_count == 1


def test_a_long_scan_names_its_first_blank_pages_in_one_short_line(local_backend, inputs):
    [path] = inputs(long_pdf=make_pdf([[]] * 40))

    _, [record] = run_text_counting(local_backend, [path])

    assert record["error"].startswith("no text layer on pages 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... of 40")
    assert "\n" not in record["error"] and len(record["error"]) < 200


def test_a_worker_counts_a_scan_the_text_processor_cannot_read(local_backend, inputs):
    paths = inputs(a_pdf=make_pdf(PDF_PAGES), scan_pdf=make_pdf([[]]))
    WorkIndex(local_backend).populate(paths, group_size=len(paths))
    [group] = WorkIndex(local_backend).iter_groups()

    report = Worker(local_backend, text, WorkerSettings(time_limit=60, max_attempts=1), worker_id="w-text").run()

    assert (report.processed, report.input_errors, report.failed) == (1, 1, 0)
    done = json.loads(local_backend.read(layout.done_key(group.hash)).body)
    assert done["input_errors"] == 1
    assert workspace_problems(local_backend)["input_error_groups"] == 1
