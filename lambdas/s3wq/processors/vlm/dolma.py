"""An input's pages as olmocr 0.4.27's Dolma document (``build_dolma_document``), and where its Markdown goes
(``get_markdown_path``), so that a reader of olmocr's results reads these unchanged.

The document is olmocr's key for key: its text is the pages' texts joined
as olmocr joins them (each page's text and a new line, but the last page's;
a page with no text adds nothing), its ``id`` the SHA-1 of that text, its
``pdf_page_numbers`` each page's ``[start, end, page]`` in it, and its
``olmocr-version`` the olmocr whose pipeline this follows. What s3wq adds
(its version, how each page was read) goes in ``extra_metadata``, beside
olmocr's keys and never over them. tests/ocr/test_vlm_olmocr.py holds both
functions to olmocr's own.
"""

from __future__ import annotations

import datetime
import hashlib
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from s3wq.processors.vlm.answer import PageAnswer

# The olmocr whose pipeline the vlm processor follows (its prompt, its parsing, this document).
OLMOCR_VERSION = "0.4.27"
SOURCE = "olmocr"
# Where olmocr's --markdown writes, under the workspace.
MARKDOWN_PREFIX = "markdown/"
_TARBALL_SEPARATOR = "::"
_S3_SCHEME = "s3://"
# A key may not hold NUL (the local store refuses it, S3's XML listings cannot carry it) nor a lone surrogate (a local
# file name that is not UTF-8, as Python decodes it, which no store can take): NUL goes, a surrogate becomes U+FFFD.
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class DolmaPage:
    """One page of the document: its number (from 1), the answer it got (a fallback's made up by the processor), the
    tokens the model spent on it, and whether it is a fallback (read without the model, as olmocr marks is_fallback)."""

    page_num: int
    answer: PageAnswer
    input_tokens: int = 0
    output_tokens: int = 0
    is_fallback: bool = False


def dolma_document(
    source_file: str, pages: Sequence[DolmaPage], *, today: datetime.date, extra_metadata: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """olmocr's Dolma document of ``pages`` (in order) of ``source_file``, dated ``today``; None when no page has text,
    as olmocr writes no document then."""
    text, spans = "", []
    for index, page in enumerate(pages):
        start = len(text)
        if page.answer.natural_text is not None:
            text += page.answer.natural_text + ("\n" if index < len(pages) - 1 else "")
        spans.append([start, len(text), page.page_num])
    if not text:
        return None
    metadata: dict[str, Any] = {
        "Source-File": source_file,
        "olmocr-version": OLMOCR_VERSION,
        "pdf-total-pages": len(pages),
        "total-input-tokens": sum(page.input_tokens for page in pages),
        "total-output-tokens": sum(page.output_tokens for page in pages),
        "total-fallback-pages": sum(page.is_fallback for page in pages),
    }
    clash = set(metadata) & set(extra_metadata or {})
    if clash:
        raise ValueError(f"extra metadata would replace olmocr's {', '.join(sorted(clash))}")
    metadata.update(extra_metadata or {})
    date = today.strftime("%Y-%m-%d")
    answers = [page.answer for page in pages]
    return {
        # olmocr's text.encode() raises for a lone surrogate (a JSON \ud800 in an answer) and loses the document; its
        # bytes are hashed as they are here.
        "id": hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "text": text,
        "source": SOURCE,
        "added": date,
        "created": date,
        "metadata": metadata,
        "attributes": {
            "pdf_page_numbers": spans,
            "primary_language": [answer.primary_language for answer in answers],
            "is_rotation_valid": [answer.is_rotation_valid for answer in answers],
            "rotation_correction": [answer.rotation_correction for answer in answers],
            "is_table": [answer.is_table for answer in answers],
            "is_diagram": [answer.is_diagram for answer in answers],
        },
    }


def markdown_path(source_file: str) -> str:
    """Where ``source_file``'s Markdown goes under ``markdown/``, as olmocr's get_markdown_path names it: its S3 key
    (without the bucket), its local path (from the root), or the tarball's name (less ``.tar...``) then the inner path,
    with ``.md`` for its extension.

    The result is a storage key built from an input's name, so it is made safe: relative, no empty, ``.`` or ``..``
    part (olmocr drops the empty and ``..`` ones; a ``.`` olmocr keeps, which on S3 would be a key of its own), no
    NUL. Unlike olmocr, an S3 key's ``?`` and ``#`` are the key's (olmocr's urlparse takes them for a query or a
    fragment and drops what follows, so that ``a#1.pdf`` and ``a#2.pdf`` would both be ``a.md``).
    """
    name = _SURROGATE_RE.sub("\ufffd", source_file.replace("\x00", ""))
    if _TARBALL_SEPARATOR in name:
        tarball, inner = name.split(_TARBALL_SEPARATOR, 1)
        stem = posixpath.splitext(posixpath.basename(tarball))[0]
        relative = posixpath.join(stem[: -len(".tar")] if stem.endswith(".tar") else stem, inner)
    elif name.startswith(_S3_SCHEME):
        relative = name[len(_S3_SCHEME) :].partition("/")[2]
    else:
        relative = name
    parts = [part for part in relative.split("/") if part not in ("", "..")]
    # olmocr's: the last part's stem (splitext's, so ".pdf" stays whole) and .md; an empty name is ".md".
    file_name = posixpath.splitext(parts[-1] if parts else "")[0] + ".md"
    folders = [part for part in parts[:-1] if part != "."]
    return "/".join([*folders, file_name])
