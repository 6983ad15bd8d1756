"""Every request checked against what olmocr 0.4.27's pipeline sends (``build_page_query`` and ``try_single_page``).

olmocr sends ``model``, one user message of a text part (the prompt) then an ``image_url`` part (the page as a
``data:image/png;base64,`` URL, longest side ``--target_longest_image_dim``), ``max_tokens`` 8000 and a temperature of
its ``TEMPERATURE_BY_ATTEMPT``, and ``guided_regex`` with ``--guided_decoding``. Anything else is refused with the status
vLLM would give (404 for a model it does not serve, 400 for the rest), so that a client that strays is caught here, not
on a GPU.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from s3wq.errors import BadInput
from s3wq.processors.vlm.prompt import PROMPT, TEMPERATURES

from .png import NotAPng, PngHeader, read_header

# olmocr 0.4.27's pipeline: MAX_TOKENS in build_page_query, and the distinct values of TEMPERATURE_BY_ATTEMPT.
OLMOCR_MAX_TOKENS = 8000
OLMOCR_TEMPERATURES = tuple(sorted(set(TEMPERATURES)))
# The longest side may be a pixel off: a renderer scales a page's points to pixels and rounds.
LONGEST_SIDE_SLACK = 1
_KEYS = {"model", "messages", "max_tokens", "temperature"}
_OPTIONAL_KEYS = {"guided_regex"}
PNG_URL_PREFIX = "data:image/png;base64,"


class Refused(BadInput):
    """A request olmocr would never send, or one the stand-in is set to refuse: ``status`` and vLLM's error ``kind``."""

    def __init__(self, message: str, status: int = 400, kind: str = "BadRequestError"):
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(frozen=True)
class Expectations:
    """What a request must be; the defaults are olmocr's."""

    model: str
    longest_side: int
    temperatures: tuple[float, ...] = OLMOCR_TEMPERATURES
    max_tokens: int = OLMOCR_MAX_TOKENS
    prompt: str | None = PROMPT  # olmocr's; None: any text part
    api_key: str | None = None  # None: no Authorization needed


@dataclass
class Seen:
    """What was read of a request before it was answered or refused: what its record shows."""

    model: str | None = None
    temperature: float | None = None
    prompt: str | None = None
    png: bytes = b""
    header: PngHeader | None = None
    sha1: str | None = None


def check_authorization(header: str | None, expect: Expectations) -> None:
    if expect.api_key is not None and header != f"Bearer {expect.api_key}":
        raise Refused("the request has no Authorization: Bearer with the stand-in's API key", 401, "AuthenticationError")


def check_request(body: bytes, expect: Expectations, seen: Seen) -> None:
    """Fill ``seen`` from a chat-completions body; raise Refused at the first thing olmocr would not send."""
    try:
        query = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Refused(f"the body is not JSON ({exc})") from None
    if not isinstance(query, dict):
        raise Refused(f"the body is JSON {type(query).__name__}, not an object")
    seen.model = query.get("model") if isinstance(query.get("model"), str) else None
    if query.get("model") != expect.model:
        raise Refused(f"The model `{query.get('model')}` does not exist.", 404, "NotFoundError")
    missing, unknown = _KEYS - set(query), set(query) - _KEYS - _OPTIONAL_KEYS
    if missing or unknown:
        raise Refused(
            f"olmocr sends exactly {', '.join(sorted(_KEYS))} (and guided_regex): this request "
            + "; ".join(part for part in (_named("lacks", missing), _named("adds", unknown)) if part)
        )
    _check_sampling(query, expect, seen)
    prompt, url = _parts(query["messages"])
    seen.prompt = prompt
    if expect.prompt is not None and prompt != expect.prompt:
        raise Refused(f"the text part is not olmocr's prompt (it begins {prompt[:60]!r})")
    _check_image(url, expect, seen)
    if "guided_regex" in query and not isinstance(query["guided_regex"], str):
        raise Refused("guided_regex is not a string")


def _named(verb: str, keys: set[str]) -> str:
    return f"{verb} {', '.join(sorted(keys))}" if keys else ""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_sampling(query: dict[str, Any], expect: Expectations, seen: Seen) -> None:
    temperature = query["temperature"]
    if _number(temperature):
        seen.temperature = float(temperature)
    if not _number(temperature) or not any(abs(temperature - t) < 1e-9 for t in expect.temperatures):
        raise Refused(f"temperature {temperature!r} is none of olmocr's {', '.join(map(str, expect.temperatures))}")
    max_tokens = query["max_tokens"]
    if type(max_tokens) is not int or max_tokens != expect.max_tokens:
        raise Refused(f"max_tokens {max_tokens!r} is not olmocr's {expect.max_tokens}")


def _parts(messages: Any) -> tuple[str, str]:
    """The prompt and the image's URL of olmocr's one user message: a text part, then an image_url part."""
    if not isinstance(messages, list) or len(messages) != 1:
        raise Refused(f"messages holds {len(messages) if isinstance(messages, list) else 'no list of'} messages, not one")
    message = messages[0]
    if not isinstance(message, dict) or message.get("role") != "user" or set(message) != {"role", "content"}:
        raise Refused("the message is not one user message of role and content")
    content = message["content"]
    if not isinstance(content, list) or len(content) != 2 or not all(isinstance(part, dict) for part in content):
        raise Refused("the message's content is not two parts, a text then an image_url")
    text, image = content
    if text.get("type") != "text" or set(text) != {"type", "text"} or not isinstance(text["text"], str):
        raise Refused("the first part is not a text part holding the prompt")
    if image.get("type") != "image_url" or set(image) != {"type", "image_url"}:
        raise Refused("the second part is not an image_url part")
    url = image["image_url"].get("url") if isinstance(image["image_url"], dict) else None
    if not isinstance(url, str) or set(image["image_url"]) != {"url"}:
        raise Refused("the image_url part holds no url (and only a url)")
    return text["text"], url


def _check_image(url: str, expect: Expectations, seen: Seen) -> None:
    if not url.startswith(PNG_URL_PREFIX):
        raise Refused(f"the image's URL does not start {PNG_URL_PREFIX!r} (it starts {url[:30]!r})")
    try:
        png = base64.b64decode(url[len(PNG_URL_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise Refused("the image's URL does not hold base64") from None
    seen.png, seen.sha1 = png, hashlib.sha1(png).hexdigest()
    try:
        seen.header = header = read_header(png)
    except NotAPng as exc:
        raise Refused(f"the image is not a PNG: {exc}") from None
    longest = max(header.width, header.height)
    if abs(longest - expect.longest_side) > LONGEST_SIDE_SLACK:
        raise Refused(f"the image is {header.width}x{header.height}: its longest side is not {expect.longest_side} pixels")
