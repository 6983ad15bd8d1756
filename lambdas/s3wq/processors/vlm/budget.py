"""The model pages and tokens one worker process may spend, so that a mistake cannot run up a bill.

A mistake here is the wrong queue, or ``auto`` escalating every page because a setting is off. The cap is per process
(one Lambda invocation's worker, one ``s3wq work`` run): it is what one run can cost, whatever the group sizes, and
``S3WQ_VLM_MAX_MODEL_PAGES`` x the fleet's workers bounds a whole execution. A page the cap refuses is read by the CPU
path (or is an input error when no fallback is installed), and its record says the cap was why.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from s3wq.processors.vlm.settings import ENV_MAX_MODEL_PAGES, ENV_MAX_TOKENS, VlmSettings


@dataclass
class Spent:
    """What the model was asked for so far: pages sent, requests, and tokens in and out (every attempt's)."""

    pages: int = 0
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class ModelBudget:
    """Thread-safe: the page cap (``max_model_pages``) and the token cap (``max_tokens``; 0: none) of one process."""

    def __init__(self, max_pages: int, max_tokens: int = 0):
        self.max_pages = max_pages
        self.max_tokens = max_tokens
        self.spent = Spent()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, settings: VlmSettings) -> ModelBudget:
        return cls(settings.max_model_pages, settings.max_tokens)

    def take_page(self) -> str | None:
        """Take one page of the cap; None when taken, else why not (the record's reason)."""
        with self._lock:
            if self.spent.pages >= self.max_pages:
                return f"the model page cap of this run is reached ({ENV_MAX_MODEL_PAGES}={self.max_pages})"
            if self.max_tokens and self.spent.input_tokens + self.spent.output_tokens >= self.max_tokens:
                return f"the model token cap of this run is reached ({ENV_MAX_TOKENS}={self.max_tokens})"
            self.spent.pages += 1
            return None

    def allows_another_request(self) -> bool:
        """False once the token cap is spent: a page's retries stop there too."""
        with self._lock:
            return not self.max_tokens or self.spent.input_tokens + self.spent.output_tokens < self.max_tokens

    def spend(self, input_tokens: int, output_tokens: int) -> None:
        with self._lock:
            self.spent.requests += 1
            self.spent.input_tokens += input_tokens
            self.spent.output_tokens += output_tokens

    def snapshot(self) -> Spent:
        with self._lock:
            return Spent(**vars(self.spent))
