"""A page's request to the model, built as olmocr 0.4.27's pipeline builds it (``build_page_query``, ``try_single_page``).

The model (olmOCR-2) was trained on olmocr's prompt and its page images, so
both are protocol here, not style: the prompt's text, the image's size (its
longest side ``longest_side`` pixels, ``render_scale``), the PNG in a
``data:`` URL, the token budget and the temperature of each attempt.
tests/ocr/test_vlm_olmocr.py holds each of them to olmocr's own code.

A page is rendered by the ocr processor's decoder
(``Decoder.render(index, until, longest_side=..., colour=True)``), its pixels
made a PNG here (``png_of``), and turned as the model asks (``rotated``).
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
from PIL import Image

from s3wq.processors.ocr.decoder_base import longest_side_scale
from s3wq.processors.vlm.answer import MODEL_MAX_CONTEXT
from s3wq.processors.vlm.prompt import MAX_TOKENS, PROMPT, TEMPERATURES, temperature_for

__all__ = [
    "MAX_TOKENS",
    "MODEL_MAX_CONTEXT",
    "PROMPT",
    "ROTATIONS",
    "TEMPERATURES",
    "page_request",
    "png_of",
    "render_scale",
    "rotated",
    "temperature_for",
]

# The turns a page may be given (olmocr's rotation_correction values), in degrees counter-clockwise as PIL turns.
ROTATIONS = (0, 90, 180, 270)
_TRANSPOSE = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}


def page_request(png: bytes, *, model: str, temperature: float) -> dict[str, Any]:
    """The chat-completions body for one page's PNG: olmocr's, key for key (its temperature set as try_single_page sets it)."""
    image_url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": PROMPT},
                    {"type": "image_url", "image_url": {"url": image_url}},
                ],
            }
        ],
        "max_tokens": MAX_TOKENS,
        "temperature": temperature,
    }


def rotated(png: bytes, rotation: int) -> bytes:
    """``png`` turned ``rotation`` degrees as olmocr turns a page the model said was rotated (PIL's transpose, saved as
    PNG again); unchanged at 0."""
    if rotation not in ROTATIONS:
        raise ValueError(f"rotation {rotation!r} is none of {', '.join(map(str, ROTATIONS))}")
    if rotation == 0:
        return png
    with Image.open(io.BytesIO(png)) as image:
        turned = image.transpose(_TRANSPOSE[rotation])
    out = io.BytesIO()
    turned.save(out, format="PNG")
    return out.getvalue()


def render_scale(width_pt: float, height_pt: float, longest_side: int) -> float:
    """Pixels a point that render a page of ``width_pt`` x ``height_pt`` points with its longest side ``longest_side``
    pixels: olmocr's ``pdftoppm -r longest_side*72/longest`` (decoder_base.longest_side_scale, which the decoder uses)."""
    return longest_side_scale(width_pt, height_pt, longest_side)


def png_of(pixels: np.ndarray) -> bytes:
    """A PNG of 8-bit pixels: grey (height x width) or RGB (height x width x 3), as the decoder renders them."""
    if pixels.dtype != np.uint8 or not (pixels.ndim == 2 or (pixels.ndim == 3 and pixels.shape[2] == 3)) or 0 in pixels.shape:
        raise ValueError(f"not 8-bit grey or RGB pixels: {pixels.dtype} {pixels.shape}")
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")  # 2-D uint8 is L, three bands RGB
    return out.getvalue()
