"""The model ``s3wq local demo|up --processor vlm`` (or ``auto``) asks: the user's endpoint, or a stand-in run here.

With no endpoint given, the stand-in (:mod:`s3wq.dev.vlm_standin`) runs in this process for as long as the local cloud
does, and the demo says so on a line of its own: its answers are made up, not a model's. Where the ocr extra is
importable here, the stand-in's answer to a page is s3wq's CPU OCR of the page's image, so the demo's text is the
page's; otherwise it is the stand-in's own text.

The endpoint is deployed as the stack's ``vlmEndpoint``, which the worker function gets as S3WQ_VLM_ENDPOINT.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from s3wq.dev.vlm_standin import StandIn


@contextmanager
def model_endpoint(endpoint: str | None, *, say: Callable[[str], None]) -> Iterator[str]:
    """``endpoint`` (checked by the caller), or a stand-in's, run until the block ends."""
    if endpoint:
        yield endpoint
        return
    reader = page_reader()
    with StandIn(reader=reader) as standin:
        text = "s3wq's CPU OCR of each page" if reader else "made up"
        say(f"vlm: no --vlm-endpoint given: using a stand-in endpoint at {standin.url} (not a model: its answers are {text})")
        yield standin.url


def page_reader() -> Callable[[bytes], str] | None:
    """png bytes -> the text s3wq's CPU engine reads on it, when the ocr extra is importable here; else None."""
    try:
        import numpy as np
        from PIL import Image

        from s3wq.processors.ocr.engine import PageNotRead, read_page
    except ImportError:
        return None

    def read(png: bytes) -> str:
        pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
        try:
            reading = read_page(pixels, dpi=72.0)
        except PageNotRead:
            return ""
        return "\n".join(line.text for line in reading.read_lines)

    return read
