"""The ``vlm`` and ``auto`` processors: one olmocr Dolma document per input, its pages read by a vision-language model
on an OpenAI-compatible endpoint, many pages in flight.

``vlm`` asks the model every page, as olmocr's pipeline does; a page it cannot read falls back to the CPU ``ocr`` path
(``is_fallback``). ``auto`` reads every page with the CPU path first (a good text layer taken as it is, the rest OCR'd)
and asks the model only the pages that path says it read poorly (escalation.py): the model's cost goes where it buys
something. Both write olmocr's result (``results/output_<hash>.jsonl``, Dolma documents) and, with
``S3WQ_VLM_MARKDOWN=1``, olmocr's Markdown tree (``markdown/<path>.md``).

The group's pages are spread over ``S3WQ_VLM_IN_FLIGHT`` threads (flight.py): the decoder renders on this thread,
one page at a time, while the others wait on the model. A dead endpoint (its breaker open) or one that refuses this
worker raises ServiceUnavailable: the group goes back unrun, no attempt used, and the worker stops.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from s3wq.errors import InputNotFound
from s3wq.model import Group
from s3wq.processors.builtins import ExtractionFailed, content_type_of, text_of
from s3wq.processors.context import ProcessorContext
from s3wq.processors.ocr import processor as ocr_processor
from s3wq.processors.ocr.decoding import IMAGE_TYPES, BlankPage, Decoder, OutOfTime, sniffed_image_type
from s3wq.processors.ocr.settings import OcrSettings
from s3wq.processors.ocr.settings import current_settings as ocr_settings
from s3wq.processors.ocr.time_shares import TimeShares
from s3wq.processors.vlm.account import RunAccount, processor_account
from s3wq.processors.vlm.asking import Asked, PageAsker
from s3wq.processors.vlm.budget import ModelBudget
from s3wq.processors.vlm.client import ChatClient, EndpointBreaker
from s3wq.processors.vlm.cpu_pages import read_with_cpu, reread_with_cpu
from s3wq.processors.vlm.documents import Document, PageRoute, PageSlot
from s3wq.processors.vlm.dolma import MARKDOWN_PREFIX, markdown_path
from s3wq.processors.vlm.escalation import escalation
from s3wq.processors.vlm.flight import InFlight
from s3wq.processors.vlm.keys import api_key_of
from s3wq.processors.vlm.query import png_of
from s3wq.processors.vlm.settings import Fallback, VlmSettings, current_settings

logger = logging.getLogger("s3wq.vlm")
# Kept from the run for what follows the model's answers: the CPU fallbacks, the result's PUT, the Markdown's.
_RESERVE_SECONDS = 20.0
_RESERVE_SHARE = 0.15


@dataclass(frozen=True)
class _Kit:
    """What one process keeps across groups: the settings, one client (its connections and breaker), the budget."""

    settings: VlmSettings
    ocr: OcrSettings
    client: ChatClient
    budget: ModelBudget
    asker: PageAsker


@functools.cache
def _kit() -> _Kit:
    settings = current_settings()
    client = ChatClient(
        settings.completions_url,
        api_key_of(settings),
        request_timeout=settings.request_timeout,
        breaker=EndpointBreaker(),
        pool_size=settings.in_flight,
    )
    budget = ModelBudget.of(settings)
    return _Kit(settings, ocr_settings(), client, budget, PageAsker(client, settings, budget))


def prepare(name: str = "vlm") -> None:
    """Fail before any group on what every group would fail on: the settings, the key's secret, the decoder, the engine.

    The endpoint itself is not called: a worker may start before its model server is up, and a dead endpoint is the
    breaker's to judge, group by group, handing each back.
    """
    kit = _kit()
    if name == "auto" or kit.settings.fallback is Fallback.OCR:
        ocr_processor.prepare("ocr")
    else:
        with Decoder(kit.ocr) as decoder:
            decoder.start()


def vlm(group: Group, ctx: ProcessorContext) -> None:
    """Every page of each input read by the model (a page it cannot read, by the CPU path), one Dolma document each."""
    _run(group, ctx, "vlm")


def auto(group: Group, ctx: ProcessorContext) -> None:
    """Every page read by the CPU path, and the pages it reads poorly by the model, one Dolma document each."""
    _run(group, ctx, "auto")


class _Run:
    """One group's run: its inputs read, their pages in flight, then settled, written."""

    def __init__(self, group: Group, ctx: ProcessorContext, name: str, decoder: Decoder, flight: InFlight):
        self.group, self.ctx, self.name, self.decoder, self.flight = group, ctx, name, decoder, flight
        self.kit = _kit()
        remaining = ctx.remaining_seconds()
        self.until = time.monotonic() + remaining - min(_RESERVE_SECONDS, _RESERVE_SHARE * remaining)
        self.shares = TimeShares(remaining, len(group.paths))
        self.account = RunAccount(name, self.kit.settings)

    def read_input(self, position: int) -> Document:
        path = self.group.paths[position]
        doc = Document(position, path)
        try:
            data = self.ctx.read_input(path)
        except InputNotFound as exc:
            doc.problems.append(str(exc))
            return doc
        content_type = sniffed_image_type(data) or content_type_of(path, data)
        doc.facts = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_type": content_type}
        try:
            self._read_pages(doc, data, content_type)
        except ExtractionFailed as exc:
            doc.problems.append(str(exc))
        except OutOfTime:
            doc.problems.append(f"the run's time ran out at page {len(doc.slots) + 1} of {doc.count}")
        return doc

    def _read_pages(self, doc: Document, data: bytes, content_type: str) -> None:
        if content_type.startswith("text/") or content_type == "application/json":
            doc.plain_text = text_of(data)
            return
        if content_type != "application/pdf" and content_type not in IMAGE_TYPES:
            raise ExtractionFailed(
                f"unsupported content type {content_type}: the {self.name} processor reads PDFs, PNG, JPEG, TIFF and text files"
            )
        doc.count = self.decoder.open(data, "pdf" if content_type == "application/pdf" else "image", until=self.until)
        pages = min(doc.count, self.kit.ocr.max_pages)
        if pages < doc.count:
            doc.problems.append(f"{doc.count} pages, more than the page cap: the first {pages} read")
        if self.name == "auto":
            share = self.shares.next()
            for slot, read in read_with_cpu(self.decoder, self.kit.ocr, doc, pages, self.shares, share):
                why = escalation(read, slot.entry)
                if why:
                    self._ask(doc, slot, why)
            return
        for index in range(pages):
            slot = PageSlot(index + 1, {"page": index + 1, "route": PageRoute.VLM, "reason": "the vlm processor asks the model every page"})
            doc.slots.append(slot)
            self._ask(doc, slot, "")

    def _ask(self, doc: Document, slot: PageSlot, why: str) -> None:
        """Render the page as olmocr does and send it, in a slot of its own; a blank page or a cap refusal is settled here."""
        self.flight.take()
        try:
            scan = self.decoder.render(slot.number - 1, self.until, longest_side=self.kit.settings.longest_side, colour=True)
        except BaseException:
            self.flight.give_back()
            raise
        if isinstance(scan, BlankPage):
            self.flight.give_back()
            slot.blank = True
            slot.entry.update(route="blank", reason="no print on the page")
            return
        refused = self.kit.budget.take_page()
        if refused:
            self.flight.give_back()
            slot.entry["escalation_refused" if why else "model_refused"] = refused
            if slot.cpu_read:
                return  # auto: the CPU reading stands, and the record says why the model was not asked
            slot.asked = _settled(Asked(answer=None, why=refused))
            return
        if why:
            slot.entry.update(escalated=why, cpu_route=slot.entry.get("route"), route=PageRoute.VLM, reason=why)
        png = png_of(scan.pixels)
        del scan
        until, asker = self.until, self.kit.asker
        slot.asked = self.flight.submit(lambda: asker.ask(png, until))

    def finish(self, docs: list[Document]) -> list[dict[str, Any]]:
        """Wait for every page, settle them, read the fallbacks, make the records."""
        for doc in docs:
            for slot in doc.slots:
                if slot.asked is not None:
                    slot.asked.exception()  # waits; a ServiceUnavailable is raised by check() below
            self.flight.check()
        fallback = self.kit.settings.fallback is Fallback.OCR
        for doc in docs:
            doc.settle(fallback)
            if fallback and any(slot.wants_fallback() for slot in doc.slots):
                reread_with_cpu(self.ctx, self.decoder, self.kit.ocr, doc, self.until + _RESERVE_SECONDS / 2)
            self.ctx.pages_done(len(doc.slots))  # its pages settled: each read by the model, the CPU path, or found blank
        processor = processor_account(self.name, self.kit.settings)
        today = datetime.date.today()
        records = [doc.record(self.group.hash, processor, today) for doc in docs]
        for doc in docs:
            self.account.add(doc)
        return records


