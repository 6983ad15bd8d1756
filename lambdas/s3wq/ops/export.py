"""Gathering a workspace's results (``results/output_<hash>.jsonl``, one JSON line per input) into rows for one file.

A record of any shape exports: each field that has a column of its own and the column's type goes there, and the rest of
the record, as it was, goes in ``extra`` (a JSON object), so that nothing is lost and a user's processor's records
export as well as the built-ins'. The records known by shape:

* ``text``'s and ``ocr``'s: ``id``, ``source`` (the input's path), ``text``, ``error``, ``metadata`` (``pages``: a count
  for ``text``, each page's entry for ``ocr``; ``processor``: who made it), ocr's ``attributes.pdf_page_numbers``;
* olmocr's Dolma documents (``vlm`` and ``auto``'s, and olmocr's own pipeline's, in an olmocr workspace): ``source`` is
  the producer ("olmocr"), the input is ``metadata["Source-File"]``, and the processor is ``metadata["s3wq-processor"]``,
  else olmocr at ``metadata["olmocr-version"]``.

One row per record (:attr:`Per.INPUT`), or one per page (:attr:`Per.PAGE`): the record's text sliced by
``attributes.pdf_page_numbers`` (``[start, end, page]`` each), with the page's entry in ``metadata.pages`` where there
is one (its route, method, confidence, is_fallback in columns, the rest in ``extra``, with the Dolma attributes that
hold one value a page). A record without page spans is one row, its page empty.

Results are listed page by page and read a few ahead of the rows (:data:`READ_AHEAD`), so memory holds a few results,
never the workspace's.
"""

from __future__ import annotations

import enum
import json
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from s3wq.errors import BadInput, ObjectNotFound
from s3wq.store import Backend, layout

# Result objects read ahead of the rows: S3's latency is hidden, and memory holds this many results at most.
READ_AHEAD = 16


class Per(enum.StrEnum):
    """What one row of the export is."""

    INPUT = "input"
    PAGE = "page"


# The columns, in order, and each one's type ("str", "int", "float", "bool"; extra is a JSON object).
INPUT_COLUMNS: dict[str, str] = {
    "id": "str",
    "source": "str",
    "group": "str",
    "text": "str",
    "error": "str",
    "processor": "str",
    "processor_version": "str",
    "pages": "int",
    "extra": "json",
}
PAGE_COLUMNS: dict[str, str] = {
    "id": "str",
    "source": "str",
    "group": "str",
    "page": "int",
    "text": "str",
    "error": "str",
    "processor": "str",
    "processor_version": "str",
    "route": "str",
    "method": "str",
    "confidence": "float",
    "is_fallback": "bool",
    "pages": "int",
    "extra": "json",
}
COLUMNS = {Per.INPUT: INPUT_COLUMNS, Per.PAGE: PAGE_COLUMNS}
# A page entry's fields that have columns.
_PAGE_ENTRY_COLUMNS = ("route", "method", "confidence", "is_fallback")

Row = dict[str, Any]


@dataclass
class ExportReport:
    """What an export read and wrote; ``first_bad_line`` names the first line that is not a JSON object (key:line)."""

    results: int = 0
    records: int = 0
    rows: int = 0
    bad_lines: int = 0
    first_bad_line: str | None = None
    # Results listed and gone when read (a reset under the export): not an error, nothing of theirs exported.
    vanished: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def export_rows(
    backend: Backend, per: Per, write: Callable[[Row], None], progress: Callable[[ExportReport], None] | None = None
) -> ExportReport:
    """Every result of the workspace, in key order, as rows given to ``write``; ``progress`` after each result.

    BadInput when the workspace holds no result at all (nothing to export: a typo, or no worker has run).
    """
    report = ExportReport()
    for key, body in _read_ahead(backend, _result_keys(backend), report):
        report.results += 1
        group = layout.hash_from_key(key, layout.RESULTS_PREFIX, layout.RESULT_SUFFIX)
        for number, record in _records(body):
            if record is None:
                report.bad_lines += 1
                report.first_bad_line = report.first_bad_line or f"{key}:{number}"
                continue
            report.records += 1
            rows = [input_row(group, record)] if per is Per.INPUT else page_rows(group, record)
            for row in rows:
                write(row)
                report.rows += 1
        if progress is not None:
            progress(report)
    if report.results == 0 and report.vanished == 0:
        raise BadInput(f"no results in {backend.uri}: nothing exported (has a worker run there?)")
    return report


def _result_keys(backend: Backend) -> Iterator[str]:
    """The result objects' keys, listed page by page: a group's ``output_<hash>.jsonl``, olmocr's as s3wq's."""
    for key in backend.list_keys(layout.RESULTS_PREFIX):
        if layout.hash_from_key(key, layout.RESULTS_PREFIX, layout.RESULT_SUFFIX) is not None:
            yield key


def _read_ahead(backend: Backend, keys: Iterator[str], report: ExportReport) -> Iterator[tuple[str, bytes]]:
    """Each key's body, in order, READ_AHEAD reads in flight; a key gone when read is counted in ``report.vanished``."""
    with ThreadPoolExecutor(max_workers=READ_AHEAD, thread_name_prefix="s3wq-export") as pool:
        pending: deque[tuple[str, Future]] = deque()

        def settled() -> Iterator[tuple[str, bytes]]:
            key, future = pending.popleft()
            try:
                yield key, future.result().body
            except ObjectNotFound:
                report.vanished += 1

        for key in keys:
            pending.append((key, pool.submit(backend.read, key)))
            if len(pending) >= READ_AHEAD:
                yield from settled()
        while pending:
            yield from settled()


