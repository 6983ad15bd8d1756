"""The ``ocr`` processor's knobs, read from the environment once, each with a default: how pages are routed (mode), the
scripts kept (lang), render dpi, pixel cap, page cap and the decoder's memory cap."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from s3wq.errors import BadInput
from s3wq.processors.ocr.scripts import DEFAULT_LANGUAGES, LANGUAGE_SCRIPTS, Script, scripts_named

ENV_MODE = "S3WQ_OCR_MODE"
ENV_LANG = "S3WQ_OCR_LANG"
ENV_DPI = "S3WQ_OCR_DPI"
ENV_MAX_PIXELS = "S3WQ_OCR_MAX_PIXELS"
ENV_MAX_PAGES = "S3WQ_OCR_MAX_PAGES"
ENV_MAX_DECODE_MB = "S3WQ_OCR_MAX_DECODE_MB"

# 200 dpi: bench/ocr.py measured CER ~0 on clean pages and ~2 % on the worst degraded
# condition at 2.4 core-seconds a page; 300 dpi cost more and read no better.
DEFAULT_DPI = 200
# A US-letter page at 200 dpi is 3.7 Mpx; 16 Mpx holds a tabloid page at 200 dpi or
# a letter page at 400, and as 8-bit RGB is 48 MB: the one page in memory stays small.
DEFAULT_MAX_PIXELS = 16_000_000
# One document must fit one Lambda run (~890 s of the 15-minute invocation, after the worker's
# margins): at the ~2.25 s bench/ocr.py measured a scanned page, 300 pages is ~675 s. What a
# group's inputs cannot read within the run (time_shares.py) is each one's input error, saying
# how far it got: a worker with a longer run (s3wq work --time-limit) reads more.
DEFAULT_MAX_PAGES = 300
# The address space (RLIMIT_AS) of the process that opens and decodes an input (decoder.py).
# It must fit beside the rest in the ocr profile's 1,769 MB worker (processors/profiles.py): the
# processor host with the engine peaked at 1,282 MB RSS (bench/ocr.py), the worker and the
# host's warden at ~36 MB each (measured in a run of `s3wq work --processor ocr`), which leaves
# ~415 MB. 384 MB of it is ~340 MB for decoding beyond the decoder's own (~40 MB at its start): an
# 80 Mpx grey frame, a 35 Mpx colour A4 page at 600 dpi, a letter page rendered at 16 Mpx.
DEFAULT_MAX_DECODE_MB = 384

_BOUNDS = {
    ENV_DPI: (36, 1200),
    ENV_MAX_PIXELS: (100_000, 200_000_000),
    ENV_MAX_PAGES: (1, 100_000),
    # Below 128 MB the decoder's own (~40 MB at its start) leaves too little to render a page.
    ENV_MAX_DECODE_MB: (128, 65_536),
}


class BadOcrSetting(BadInput):
    """An S3WQ_OCR_* variable holds a value the ocr processor cannot use."""


class OcrMode(StrEnum):
    """How a page with a text layer is read."""

    AUTO = "auto"  # the layer is judged: taken where it reads as text, OCR'd where it does not, images it leaves out read
    FORCE = "force"  # every page OCR'd, its text layer ignored
    TEXT_LAYER = "text-layer"  # a page's text layer taken as it is, whatever it holds; pages with none OCR'd


@dataclass(frozen=True)
class OcrSettings:
    """How the ocr processor reads: ``dpi`` pages are rendered at, at most ``max_pixels`` a page, ``max_pages`` an input,
    decoded in at most ``max_decode_mb`` MB of address space."""

    mode: OcrMode = OcrMode.AUTO
    scripts: frozenset[Script] = LANGUAGE_SCRIPTS[DEFAULT_LANGUAGES]
    dpi: int = DEFAULT_DPI
    max_pixels: int = DEFAULT_MAX_PIXELS
    max_pages: int = DEFAULT_MAX_PAGES
    max_decode_mb: int = DEFAULT_MAX_DECODE_MB

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> OcrSettings:
        """The settings ``environ`` names, the defaults for the rest; raise BadOcrSetting naming the variable."""
        return cls(
            mode=_mode(environ),
            scripts=_scripts(environ),
            dpi=_whole_number(environ, ENV_DPI, DEFAULT_DPI),
            max_pixels=_whole_number(environ, ENV_MAX_PIXELS, DEFAULT_MAX_PIXELS),
            max_pages=_whole_number(environ, ENV_MAX_PAGES, DEFAULT_MAX_PAGES),
            max_decode_mb=_whole_number(environ, ENV_MAX_DECODE_MB, DEFAULT_MAX_DECODE_MB),
        )


def _mode(environ: Mapping[str, str]) -> OcrMode:
    raw = environ.get(ENV_MODE, "").strip()
    if not raw:
        return OcrMode.AUTO
    try:
        return OcrMode(raw.lower())
    except ValueError:
        raise BadOcrSetting(f"{ENV_MODE}={raw!r}: expected one of {', '.join(mode.value for mode in OcrMode)}") from None


def _scripts(environ: Mapping[str, str]) -> frozenset[Script]:
    raw = environ.get(ENV_LANG, "").strip()
    if not raw:
        return LANGUAGE_SCRIPTS[DEFAULT_LANGUAGES]
    scripts = scripts_named(raw)
    if scripts is None:
        raise BadOcrSetting(
            f"{ENV_LANG}={raw!r}: expected language codes (en, fr, ru, zh, ...) or scripts ({', '.join(s.value for s in Script)}), comma-separated"
        )
    return scripts


def _whole_number(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    low, high = _BOUNDS[name]
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise BadOcrSetting(f"{name}={raw!r}: expected a whole number from {low} to {high}") from None
    if not low <= value <= high:
        raise BadOcrSetting(f"{name}={value}: expected a whole number from {low} to {high}")
    return value


@functools.cache
def current_settings() -> OcrSettings:
    """This process's settings, parsed once: the processor loads them before its first group, so a bad value fails there."""
    return OcrSettings.from_env(os.environ)
