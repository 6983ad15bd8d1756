"""Which pages ``auto`` sends to the model: those the CPU path read, but not well enough to be trusted.

The CPU path (the ``ocr`` processor's) says so itself, per page: a ``handwriting`` or ``low_confidence`` flag, tables
and equations its layout found (a model writes tables as HTML and equations as LaTeX, which geometry cannot), a page
with print on which OCR found nothing, a page it failed on. A page read well from a good text layer or a clean scan
stays the CPU path's. The order below is the order of the reasons given: the first that holds is the page's.
"""

from __future__ import annotations

from typing import Any

from s3wq.processors.ocr.pages import PageRead
from s3wq.processors.ocr.routing import Route


def escalation(read: PageRead, entry: dict[str, Any]) -> str | None:
    """Why this page goes to the model, or None when its CPU reading is kept. ``entry``: the page's account, its layout in it."""
    if read.problem:
        return f"the CPU path could not read it ({read.problem})"
    if entry.get("route") == Route.BLANK.value:
        return None
    flags = entry.get("flags") or []
    if "handwriting" in flags:
        return "handwriting suspected"
    tables = entry.get("tables") or 0
    if tables:
        return f"{tables} table{'s' if tables > 1 else ''} found"
    if entry.get("equations"):
        return "equations the CPU path cannot read"
    if "low_confidence" in flags:
        return f"low OCR confidence ({entry.get('confidence')})"
    if read.empty:
        return "OCR found no text on a page with print"
    return None
