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

# olmocr's prompt, verbatim: olmocr 0.4.27 (Apache-2.0), olmocr.prompts.build_no_anchoring_v4_yaml_prompt(). The model
# was trained on this text; a test holds it equal to olmocr's function.
PROMPT = (
    "Attached is one page of a document that you must process. "
    "Just return the plain text representation of this document as if you were reading it naturally. "
    "Convert equations to LateX and tables to HTML.\n"
    "If there are any figures or charts, label them with the following markdown syntax "
    "![Alt text describing the contents of the figure](page_startx_starty_width_height.png)\n"
    "Return your output as markdown, with a front matter section on top specifying values for the primary_language, "
    "is_rotation_valid, rotation_correction, is_table, and is_diagram parameters."
)
# olmocr's TEMPERATURE_BY_ATTEMPT: a retry is hotter, to get past a model repeating itself.
TEMPERATURES = (0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0)
# The answer's budget (build_page_query's MAX_TOKENS); the context the reply must fit is answer.MODEL_MAX_CONTEXT.
MAX_TOKENS = 8000
# The turns a page may be given (olmocr's rotation_correction values), in degrees counter-clockwise as PIL turns.
ROTATIONS = (0, 90, 180, 270)
_TRANSPOSE = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}


def temperature_for(attempt: int) -> float:
    """The temperature of ``attempt`` (from 0), as olmocr picks it: the last one's for every attempt past the list."""
    if attempt < 0:
        raise ValueError(f"attempt {attempt} is not an attempt (they count from 0)")
    return TEMPERATURES[min(attempt, len(TEMPERATURES) - 1)]


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
