"""One input as the vlm and auto processors read it: its pages (each asked of the model, read by the CPU path, or
both), and the record made of them, olmocr's Dolma document with s3wq's account of each page added.

A page's text is the model's answer when it gave a good one; else the CPU path's reading, marked ``is_fallback`` as
olmocr marks a page its model could not read (olmocr falls back to pdftotext; s3wq to its ``ocr`` processor, which
OCRs a page with no usable layer). With ``S3WQ_VLM_FALLBACK=none`` such a page has no text, and the input is an input
error that names it. An input with no text at all is an input error too (olmocr writes no document for it; s3wq writes
the record, empty, with the error, so that nothing is lost unseen).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from s3wq.processors.builtins import pages_named
from s3wq.processors.vlm.answer import PageAnswer
from s3wq.processors.vlm.asking import Asked
from s3wq.processors.vlm.dolma import DolmaPage, dolma_document


class PageRoute(StrEnum):
    """The ``route`` of a page in a vlm or auto record, beside ocr's own (routing.Route: text_layer, ocr, blank...)."""

    VLM = "vlm"


@dataclass
class PageSlot:
    """One page: its account (``entry``, for ``metadata.pages``), the model's answer to come, and the CPU path's text."""

    number: int
    entry: dict[str, Any]
    asked: Future[Asked] | None = None
    cpu_text: str | None = None  # the CPU path's reading of the page (auto: as it was read; vlm: a fallback's), Markdown
    cpu_read: bool = False
    blank: bool = False
    # Settled once the model has answered (or not): what goes into the document.
    text: str | None = None
    answer: PageAnswer | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    is_fallback: bool = False
    problem: str | None = None

    def wants_fallback(self) -> bool:
        """Asked of the model, settled with no answer, and not read by the CPU path yet."""
        return self.asked is not None and self.answer is None and not self.cpu_read and not self.blank


@dataclass
class Document:
    """One input of the group, by its position, with what was read of it."""

    position: int
    path: str
    facts: dict[str, Any] = field(default_factory=dict)  # bytes, sha256, content_type
    count: int = 0
    slots: list[PageSlot] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    plain_text: str | None = None

    def settle(self, fallback_allowed: bool) -> None:
        """Each page's text from the model's answer, else from the CPU path (a fallback), else none (a problem)."""
        for slot in self.slots:
            if slot.asked is None:
                slot.text = slot.cpu_text
                continue
            asked = slot.asked.result()
            slot.entry.update(
                attempts=asked.attempts,
                model_seconds=asked.seconds,
                input_tokens=asked.spent_input_tokens,
                output_tokens=asked.spent_output_tokens,
            )
            if asked.rotation:
                slot.entry["rotation"] = asked.rotation
            if asked.answer is not None:
                slot.answer, slot.text, slot.problem = asked.answer, _clean(asked.answer.natural_text), None
                slot.input_tokens, slot.output_tokens = asked.input_tokens, asked.output_tokens
                if asked.why:
                    slot.entry["note"] = asked.why
                continue
            slot.entry["model_error"] = asked.why
            if fallback_allowed and slot.cpu_read:
                self.fall_back(slot, asked.why)
            elif not fallback_allowed:
                slot.problem = f"page {slot.number}: the model could not read it ({asked.why}), and no fallback is set"

    def fall_back(self, slot: PageSlot, why: str) -> None:
        """The page's CPU reading in place of the model's: a fallback, as olmocr marks one."""
        slot.text, slot.is_fallback = slot.cpu_text, True
        slot.entry.update(is_fallback=True, reason=f"{why}: read by the CPU path instead")
        if not slot.cpu_text and not slot.problem:
            slot.problem = f"page {slot.number}: no text: the model could not read it ({why}), and the CPU path read none"

    def error(self) -> str | None:
        found = [*self.problems, *(slot.problem for slot in self.slots if slot.problem)]
        if self.plain_text is None and self.slots and not any(slot.text for slot in self.slots):
            blank = [slot.number for slot in self.slots if slot.blank]
            what = f"; {pages_named(blank, self.count)} blank" if blank else ""
            found.insert(0, f"no text found on any of its {self.count} pages{what}")
        return "; ".join(found) or None

    def record(self, group_hash: str, processor: dict[str, Any], today: datetime.date) -> dict[str, Any]:
        """olmocr's Dolma document of this input, s3wq's account under ``metadata``; ``error`` when it fell short."""
        extra = {
            "s3wq-record": f"{group_hash}:{self.position}",
            "s3wq-processor": processor,
            **self.facts,
            "pages": [slot.entry for slot in self.slots],
        }
        if self.plain_text is not None:
            pages = [DolmaPage(page_num=1, answer=_plain_answer(self.plain_text), input_tokens=0, output_tokens=0, is_fallback=False)]
        else:
            pages = [_dolma_page(slot) for slot in self.slots]
        record = dolma_document(self.path, pages, today=today, extra_metadata=extra) or _empty_record(self.path, today, extra)
        error = self.error()
        if error:
            record["error"] = error
        return record


def _clean(text: str | None) -> str | None:
    """The model's text as UTF-8 can hold it: a JSON answer may carry a lone surrogate (``\\ud800``), which no file can."""
    return None if text is None else text.encode("utf-8", "replace").decode("utf-8")


def _dolma_page(slot: PageSlot) -> DolmaPage:
    if slot.answer is not None:
        answer = dataclasses.replace(slot.answer, natural_text=slot.text)
    else:
        answer = _plain_answer(slot.text, is_table=bool(slot.entry.get("tables")))
    return DolmaPage(
        page_num=slot.number,
        answer=answer,
        input_tokens=slot.input_tokens,
        output_tokens=slot.output_tokens,
        is_fallback=slot.is_fallback,
    )


def _plain_answer(text: str | None, *, is_table: bool = False) -> PageAnswer:
    """A page not read by the model, in the model's terms: as olmocr fills a fallback page's (no language, upright)."""
    return PageAnswer(
        primary_language=None, is_rotation_valid=True, rotation_correction=0, is_table=is_table, is_diagram=False, natural_text=text
    )


def _empty_record(path: str, today: datetime.date, extra: dict[str, Any]) -> dict[str, Any]:
    """olmocr writes no document for an input with no text; s3wq writes this one, so the input is not lost unseen."""
    return {
        "id": hashlib.sha1(path.encode()).hexdigest(),
        "text": "",
        "source": "olmocr",
        "added": today.isoformat(),
        "created": today.isoformat(),
        "metadata": {"Source-File": path, **extra},
        "attributes": {"pdf_page_numbers": []},
    }
