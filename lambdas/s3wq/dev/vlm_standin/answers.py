"""The stand-in's answers, in olmocr's format (YAML front matter, then the page's text) and vLLM's bodies.

The text is a reader's (png bytes -> text) when one is given, else one deterministic line that says it is a
stand-in's and names the image's size and sha1, so that tests can tell pages apart. Token counts are modelled, not
measured, and deterministic: a vision model's image tokens are its 28x28-pixel patches (Qwen2-VL's, which olmOCR's
models are), plus a token a word of the prompt; an answer is about four characters a token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from .checks import Seen
from .script import Behaviour, Step

PIXELS_PER_IMAGE_TOKEN = 28 * 28
CHARS_PER_TOKEN = 4
# olmocr's MODEL_MAX_CONTEXT in try_single_page: an answer whose total_tokens is over it is not valid.
OLMOCR_MAX_CONTEXT = 16384

Reader = Callable[[bytes], str]


@dataclass(frozen=True)
class Answer:
    content: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def stand_in_text(seen: Seen) -> str:
    assert seen.header is not None and seen.sha1 is not None
    return f"Stand-in text for a {seen.header.width}x{seen.header.height} page image, sha1 {seen.sha1[:12]}: no model read it."


def front_matter(*, rotation_valid: bool = True, correction: int = 0, table: bool = False) -> str:
    """olmocr's front matter, as its model writes it: the five fields of PageResponse but natural_text, in its order."""
    return (
        "---\nprimary_language: en\n"
        f"is_rotation_valid: {rotation_valid}\nrotation_correction: {correction}\n"
        f"is_table: {table}\nis_diagram: False\n---\n"
    )


def _table(seen: Seen) -> str:
    assert seen.header is not None and seen.sha1 is not None
    return (
        "<table>\n<tr><th>Page</th><th>Width</th><th>Height</th></tr>\n"
        f"<tr><td>{seen.sha1[:12]}</td><td>{seen.header.width}</td><td>{seen.header.height}</td></tr>\n</table>"
    )


def _content(step: Step, text: str, seen: Seen) -> str:
    if step.behaviour is Behaviour.MALFORMED:
        # rotation_correction, is_table and is_diagram missing: olmocr's FrontMatterParser raises "Missing required field".
        return "---\nprimary_language: en\nis_rotation_valid: True\n---\n" + text
    if step.behaviour is Behaviour.ROTATED:
        return front_matter(rotation_valid=False, correction=step.rotation or 0) + text
    if step.behaviour is Behaviour.TABLE:
        return front_matter(table=True) + text + "\n\n" + _table(seen)
    if step.behaviour is Behaviour.LENGTH:
        return front_matter() + text[: max(1, len(text) // 2)]  # cut short where max_tokens ran out
    return front_matter() + text


def answer(step: Step, seen: Seen, reader: Reader | None, max_tokens: int) -> Answer:
    """The answer ``step`` makes for the request ``seen`` (one of the behaviours that answer 200)."""
    assert seen.header is not None
    text = reader(seen.png) if reader is not None else stand_in_text(seen)
    content = _content(step, text, seen)
    prompt_tokens = math.ceil(seen.header.width * seen.header.height / PIXELS_PER_IMAGE_TOKEN) + len((seen.prompt or "").split())
    completion_tokens = max(1, math.ceil(len(content) / CHARS_PER_TOKEN))
    if step.behaviour is Behaviour.LENGTH:
        completion_tokens = max_tokens
    if step.behaviour is Behaviour.TOO_LONG:
        completion_tokens = max_tokens
        prompt_tokens = max(prompt_tokens, OLMOCR_MAX_CONTEXT + 1 - completion_tokens)
    return Answer(content, "length" if step.behaviour is Behaviour.LENGTH else "stop", prompt_tokens, completion_tokens)


def completion_body(result: Answer, model: str, number: int) -> dict[str, Any]:
    """vLLM's chat.completion body for one answer."""
    return {
        "id": f"chatcmpl-standin-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result.content, "tool_calls": []},
                "logprobs": None,
                "finish_reason": result.finish_reason,
                "stop_reason": None,
            }
        ],
        "usage": {
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "total_tokens": result.total_tokens,
        },
    }


def models_body(model: str) -> dict[str, Any]:
    """vLLM's GET /v1/models body: the one model served."""
    entry = {"id": model, "object": "model", "created": int(time.time()), "owned_by": "s3wq-standin", "root": model}
    return {"object": "list", "data": [{**entry, "parent": None, "max_model_len": OLMOCR_MAX_CONTEXT}]}


def error_kind(status: int) -> str:
    """vLLM's error type for a status: BadRequestError, NotFoundError, InternalServerError; else the phrase, as one word."""
    named = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError", 500: "InternalServerError"}
    if status in named:
        return named[status]
    try:
        return HTTPStatus(status).phrase.title().replace(" ", "").replace("-", "") + "Error"
    except ValueError:
        return "InternalServerError" if status >= 500 else "BadRequestError"


def error_body(status: int, message: str, kind: str | None = None) -> dict[str, Any]:
    """vLLM's ErrorResponse."""
    return {"object": "error", "message": message, "type": kind or error_kind(status), "param": None, "code": status}