def _records(body: bytes) -> Iterator[tuple[int, dict | None]]:
    """Each non-blank line's number (from 1) and its JSON object, or None for a line that is not one."""
    for number, line in enumerate(body.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
            yield number, None
            continue
        yield number, value if isinstance(value, dict) else None


def _typed(value: Any, kind: str) -> bool:
    if kind == "str":
        return isinstance(value, str)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, bool)


def _fits(value: Any, kind: str) -> bool:
    """Whether ``value`` may go in a column of ``kind``: one of its type, or none (a null)."""
    return value is None or _typed(value, kind)


def _metadata(record: dict) -> dict:
    metadata = record.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def _source(record: dict) -> tuple[str | None, bool]:
    """The input's path, and whether it is the record's own ``source`` (a Dolma document's is its producer's name)."""
    source_file = _metadata(record).get("Source-File")
    if isinstance(source_file, str):
        return source_file, False
    source = record.get("source")
    return (source, True) if isinstance(source, str) else (None, False)


def _processor(metadata: dict) -> tuple[str | None, str | None]:
    """Who made the record, where it says: s3wq's processor account, else olmocr's version."""
    for name in ("processor", "s3wq-processor"):
        account = metadata.get(name)
        if isinstance(account, dict):
            name_, version = account.get("name"), account.get("version")
            return (name_ if isinstance(name_, str) else None), (version if isinstance(version, str) else None)
        if isinstance(account, str):
            return account, None
    version = metadata.get("olmocr-version")
    return ("olmocr", version) if isinstance(version, str) else (None, None)


def _page_count(metadata: dict, spans: list[list[int]] | None) -> int | None:
    pages = metadata.get("pages")
    if _typed(pages, "int"):
        return pages
    if isinstance(pages, list):
        return len(pages)
    total = metadata.get("pdf-total-pages")
    if _typed(total, "int"):
        return total
    return len(spans) if spans else None


def _spans(record: dict) -> list[list[int]] | None:
    """``attributes.pdf_page_numbers`` if it is a list of ``[start, end, page]`` integers, else None."""
    attributes = record.get("attributes")
    spans = attributes.get("pdf_page_numbers") if isinstance(attributes, dict) else None
    if not isinstance(spans, list):
        return None
    if all(isinstance(s, list) and len(s) == 3 and all(_typed(n, "int") for n in s) for s in spans):
        return spans
    return None


def _common(group: str | None, record: dict) -> tuple[Row, set[str]]:
    """The columns every row of ``record`` has, and the record's fields they took."""
    metadata = _metadata(record)
    source, own_source = _source(record)
    processor, version = _processor(metadata)
    row: Row = {"id": None, "source": source, "group": group, "text": None, "error": None}
    taken = {"source"} if own_source else set()
    for name in ("id", "text", "error"):
        if _fits(record.get(name), "str"):
            row[name] = record.get(name)
            taken.add(name)
    row.update(processor=processor, processor_version=version, pages=_page_count(metadata, _spans(record)))
    return row, taken


def input_row(group: str | None, record: dict) -> Row:
    """One row of ``record``: its columns, and ``extra`` the record's other fields (its metadata whole)."""
    row, taken = _common(group, record)
    row["extra"] = {k: v for k, v in record.items() if k not in taken}
    return {name: row[name] for name in INPUT_COLUMNS}


def page_rows(group: str | None, record: dict) -> list[Row]:
    """A row per page span of ``record`` (one row, page empty, when it has none): its text's slice, the page's entry."""
    row, _ = _common(group, record)
    spans = _spans(record)
    if not spans:
        return [{**dict.fromkeys(PAGE_COLUMNS), **row, "extra": {}}]
    text = row["text"] or ""
    entries = _page_entries(_metadata(record))
    attributes = _per_page_attributes(record, len(spans))
    rows = []
    for index, (start, end, page) in enumerate(spans):
        entry = dict(entries.get(page, {}))
        columns = {name: entry.pop(name, None) if _fits(entry.get(name), kind) else None for name, kind in _page_entry_kinds()}
        entry.pop("page", None)
        if columns["confidence"] is not None:
            columns["confidence"] = float(columns["confidence"])
        if columns["is_fallback"] is None:
            columns["is_fallback"] = _fallback_default(_metadata(record), page in entries)
        extra = {**entry, **({"attributes": {k: v[index] for k, v in attributes.items()}} if attributes else {})}
        page_row = {**row, **columns, "page": page, "text": text[start:end] if row["text"] is not None else None, "extra": extra}
        rows.append({name: page_row[name] for name in PAGE_COLUMNS})
    return rows


def _page_entry_kinds() -> Iterator[tuple[str, str]]:
    return ((name, PAGE_COLUMNS[name]) for name in _PAGE_ENTRY_COLUMNS)


def _page_entries(metadata: dict) -> dict[int, dict]:
    """``metadata.pages``' entries by their page number (ocr's, vlm's, auto's)."""
    pages = metadata.get("pages")
    if not isinstance(pages, list):
        return {}
    return {e["page"]: e for e in pages if isinstance(e, dict) and _typed(e.get("page"), "int")}


def _per_page_attributes(record: dict, count: int) -> dict[str, list]:
    """The Dolma attributes that hold a value for each page (primary_language, is_table, ...), by name."""
    attributes = record.get("attributes")
    if not isinstance(attributes, dict):
        return {}
    return {k: v for k, v in attributes.items() if k != "pdf_page_numbers" and isinstance(v, list) and len(v) == count}


def _fallback_default(metadata: dict, has_entry: bool) -> bool | None:
    """A Dolma document's page not marked a fallback is not one: s3wq's vlm marks each, and olmocr counts them."""
    if "total-fallback-pages" not in metadata:
        return None
    return False if has_entry or metadata.get("total-fallback-pages") == 0 else None
