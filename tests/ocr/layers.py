"""PDF pages' layers as the ocr processor's decoder gives them, run in the OCR venv: ``python layers.py OUTDIR``.

Writes small PDFs by hand (split accents, a ligature, a hidden OCR layer
over a scan, a drawn table, a rotated and a cropped page), reads each page's
layer and some renders through decoding.Decoder (the decoder process), and
prints them as JSON, with where the rendered ink fell and what a dense page
of text costs the decoder.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from s3wq.dev.samples import make_pdf, pdf_of
from s3wq.processors.ocr.decoding import Decoder, LayerPage, ScannedPage
from s3wq.processors.ocr.layout.model import Box
from s3wq.processors.ocr.settings import OcrSettings

DENSE_PAGES = 60
DENSE_LINES = [f"lorem ipsum dolor sit amet consectetur adipiscing {number:02d}" for number in range(55)]
# Helvetica at 12 pt: M 10, i 2.664, n 6.672, a 6.672 points wide; a tilde or an acute 3.996 (WinAnsi \230, \264).
ACCENTED = (
    b"1 0 0 1 72 700 Tm (Min) Tj 1 0 0 1 86 700 Tm (\\230) Tj 1 0 0 1 91.336 700 Tm (a) Tj "
    b"1 0 0 1 93 700 Tm (\\264) Tj 1 0 0 1 98.008 700 Tm (c) Tj 1 0 0 1 150 700 Tm (of\\001ce) Tj "
    # TeX's way: the accent first, then the letter under it (c 6, a 6.672, f 3.336, e 6.672 points wide).
    b"1 0 0 1 72 650 Tm (caf) Tj 1 0 0 1 89.346 650 Tm (\\264) Tj 1 0 0 1 88.008 650 Tm (e) Tj 1 0 0 1 120 650 Tm (it\\264s) Tj"
)
WINANSI_FI = b"<< /Type /Encoding /BaseEncoding /WinAnsiEncoding /Differences [1 /fi] >>"
GREY_PIXELS = b"\x80" * 4
# Words set in pieces, one text object each: "Hel" "lo" abutting, "Wor" "ld" 0.1 em apart, then 0.3 em apart (W 11.328,
# o 6.672, r 3.996 points wide at 12 pt).
FRAGMENTS = (
    b"1 0 0 1 72 700 Tm (Hel) Tj 1 0 0 1 90.684 700 Tm (lo) Tj 1 0 0 1 150 700 Tm (Wor) Tj 1 0 0 1 173.2 700 Tm (ld) Tj "
    b"1 0 0 1 250 700 Tm (Wor) Tj 1 0 0 1 275.6 700 Tm (ld) Tj"
)


def one_page_pdf(content: bytes, *, page: bytes = b"/MediaBox [0 0 612 792]", fonts: bytes = b"", extra: list[bytes] = ()) -> bytes:
    """A one-page PDF: objects 1-4 are its catalog, pages, page and content; ``extra`` follow from 5 (fonts, images)."""
    return pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R " + page + b" /Contents 4 0 R /Resources << " + fonts + b" >> >>",
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
            *extra,
        ]
    )


def helvetica(encoding: bytes = b"/WinAnsiEncoding") -> bytes:
    return b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding " + encoding + b" >>"


def inputs() -> dict[str, bytes]:
    image = b"<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8 /Length 4 >>"
    hidden_layer = b"q 612 0 0 792 0 0 cm /Im1 Do Q BT 3 Tr /F1 12 Tf 72 700 Td (Deposition exhibit of the plaintiff) Tj ET"
    table = (
        b"1 w 72 600 m 372 600 l S 72 560 m 372 560 l S 72 520 m 372 520 l S 72 520 m 72 600 l 222 520 m 222 600 l 372 520 m 372 600 l S "
        b"400 500 100 40 re S 72 480 300 0.8 re f 90 90 m 100 100 l S "
        b"BT /F1 12 Tf 80 580 Td (Item) Tj 150 0 Td (Price) Tj 0 -40 Td (12) Tj -150 0 Td (Lamp) Tj ET"
    )
    big_text = b"BT /F1 36 Tf 100 500 Td (Rotated page) Tj ET"
    return {
        "accents.pdf": one_page_pdf(
            b"BT /F1 12 Tf " + ACCENTED + b" ET", fonts=b"/Font << /F1 5 0 R >>", extra=[helvetica(b"6 0 R"), WINANSI_FI]
        ),
        "hidden.pdf": one_page_pdf(
            hidden_layer,
            fonts=b"/Font << /F1 5 0 R >> /XObject << /Im1 6 0 R >>",
            extra=[b"<< /Type /Font /Subtype /Type1 /BaseFont /GlyphLessFont >>", image + b"\nstream\n" + GREY_PIXELS + b"\nendstream"],
        ),
        "table.pdf": one_page_pdf(table, fonts=b"/Font << /F1 5 0 R >>", extra=[helvetica()]),
        "rotated.pdf": one_page_pdf(
            big_text, page=b"/MediaBox [0 0 612 792] /Rotate 90", fonts=b"/Font << /F1 5 0 R >>", extra=[helvetica()]
        ),
        "cropped.pdf": one_page_pdf(
            big_text,
            page=b"/MediaBox [0 0 612 792] /CropBox [50 300 550 700] /Rotate 270",
            fonts=b"/Font << /F1 5 0 R >>",
            extra=[helvetica()],
        ),
        "fragments.pdf": one_page_pdf(b"BT /F1 12 Tf " + FRAGMENTS + b" ET", fonts=b"/Font << /F1 5 0 R >>", extra=[helvetica()]),
        "text.pdf": make_pdf([["Minutes of the board meeting", "Approved by the committee"]]),
        "dense.pdf": make_pdf([DENSE_LINES] * DENSE_PAGES),
    }


def ink_box(page: ScannedPage) -> list[float] | None:
    """Where the rendered page's ink (pixels darker than mid grey) lies, in page points."""
    rows, columns = np.nonzero(np.asarray(page.pixels) < 128)
    if not len(rows):
        return None
    return list(asdict(page.box_in_points(columns.min(), rows.min(), columns.max() + 1, rows.max() + 1)).values())


