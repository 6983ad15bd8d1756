"""``s3wq export`` as a user runs it: a workspace's results into one JSON Lines or Parquet file, on S3 over HTTP and local.

Parquet needs pyarrow, which .venv has not: bench/export_deps.py installs the ``parquet`` extra's pin into a folder of
its own, and the commands that need it run with that folder on their PYTHONPATH (a failed install fails these tests,
never skips them). Without it, the test of the missing extra holds pyarrow unimportable itself.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO_ROOT, run_cli

from s3wq.cli import main
from s3wq.dev.samples import make_pdf
from s3wq.processors.vlm.answer import PageAnswer
from s3wq.processors.vlm.dolma import DolmaPage, dolma_document
from s3wq.store import LocalBackend, S3Backend, layout

A, B, C = "a" * 40, "b" * 40, "c" * 40
# An ocr record as docs/processors.md shows one: its page spans, and each page's entry.
OCR_RECORD = {
    "id": f"{A}:0",
    "source": "/in/report.pdf",
    "text": "Page one.\nPage two!",
    "markdown": "Page one.\n\nPage two!",
    "attributes": {"pdf_page_numbers": [[0, 10, 1], [10, 19, 2]]},
    "metadata": {
        "bytes": 1234,
        "processor": {"name": "ocr", "version": "0.1.0", "engine": "rapidocr 3.10.0"},
        "pages": [
            {"page": 1, "method": "text_layer", "route": "text_layer", "reason": "the text layer reads as text", "confidence": None},
            {
                "page": 2,
                "method": "ocr",
                "route": "ocr",
                "reason": "no text layer",
                "confidence": 0.93,
                "dpi": 200,
                "flags": ["low_confidence"],
            },
        ],
    },
}


def _answer(text: str) -> PageAnswer:
    return PageAnswer(
        primary_language="en", is_rotation_valid=True, rotation_correction=0, is_table=False, is_diagram=False, natural_text=text
    )


# olmocr's own pipeline's document (no s3wq field: held to olmocr's build_dolma_document by tests/ocr/test_vlm_olmocr.py).
OLMOCR_DOCUMENT = dolma_document(
    "s3://pdfs/deck.pdf", [DolmaPage(1, _answer("Slide one")), DolmaPage(2, _answer("Slide two"))], today=datetime.date(2026, 1, 2)
)


@pytest.fixture(scope="session")
def pyarrow_dir() -> Path:
    """The folder holding the parquet extra's pyarrow (bench/export_deps.py installs it once)."""
    done = subprocess.run([sys.executable, str(REPO_ROOT / "bench" / "export_deps.py")], capture_output=True, text=True, timeout=960)
    if done.returncode != 0:
        pytest.fail(done.stderr.strip() or "bench/export_deps.py failed", pytrace=False)
    return Path(done.stdout.strip())


def export(*args: str, pyarrow: Path | None = None) -> subprocess.CompletedProcess:
    env = os.environ.copy()
    if pyarrow is not None:
        env["PYTHONPATH"] = os.pathsep.join([env.get("PYTHONPATH", ""), str(pyarrow)])
    return subprocess.run([sys.executable, "-m", "s3wq", "export", *args], capture_output=True, text=True, timeout=120, env=env)


def read_parquet(path: Path, pyarrow: Path) -> dict:
    """The file's columns (name: type), its row groups and its rows, read by pyarrow in a child process."""
    script = (
        "import json, sys, pyarrow.parquet as pq\n"
        "f = pq.ParquetFile(sys.argv[1])\n"
        "print(json.dumps({'columns': {x.name: str(x.type) for x in f.schema_arrow}, 'row_groups': f.num_row_groups,"
        " 'rows': f.read().to_pylist()}))"
    )
    env = {**os.environ, "PYTHONPATH": str(pyarrow)}
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60, env=env, check=True)
    return json.loads(done.stdout)


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_results(backend, results: dict[str, list]) -> None:
    for hash_, records in results.items():
        backend.write(layout.result_key(hash_), "".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in records).encode())


