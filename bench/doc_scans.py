"""Born-digital pages turned into what scanners and earlier OCR leave: image-only PDFs, and images under a hidden text layer.

* ``scan``: the page rendered by pypdfium2 at a dpi, turned by a small angle,
  with light sensor noise, stored as the only image of its page (grey, Flate);
* ``old_ocr_layer``: the same image under an invisible (render mode 3) text
  layer in a font named GlyphLessFont, as OCR tools write them, whose words
  are corrupted as old OCR corrupted them: letters confused (rn for m, li
  for h, 1 for l), dropped, words split, and garbage tokens;
* ``tesseract_layer``: the image with the hidden layer Tesseract writes itself
  (``tesseract list out pdf``): a good earlier OCR.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from doc_layout import PAGE_HEIGHT, PAGE_WIDTH, PageDrawing
from ocr_venv import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "lambdas"))
from s3wq.dev.samples import image_pdf

# What old OCR read for a letter, by the shapes it confused.
CONFUSIONS = {
    "m": "rn", "h": "li", "l": "1", "i": "l", "e": "c", "o": "0", "a": "o", "s": "5", "n": "ri", "u": "ii",
    "t": "f", "c": "e", "d": "cl", "r": "i", "w": "vv", "M": "IVI", "T": "'I", "O": "0", "S": "$", "B": "13",
}  # fmt: skip
GARBAGE = "..,;:'`*-~^i!l|1I"
TESSERACT_SECONDS = 300


def render(pdf: bytes, dpi: int) -> list[Any]:
    """Every page of ``pdf`` as a grey PIL image at ``dpi`` (pypdfium2, as the processor renders)."""
    import pypdfium2

    document = pypdfium2.PdfDocument(pdf)
    try:
        return [page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L") for page in document]
    finally:
        document.close()


def scanned(image: Any, skew_degrees: float, seed: int) -> Any:
    """``image`` as a scanner gives it: turned by ``skew_degrees``, with light noise and a few specks."""
    import numpy as np
    from PIL import Image

    if skew_degrees:
        image = image.rotate(skew_degrees, resample=Image.Resampling.BICUBIC, fillcolor=255)
    rng = np.random.default_rng(seed)
    pixels = np.asarray(image, dtype=np.float32) + rng.normal(0, 7, (image.height, image.width))
    specks = rng.random((image.height, image.width)) < 0.0004
    pixels[specks] = 60
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def scan(pdf: bytes, dpi: int, skew: tuple[float, float] | None, seed: int) -> tuple[bytes, list[Any]]:
    """An image-only PDF of ``pdf``'s pages at ``dpi``, each turned by an angle drawn from ``skew`` (low, high degrees) either way."""
    rng = random.Random(seed)
    images = []
    for number, page in enumerate(render(pdf, dpi)):
        angle = rng.uniform(*skew) * rng.choice((-1, 1)) if skew else 0.0
        images.append(scanned(page, angle, seed * 100 + number))
    return image_pdf(images, dpi), images


def old_ocr(text: str, rng: random.Random) -> str:
    """``text`` as a poor OCR of long ago read it: about one letter in eight wrong, a few words split or garbage."""
    words = []
    for word in text.split():
        chars = []
        for char in word:
            roll = rng.random()
            if roll < 0.09 and char in CONFUSIONS:
                chars.append(CONFUSIONS[char])
            elif roll < 0.12:
                continue  # dropped
            elif roll < 0.14:
                chars.append(char + rng.choice(GARBAGE))
            else:
                chars.append(char)
        read = "".join(chars)
        if len(read) > 4 and rng.random() < 0.06:
            cut = rng.randrange(1, len(read) - 1)
            read = f"{read[:cut]} {read[cut:]}"
        words.append(read)
        if rng.random() < 0.03:
            words.append("".join(rng.choice(GARBAGE + "LCVWIGta*A41") for _ in range(rng.randint(3, 9))))
    return " ".join(words)


def hidden_layer_pdf(images: list[Any], dpi: int, pages: list[PageDrawing], seed: int) -> bytes:
    """Each image over its whole page, under the page's lines in invisible text, corrupted, each line stretched over its width."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfgen import canvas as pdfcanvas

    rng = random.Random(seed)
    buffer = io.BytesIO()
    canvas = pdfcanvas.Canvas(buffer, pagesize=(PAGE_WIDTH, PAGE_HEIGHT), invariant=1)
    for image, page in zip(images, pages):
        canvas.drawImage(ImageReader(image), 0, 0, image.width * 72 / dpi, image.height * 72 / dpi)
        for run in page.runs:
            read = old_ocr(run.text, rng)
            if not read:
                continue
            drawn = pdfmetrics.stringWidth(read, "Helvetica", run.size) or 1.0
            text = canvas.beginText(run.x, PAGE_HEIGHT - run.baseline)
            text.setTextRenderMode(3)  # invisible: neither filled nor stroked, as OCR layers are
            text.setFont("Helvetica", run.size)
            text.setHorizScale(100 * pdfmetrics.stringWidth(run.text, run.font, run.size) / drawn)
            text.textOut(read)
            canvas.drawText(text)
        canvas.showPage()
    canvas.save()
    return glyphless(buffer.getvalue())


def glyphless(pdf: bytes) -> bytes:
    """``pdf`` with every font renamed GlyphLessFont, the name OCR tools (Tesseract, OCRmyPDF) give their invisible font."""
    import pypdf
    from pypdf.generic import NameObject

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(pdf)))
    for page in writer.pages:
        fonts = page.get("/Resources", {}).get("/Font", {})
        for key in fonts:
            fonts[key].get_object()[NameObject("/BaseFont")] = NameObject("/GlyphLessFont")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def tesseract_env() -> dict[str, str]:
    """One thread: Tesseract's OpenMP would take every core (OMP_THREAD_LIMIT is what its docs name)."""
    return {**os.environ, "OMP_THREAD_LIMIT": "1", "OMP_NUM_THREADS": "1"}


def tesseract_layer(images: list[Any], dpi: int) -> bytes:
    """The images as Tesseract's own searchable PDF (each image, under its OCR in GlyphLessFont)."""
    with tempfile.TemporaryDirectory(prefix="doc-corpus-") as folder:
        paths = []
        for number, image in enumerate(images):
            path = Path(folder) / f"page-{number}.png"
            image.save(path, dpi=(dpi, dpi))
            paths.append(str(path))
        listing = Path(folder) / "pages.txt"
        listing.write_text("\n".join(paths) + "\n")
        command = ["tesseract", str(listing), str(Path(folder) / "out"), "--dpi", str(dpi), "-l", "eng", "pdf"]
        subprocess.run(command, check=True, capture_output=True, timeout=TESSERACT_SECONDS, env=tesseract_env())
        return (Path(folder) / "out.pdf").read_bytes()