def layer_json(page: LayerPage) -> dict:
    return {
        "width": page.width,
        "height": page.height,
        "text": page.text,
        "words": [[w.text, w.box.left, w.box.top, w.box.right, w.box.bottom, w.size, w.bold] for w in page.words],
        "facts": asdict(page.facts),
        "images": [list(asdict(box).values()) for box in page.images],
        "rules": [list(asdict(rule.box).values()) for rule in page.rules],
    }


def read(decoder: Decoder, data: bytes, until: float) -> dict:
    decoder.open(data, "pdf", until=until)
    page = decoder.page(0, until=until)
    assert isinstance(page, LayerPage)
    return layer_json(page)


def dense_speed(decoder: Decoder, data: bytes, until: float) -> dict:
    """A dense page's layer (~3,000 characters) again and again: the decoder's CPU a page, and the round trip's wall."""
    decoder.open(data, "pdf", until=until)
    cpu, started = decoder.cpu_seconds, time.perf_counter()
    for index in range(DENSE_PAGES):
        decoder.page(index, until=until)
    wall, cpu = time.perf_counter() - started, decoder.cpu_seconds - cpu
    return {"decoder_pages_per_s": DENSE_PAGES / cpu, "round_trip_pages_per_s": DENSE_PAGES / wall}


def main(out: Path) -> dict:
    until = time.monotonic() + 120
    result: dict = {}
    with Decoder(OcrSettings(dpi=72)) as decoder:
        for name, data in inputs().items():
            (out / name).write_bytes(data)
            if name == "dense.pdf":
                result["speed"] = dense_speed(decoder, data, until)
                continue
            result[name] = read(decoder, data, until)
            whole = decoder.render(0, until=until)
            if isinstance(whole, ScannedPage):  # else blank: the hidden layer's page is one grey
                result[name]["ink"] = ink_box(whole)
                result[name]["render"] = {"shape": list(whole.pixels.shape), "origin": whole.origin}
        crop = Box(100, 40, 300, 100)
        decoder.open(inputs()["text.pdf"], "pdf", until=until)
        cropped = decoder.render(0, until=until, crop=crop)
        assert isinstance(cropped, ScannedPage)
        result["crop"] = {"shape": list(cropped.pixels.shape), "origin": cropped.origin, "ink": ink_box(cropped)}
    return result


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