def test_a_text_run_on_s3_exports_a_row_per_input(s3_client, bucket, s3_workspace, tmp_path):
    s3_client.put_object(Bucket=bucket, Key="in/a.txt", Body=b"alpha")
    s3_client.put_object(Bucket=bucket, Key="in/b.pdf", Body=make_pdf([["Beta one"], ["Beta two"]]))
    for command in (("populate", s3_workspace, f"s3://{bucket}/in/*", "--group-size", "1"), ("work", s3_workspace, "--processor", "text")):
        assert run_cli(*command).returncode == 0
    out = tmp_path / "run.jsonl"

    done = export(s3_workspace, "--to", str(out), "--json")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == 2
    rows = {row["source"]: row for row in jsonl(out)}
    assert set(rows) == {f"s3://{bucket}/in/a.txt", f"s3://{bucket}/in/b.pdf"}
    text_file, pdf = rows[f"s3://{bucket}/in/a.txt"], rows[f"s3://{bucket}/in/b.pdf"]
    assert (text_file["text"], text_file["error"], text_file["extra"]["metadata"]["content_type"]) == ("alpha", None, "text/plain")
    assert "Beta one" in pdf["text"] and pdf["pages"] == 2
    assert pdf["id"].startswith(pdf["group"]) and len(pdf["group"]) == 40


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_per_page_rows_are_the_texts_of_the_page_spans_on_s3(s3_client, bucket, s3_workspace, tmp_path, suffix, request):
    write_results(S3Backend(s3_client=s3_client, bucket=bucket, prefix="ws"), {A: [OCR_RECORD], B: [OLMOCR_DOCUMENT]})
    out = tmp_path / f"pages.{suffix}"
    pyarrow = request.getfixturevalue("pyarrow_dir") if suffix == "parquet" else None

    done = export(s3_workspace, "--to", str(out), "--per", "page", pyarrow=pyarrow)

    assert done.returncode == 0, done.stderr
    rows = read_parquet(out, pyarrow)["rows"] if pyarrow else jsonl(out)
    extra = (lambda r: json.loads(r["extra"])) if pyarrow else (lambda r: r["extra"])
    by_page = {(r["group"], r["page"]): r for r in rows}
    assert [(r["page"], r["text"]) for r in rows if r["group"] == A] == [(1, "Page one.\n"), (2, "Page two!")]
    assert (by_page[A, 2]["route"], by_page[A, 2]["method"], by_page[A, 2]["confidence"]) == ("ocr", "ocr", 0.93)
    assert extra(by_page[A, 2])["flags"] == ["low_confidence"] and by_page[A, 1]["processor"] == "ocr"
    # olmocr's document: the input is its Source-File, the page's Dolma attributes in extra, no fallback.
    assert [(r["page"], r["text"]) for r in rows if r["group"] == B] == [(1, "Slide one\n"), (2, "Slide two")]
    assert (by_page[B, 1]["source"], by_page[B, 1]["processor"], by_page[B, 1]["processor_version"]) == (
        "s3://pdfs/deck.pdf",
        "olmocr",
        "0.4.27",
    )
    assert (by_page[B, 2]["is_fallback"], extra(by_page[B, 2])["attributes"]["primary_language"]) == (False, "en")


def test_parquet_per_input_has_the_stable_columns_and_loses_nothing(local_workspace, tmp_path, pyarrow_dir):
    user_record = {"doc": 7, "labels": ["x"], "id": 12}  # a user's processor's: no known field of a known type
    write_results(LocalBackend(local_workspace), {A: [OCR_RECORD], B: [OLMOCR_DOCUMENT], C: [user_record]})
    out = tmp_path / "inputs.parquet"

    done = export(local_workspace, "--to", str(out), pyarrow=pyarrow_dir)

    assert done.returncode == 0, done.stderr
    table = read_parquet(out, pyarrow_dir)
    assert table["columns"] == {
        "id": "string", "source": "string", "group": "string", "text": "string", "error": "string",
        "processor": "string", "processor_version": "string", "pages": "int64", "extra": "string",
    }  # fmt: skip
    ocr, olmocr, user = table["rows"]
    assert {**json.loads(ocr["extra"]), **{k: ocr[k] for k in ("id", "source", "text")}} == OCR_RECORD
    assert {**json.loads(olmocr["extra"]), "id": olmocr["id"], "text": olmocr["text"]} == OLMOCR_DOCUMENT
    assert (user["id"], user["text"], json.loads(user["extra"])) == (None, None, user_record)


def test_a_bad_line_is_counted_and_named_in_one_warning(local_workspace, tmp_path):
    write_results(LocalBackend(local_workspace), {A: [OCR_RECORD, "{not json\n", '"a string"\n', OCR_RECORD]})
    out = tmp_path / "out.jsonl"

    done = export(local_workspace, "--to", str(out), "--json")

    assert done.returncode == 0, done.stderr
    assert len(jsonl(out)) == 2
    assert json.loads(done.stdout)["bad_lines"] == 2
    warning = done.stderr.strip()
    assert warning.count("\n") == 0 and "2 result lines" in warning and f"results/output_{A}.jsonl:2" in warning


def test_an_existing_file_is_refused_unless_forced(local_workspace, tmp_path):
    write_results(LocalBackend(local_workspace), {A: [OCR_RECORD]})
    out = tmp_path / "out.jsonl"
    out.write_text("keep me\n")

    refused = export(local_workspace, "--to", str(out))

    assert refused.returncode == 2 and "exists" in refused.stderr and "--force" in refused.stderr
    assert out.read_text() == "keep me\n"
    forced = export(local_workspace, "--to", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert [r["id"] for r in jsonl(out)] == [f"{A}:0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "ws"]  # renamed: no temporary left beside it


def test_no_results_is_one_line_naming_the_workspace_and_writes_nothing(s3_server, s3_workspace, tmp_path):
    out = tmp_path / "out.jsonl"

    done = export(s3_workspace, "--to", str(out))

    assert done.returncode == 2
    assert done.stderr.strip() == f"s3wq: error: no results in {s3_workspace}: nothing exported (has a worker run there?)"
    assert list(tmp_path.iterdir()) == []


def test_parquet_without_pyarrow_names_the_extra(local_workspace, tmp_path, monkeypatch, capsys):
    write_results(LocalBackend(local_workspace), {A: [OCR_RECORD]})
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError, whatever this venv holds

    code = main(["export", local_workspace, "--to", str(tmp_path / "out.parquet")])

    assert code == 2
    assert capsys.readouterr().err.strip() == "s3wq: error: export to Parquet needs pyarrow: pip install 's3wq[parquet]'"
    assert list(tmp_path.iterdir()) == [Path(local_workspace)]
