"""One page asked of the model as olmocr's pipeline asks it (olmocr 0.4.27, ``process_page``), on one of the threads
that keep a worker's pages in flight.

olmocr's rules, kept: attempt n is sampled at ``TEMPERATURES[n]``; an answer is good when it is valid (finish_reason
``stop``, within the model's context) and says the page's rotation is valid. An answer that says the page is rotated
starts the rotation path: the page is asked again, one attempt after another, turned by the corrections so far added
up, until an answer is good. Any other bad answer (none, unparseable, cut short) is asked again at the next attempt's
temperature, at the rotation the first answer set. After ``max_page_retries`` attempts, the last answer is kept if it
was valid (its rotation aside), as olmocr keeps it; else the page has no answer and falls back.

Where we differ, and why: olmocr fires a page's remaining retries in parallel when its own server's queue is empty (it
can see vLLM's queue; a client of a shared endpoint cannot), and retries a connection error ten times before it exits
the whole job. Here the client retries and backs off (client.py), and a dead endpoint opens its breaker: the group is
then handed back (ServiceUnavailable) for a later run, not failed. An endpoint that refuses this worker (a wrong model
name, a bad key) is the same: no page of any group would be read, so nothing is spent on them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypeGuard

from s3wq.errors import ServiceUnavailable
from s3wq.processors.vlm.answer import Judged, PageAnswer, judge_reply
from s3wq.processors.vlm.budget import ModelBudget
from s3wq.processors.vlm.client import BadReply, BreakerOpen, ChatClient, EndpointUnavailable, RequestRejected
from s3wq.processors.vlm.client import OutOfTime as ModelOutOfTime
from s3wq.processors.vlm.query import page_request, rotated, temperature_for
from s3wq.processors.vlm.settings import VlmSettings

# The endpoint refuses this worker, not this page: a model it does not serve (404), a key it does not take (401, 403).
_REFUSALS = {401: "its API key was refused", 403: "its API key may not use this model", 404: "it serves no such model"}


@dataclass
class Asked:
    """What the model made of one page: the answer kept (None: no good one), and what it took."""

    answer: PageAnswer | None
    attempts: int = 0
    rotation: int = 0  # the rotation (clockwise degrees, as olmocr's) of the image the kept answer read
    input_tokens: int = 0  # the kept answer's, as olmocr's PageResult counts them
    output_tokens: int = 0
    spent_input_tokens: int = 0  # every attempt's: what the page cost
    spent_output_tokens: int = 0
    seconds: float = 0.0
    why: str = ""  # why there is no answer, or why the one kept is less than good
    out_of_time: bool = False


class PageAsker:
    """Asks pages of one endpoint with olmocr's retry rules; thread-safe (the client and the budget are)."""

    def __init__(self, client: ChatClient, settings: VlmSettings, budget: ModelBudget):
        self.client = client
        self.settings = settings
        self.budget = budget

    def ask(self, png: bytes, until: float) -> Asked:
        """The page's answer (``png``: rendered as olmocr renders it), asked until the monotonic ``until`` at most.

        Raises ServiceUnavailable when the endpoint is down (its breaker open) or refuses this worker.
        """
        asked = Asked(answer=None)
        started = time.monotonic()
        try:
            self._attempts(png, until, asked)
        except ModelOutOfTime:
            asked.out_of_time = True
            asked.answer = None
            asked.why = "the run's time ran out before the model answered"
        asked.seconds = round(time.monotonic() - started, 3)
        return asked

    def _attempts(self, png: bytes, until: float, asked: Asked) -> None:
        retries = range(1, self.settings.max_page_retries)
        result = self._try(png, 0, 0, until, asked)
        rotation = _correction(result) % 360 if _rotated(result) else 0
        if _good(result):
            return self._keep(asked, result, 0)
        if _rotated(result):
            # olmocr's rotation path: each answer's correction is added to the turn the page is asked at.
            for attempt in retries:
                result = self._try(png, attempt, rotation, until, asked)
                if _good(result):
                    return self._keep(asked, result, rotation)
                rotation = (rotation + _correction(result)) % 360
        else:
            for attempt in retries:
                result = self._try(png, attempt, rotation, until, asked)
                if _good(result):
                    return self._keep(asked, result, rotation)
        if result is not None and result.valid and result.answer is not None:
            asked.why = "the model said the page is rotated on every attempt: its last answer is kept"
            return self._keep(asked, result, rotation)
        asked.why = f"no good answer in {asked.attempts} attempts (the last: {asked.why or 'none'})"
        return None

    def _keep(self, asked: Asked, result: Judged, rotation: int) -> None:
        asked.answer, asked.rotation = result.answer, rotation
        asked.input_tokens, asked.output_tokens = result.input_tokens, result.output_tokens

    def _try(self, png: bytes, attempt: int, rotation: int, until: float, asked: Asked) -> Judged | None:
        """One request (olmocr's ``try_single_page``): the reply judged, or None when there was no usable reply."""
        if not self.budget.allows_another_request():
            asked.why = "the model token cap of this run is reached"
            return None
        image = rotated(png, rotation) if rotation else png
        body = page_request(image, model=self.settings.model, temperature=temperature_for(attempt))
        asked.attempts += 1
        try:
            reply = self.client.complete(body, until=until)
        except BreakerOpen as exc:
            raise ServiceUnavailable(f"the model endpoint is not answering: {exc}") from None
        except RequestRejected as exc:
            if exc.status in _REFUSALS:
                raise ServiceUnavailable(f"the model endpoint refuses this worker ({_REFUSALS[exc.status]}): {exc}") from None
            asked.why = str(exc)
            return None
        except (EndpointUnavailable, BadReply) as exc:
            asked.why = str(exc)
            return None
        judged = judge_reply(reply.data)
        self.budget.spend(judged.input_tokens, judged.output_tokens)
        asked.spent_input_tokens += judged.input_tokens
        asked.spent_output_tokens += judged.output_tokens
        asked.why = judged.why
        return judged


def _good(result: Judged | None) -> TypeGuard[Judged]:
    return result is not None and result.valid and result.answer is not None and result.answer.is_rotation_valid


def _rotated(result: Judged | None) -> TypeGuard[Judged]:
    return result is not None and result.answer is not None and not result.answer.is_rotation_valid


def _correction(result: Judged | None) -> int:
    """The turn an answer asks for (0 when there is no answer to ask it)."""
    return result.answer.rotation_correction if result is not None and result.answer is not None else 0
