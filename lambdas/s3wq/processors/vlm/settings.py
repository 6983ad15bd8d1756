"""The ``vlm`` and ``auto`` processors' knobs, read from the environment once, each with a default but the endpoint.

The names follow olmocr's pipeline flags where it has one (``--server``, ``--model``, ``--api_key``,
``--max_page_retries``, ``--target_longest_image_dim``, ``--markdown``), so that one fleet's settings read like the other's.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar
from urllib.parse import urlsplit

from s3wq.errors import BadInput

ENV_ENDPOINT = "S3WQ_VLM_ENDPOINT"  # olmocr's --server: the API's base URL, ending /v1 as a rule
ENV_MODEL = "S3WQ_VLM_MODEL"
ENV_API_KEY = "S3WQ_VLM_API_KEY"  # the key itself; never logged, never in a record
ENV_API_KEY_SECRET = "S3WQ_VLM_API_KEY_SECRET"  # on Lambda: the ARN of a Secrets Manager secret holding the key
ENV_IN_FLIGHT = "S3WQ_VLM_IN_FLIGHT"
ENV_MAX_PAGE_RETRIES = "S3WQ_VLM_MAX_PAGE_RETRIES"
ENV_LONGEST_SIDE = "S3WQ_VLM_TARGET_LONGEST_IMAGE_DIM"
ENV_REQUEST_TIMEOUT = "S3WQ_VLM_REQUEST_TIMEOUT"
ENV_MAX_MODEL_PAGES = "S3WQ_VLM_MAX_MODEL_PAGES"
ENV_MAX_TOKENS = "S3WQ_VLM_MAX_TOKENS"
ENV_FALLBACK = "S3WQ_VLM_FALLBACK"
ENV_MARKDOWN = "S3WQ_VLM_MARKDOWN"
# What a hosted endpoint charges, in dollars per million tokens, for the run's modelled cost (0: not modelled). A
# model server of one's own costs by the GPU hour instead: docs/deploy.md turns that into a cost per page.
ENV_PRICE_INPUT = "S3WQ_VLM_PRICE_INPUT"
ENV_PRICE_OUTPUT = "S3WQ_VLM_PRICE_OUTPUT"

# olmocr's pipeline defaults (olmocr 0.4.27: --model, --max_page_retries, --target_longest_image_dim).
DEFAULT_MODEL = "allenai/olmOCR-2-7B-1025-FP8"
DEFAULT_MAX_PAGE_RETRIES = 8
DEFAULT_LONGEST_SIDE = 1288
# Pages in flight per worker. Each holds its PNG (a 1288-pixel page is ~0.1-0.6 MB) and its request body (base64: 4/3 of
# it) while it waits: 16 are under 20 MB, which a 512 MB Lambda holds beside the processor host; the model, not the
# worker, is then what limits a worker's pages per second.
DEFAULT_IN_FLIGHT = 16
DEFAULT_REQUEST_TIMEOUT = 120.0  # one answer of up to 8,000 tokens; always cut to what the run has left
# A mistake (the wrong queue, auto escalating every page) must not run up a bill: the model pages one run may send.
DEFAULT_MAX_MODEL_PAGES = 10_000
DEFAULT_MAX_TOKENS = 0  # 0: no cap in tokens (the page cap still holds)

_BOUNDS = {
    ENV_IN_FLIGHT: (1, 1024),
    ENV_MAX_PAGE_RETRIES: (1, 32),
    ENV_LONGEST_SIDE: (256, 8192),
    ENV_MAX_MODEL_PAGES: (0, 100_000_000),
    ENV_MAX_TOKENS: (0, 10**12),
}
_Choice = TypeVar("_Choice", bound=StrEnum)
_MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")


class BadVlmSetting(BadInput):
    """An S3WQ_VLM_* variable holds a value the vlm processor cannot use."""


class Fallback(StrEnum):
    """What a page the model could not read becomes."""

    OCR = "ocr"  # read by the CPU ocr path, marked as a fallback (as olmocr marks is_fallback)
    NONE = "none"  # an input error: the page's text is missing, and the record says why


@dataclass(frozen=True)
class VlmSettings:
    """Where the model is and how it is asked. ``api_key`` is held out of ``repr`` so that it is never logged."""

    endpoint: str = ""
    model: str = DEFAULT_MODEL
    api_key: str | None = field(default=None, repr=False)
    api_key_secret: str | None = None
    in_flight: int = DEFAULT_IN_FLIGHT
    max_page_retries: int = DEFAULT_MAX_PAGE_RETRIES
    longest_side: int = DEFAULT_LONGEST_SIDE
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    max_model_pages: int = DEFAULT_MAX_MODEL_PAGES
    max_tokens: int = DEFAULT_MAX_TOKENS
    fallback: Fallback = Fallback.OCR
    markdown: bool = False
    price_input: float = 0.0
    price_output: float = 0.0

    @property
    def completions_url(self) -> str:
        """olmocr's ``f"{server.rstrip('/')}/chat/completions"``."""
        return f"{self.endpoint.rstrip('/')}/chat/completions"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> VlmSettings:
        """The settings ``environ`` names, the defaults for the rest; raise BadVlmSetting naming the variable."""
        return cls(
            endpoint=endpoint_of(environ.get(ENV_ENDPOINT, "")),
            model=_model(environ),
            api_key=environ.get(ENV_API_KEY) or None,
            api_key_secret=_secret_arn(environ),
            in_flight=_whole(environ, ENV_IN_FLIGHT, DEFAULT_IN_FLIGHT),
            max_page_retries=_whole(environ, ENV_MAX_PAGE_RETRIES, DEFAULT_MAX_PAGE_RETRIES),
            longest_side=_whole(environ, ENV_LONGEST_SIDE, DEFAULT_LONGEST_SIDE),
            request_timeout=_seconds(environ, ENV_REQUEST_TIMEOUT, DEFAULT_REQUEST_TIMEOUT),
            max_model_pages=_whole(environ, ENV_MAX_MODEL_PAGES, DEFAULT_MAX_MODEL_PAGES),
            max_tokens=_whole(environ, ENV_MAX_TOKENS, DEFAULT_MAX_TOKENS),
            fallback=_choice(environ, ENV_FALLBACK, Fallback, Fallback.OCR),
            markdown=_flag(environ, ENV_MARKDOWN),
            price_input=_price(environ, ENV_PRICE_INPUT),
            price_output=_price(environ, ENV_PRICE_OUTPUT),
        )