def _run(group: Group, ctx: ProcessorContext, name: str) -> None:
    kit = _kit()
    with Decoder(kit.ocr) as decoder, InFlight(kit.settings.in_flight) as flight:
        run = _Run(group, ctx, name, decoder, flight)
        docs = [run.read_input(position) for position in range(len(group.paths))]
        records = run.finish(docs)
    ctx.write_result(records)
    for doc, record in zip(docs, records):
        if record.get("error"):
            ctx.record_input_error(doc.path, record["error"])
    if kit.settings.markdown:
        _write_markdown(ctx, docs, records)
    run.account.spent = kit.client.totals()
    logger.info("vlm run account", extra={"account": run.account.to_dict(peak_in_flight=flight.peak)})


def _write_markdown(ctx: ProcessorContext, docs: list[Document], records: list[dict[str, Any]]) -> None:
    """olmocr's ``--markdown`` tree: each document's text at ``markdown/<its path>.md`` (dolma.markdown_path: a safe key)."""
    for doc, record in zip(docs, records):
        if record.get("text"):
            ctx.backend.write(MARKDOWN_PREFIX + markdown_path(doc.path), record["text"].encode("utf-8"))


def _settled(asked: Asked) -> Future[Asked]:
    future: Future[Asked] = Future()
    future.set_result(asked)
    return future
