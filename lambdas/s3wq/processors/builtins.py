"""The built-in processors: ``noop`` (measures the queue itself) and ``text`` (the text of PDFs and text files)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import io
import mimetypes
from pathlib import Path
from typing import Any

from s3wq.errors import InputNotFound
from s3wq.model import Group
from s3wq.processors.context import ProcessorContext


def noop(group: Group, ctx: ProcessorContext) -> None:
    """Do nothing: measures the queue itself."""


# A scan of hundreds of pages gets one line naming the first few, not hundreds of numbers.
_BLANK_PAGES_NAMED = 10
_TEXT_SUFFIXES = {".txt", ".md", ".csv", ".json", ".jsonl", ".tsv", ".html", ".xml"}


def content_type_of(path: str, data: bytes) -> str:
    """What an input is, by its first bytes (a PDF) or else its name."""
    if data.startswith(b"%PDF-") or path.lower().endswith(".pdf"):
        return "application/pdf"
    guessed, _ = mimetypes.guess_type(path, strict=False)
    if Path(path).suffix.lower() in _TEXT_SUFFIXES and not (guessed or "").startswith("text/"):
        return "text/plain"
    return guessed or "application/octet-stream"


def _pdf_text(data: bytes) -> tuple[str, int, list[int]]:
    """The text of every page, the page count, and the numbers (from 1) of the pages with no text layer."""
    import pypdf  # imported on first use: it is most of a cold start otherwise
    from pypdf.errors import PyPdfError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ExtractionFailed(f"not a readable PDF: {type(exc).__name__}: {exc}") from exc
    blank = [number for number, page in enumerate(pages, start=1) if not page.strip()]
    return "\n".join(pages), len(pages), blank


def pages_named(numbers: list[int], pages: int) -> str:
    """``page 3 of 5`` or ``pages 2, 4 of 5``, naming the first few of a long list."""
    shown = ", ".join(str(n) for n in numbers[:_BLANK_PAGES_NAMED]) + (", ..." if len(numbers) > _BLANK_PAGES_NAMED else "")
    return f"{'page' if len(numbers) == 1 else 'pages'} {shown} of {pages}"


def no_text_layer(blank: list[int], pages: int) -> str:
    """What a PDF whose pages ``blank`` hold no text is told: such a page is an image (a scan), which text cannot read."""
    return (
        f"no text layer on {pages_named(blank, pages)} (a scanned page?): "
        "the text processor reads text layers only; use the ocr processor (--processor ocr; -c processor=ocr on Lambda)"
    )


def unsupported(content_type: str) -> str:
    """What an input ``text`` cannot read is told: an image goes to the ocr processor, which reads PNG, JPEG and TIFF."""
    told = f"unsupported content type {content_type}"
    if content_type.startswith("image/"):
        return f"{told}: the text processor reads PDFs' text layers and text files; use the ocr processor for images (--processor ocr; -c processor=ocr on Lambda)"
    return told


@functools.cache
def processor_account(name: str) -> dict[str, str]:
    """Who made a built-in's record, as its ``metadata.processor``: the processor's name and s3wq's version (as the ocr record's)."""
    try:
        version = importlib.metadata.version("s3wq")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    return {"name": name, "version": version}


class ExtractionFailed(Exception):
    """One input could not be turned into text; it becomes an error record, not a failed group."""


def text_of(data: bytes) -> str:
    """A text file's content; ExtractionFailed when it is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExtractionFailed(f"not UTF-8 text: {exc}") from exc


def text(group: Group, ctx: ProcessorContext) -> None:
    """Extract the text of each input (PDF, or UTF-8 text) into one JSON line per input.

    A missing, corrupt or unsupported input gets a record with ``error``, is
    reported as an input error, and the group still completes; so is a PDF
    with a page that has no text layer (a scan), whose record keeps the text
    of its other pages. A storage failure raises, so the attempt is retried.
    """
    records = []
    for position, path in enumerate(group.paths):
        record: dict[str, Any] = {"id": f"{group.hash}:{position}", "source": path, "text": None}
        try:
            data = ctx.read_input(path)
        except InputNotFound as exc:
            ctx.record_input_error(path, str(exc))
            records.append({**record, "metadata": {"processor": processor_account("text")}, "error": str(exc)})
            continue
        content_type = content_type_of(path, data)
        metadata: dict[str, Any] = {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "content_type": content_type,
            "pages": None,
            "processor": processor_account("text"),
        }
        try:
            if content_type == "application/pdf":
                record["text"], metadata["pages"], blank = _pdf_text(data)
                ctx.pages_done(metadata["pages"])
                if blank:
                    # Not an empty success: status counts it, and the record says why the text is missing.
                    raise ExtractionFailed(no_text_layer(blank, metadata["pages"]))
            elif content_type.startswith("text/") or content_type == "application/json":
                record["text"] = text_of(data)
            else:
                raise ExtractionFailed(unsupported(content_type))
        except ExtractionFailed as exc:
            ctx.record_input_error(path, str(exc))
            record["error"] = str(exc)
        records.append({**record, "metadata": metadata})
    ctx.write_result(records)