def endpoint_of(value: str) -> str:
    """An endpoint URL checked: http or https, a host, no query, no credentials in it (a key goes in S3WQ_VLM_API_KEY)."""
    value = value.strip()
    if not value:
        raise BadVlmSetting(
            f"{ENV_ENDPOINT} is not set: the vlm processor needs the model's OpenAI-compatible endpoint, e.g. http://host:8000/v1"
        )
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadVlmSetting(f"{ENV_ENDPOINT}={value!r} is not an http(s) URL with a host, e.g. http://host:8000/v1")
    if parts.username or parts.password:
        raise BadVlmSetting(f"{ENV_ENDPOINT} holds credentials: put the API key in {ENV_API_KEY} (or {ENV_API_KEY_SECRET} on Lambda)")
    if parts.query or parts.fragment:
        raise BadVlmSetting(f"{ENV_ENDPOINT}={value!r} has a query or fragment: give the API's base URL, e.g. http://host:8000/v1")
    return value.rstrip("/")


def _model(environ: Mapping[str, str]) -> str:
    value = environ.get(ENV_MODEL, "").strip() or DEFAULT_MODEL
    if not _MODEL_RE.fullmatch(value):
        raise BadVlmSetting(f"{ENV_MODEL}={value!r} is not a model name (letters, digits and ._:/@+-, up to 200)")
    return value


_SECRET_ARN_RE = re.compile(r"arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+")


def _secret_arn(environ: Mapping[str, str]) -> str | None:
    value = environ.get(ENV_API_KEY_SECRET, "").strip()
    if not value:
        return None
    if not _SECRET_ARN_RE.fullmatch(value):
        raise BadVlmSetting(
            f"{ENV_API_KEY_SECRET}={value!r} is not a Secrets Manager secret ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME)"
        )
    return value


def _whole(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    low, high = _BOUNDS[name]
    try:
        value = int(raw)
    except ValueError:
        raise BadVlmSetting(f"{name}={raw!r} is not a whole number") from None
    if not low <= value <= high:
        raise BadVlmSetting(f"{name}={value} is out of range ({low} to {high})")
    return value


def _seconds(environ: Mapping[str, str], name: str, default: float) -> float:
    return _real(environ, name, default, (1.0, 900.0), "a number of seconds", "seconds")


def _price(environ: Mapping[str, str], name: str) -> float:
    return _real(environ, name, 0.0, (0.0, 1000.0), "a price (dollars per million tokens)", "dollars per million tokens")


def _real(environ: Mapping[str, str], name: str, default: float, bounds: tuple[float, float], what: str, unit: str) -> float:
    """A number ``name`` holds within ``bounds``; the default when it is unset."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise BadVlmSetting(f"{name}={raw!r} is not {what}") from None
    low, high = bounds
    if not low <= value <= high:
        raise BadVlmSetting(f"{name}={value:g} is out of range ({low:g} to {high:g} {unit})")
    return value


def _choice(environ: Mapping[str, str], name: str, kind: type[_Choice], default: _Choice) -> _Choice:
    raw = environ.get(name, "").strip().lower()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise BadVlmSetting(f"{name}={raw!r} is none of {', '.join(k.value for k in kind)}") from None


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise BadVlmSetting(f"{name}={raw!r} is neither 1 nor 0")


@functools.cache
def current_settings() -> VlmSettings:
    """This process's settings, read once."""
    return VlmSettings.from_env(os.environ)
