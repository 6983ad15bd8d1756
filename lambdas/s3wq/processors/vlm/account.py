"""Who made a vlm or auto record, and what one run spent: pages by route, tokens in and out, the modelled cost.

A run's account is logged as one line when its result is written (``s3wq work -v`` shows it; on Lambda it is a
Powertools log line, queryable in CloudWatch Logs Insights); each record carries its own pages' share of it.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from s3wq.processors.ocr.record import processor_account as ocr_account
from s3wq.processors.ocr.settings import current_settings as ocr_settings
from s3wq.processors.vlm.client import ClientTotals
from s3wq.processors.vlm.documents import Document
from s3wq.processors.vlm.dolma import OLMOCR_VERSION
from s3wq.processors.vlm.settings import VlmSettings


@functools.cache
def processor_account(name: str, settings: VlmSettings) -> dict[str, Any]:
    """The processor, s3wq's version, the model and the olmocr pipeline it follows, the settings that shape what it reads."""
    try:
        version = importlib.metadata.version("s3wq")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "name": name,
        "version": version,
        "model": settings.model,
        "follows": f"olmocr {OLMOCR_VERSION}",
        "settings": {
            "in_flight": settings.in_flight,
            "max_page_retries": settings.max_page_retries,
            "longest_side": settings.longest_side,
            "fallback": settings.fallback.value,
            "max_model_pages": settings.max_model_pages,
        },
        "cpu": ocr_account(ocr_settings()),
    }


@dataclass
class RunAccount:
    """One run's pages by route (``vlm``, ``text_layer``, ``ocr``, ``blank``...), fallbacks, tokens and the cost."""

    processor: str
    settings: VlmSettings
    pages: Counter[str] = field(default_factory=Counter)
    fallback_pages: int = 0
    escalated_pages: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    spent: ClientTotals | None = None

    def add(self, doc: Document) -> None:
        for slot in doc.slots:
            self.pages[str(slot.entry.get("route"))] += 1
            self.fallback_pages += slot.is_fallback
            self.escalated_pages += "escalated" in slot.entry
            self.input_tokens += int(slot.entry.get("input_tokens", 0))
            self.output_tokens += int(slot.entry.get("output_tokens", 0))

    def cost(self) -> float | None:
        """Dollars at the settings' prices per million tokens; None when no price is set."""
        if not self.settings.price_input and not self.settings.price_output:
            return None
        return round((self.input_tokens * self.settings.price_input + self.output_tokens * self.settings.price_output) / 1e6, 6)

    def to_dict(self, *, peak_in_flight: int) -> dict[str, Any]:
        spent = self.spent
        return {
            "processor": self.processor,
            "pages": dict(self.pages),
            "fallback_pages": self.fallback_pages,
            "escalated_pages": self.escalated_pages,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "modelled_cost_usd": self.cost(),
            "requests": spent.requests if spent else 0,
            "retries": spent.retries if spent else 0,
            "peak_in_flight": peak_in_flight,
        }
