"""Small, valid sample inputs for the demo, the tests and the benchmarks: text documents, PDFs and scans with known text.

The PDF writer covers exactly what a sample needs -- pages of ASCII lines in
the standard Helvetica font -- so extraction can be checked against the text
that went in, without shipping binary fixtures. Scans (pages drawn as
pixels, with no text layer, as a scanner makes them) need Pillow, which the
``ocr`` extra brings; they are drawn with DejaVu Sans where the machine has
it (most Linux systems), else with Pillow's own scalable font.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

_WORDS = "queue lock group worker shard flag index lambda bucket object batch map drain claim stale owner".split()


def sample_text(number: int) -> str:
    words = [_WORDS[(number * 7 + i * 3) % len(_WORDS)] for i in range(12 + number % 9)]
    return f"Sample document {number}.\n" + " ".join(words) + ".\n"


def _pdf_string(text: str) -> str:
    if not text.isascii():
        raise ValueError("sample PDFs hold ASCII text only")
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def make_pdf(pages: list[list[str]]) -> bytes:
    """A PDF with one page per list of lines."""
    objects: list[str] = []
    page_ids = [3 + 2 * i for i in range(len(pages))]
    font_id = 3 + 2 * len(pages)
    objects.append("<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] /Count {len(pages)} >>")
    for page_id, lines in zip(page_ids, pages):
        ops = ["BT", "/F1 12 Tf", "72 720 Td", "14 TL"]
        for line in lines:
            ops.append(f"{_pdf_string(line)} Tj T*")
        ops.append("ET")
        stream = "\n".join(ops)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {page_id + 1} 0 R "
            f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_of([body.encode("ascii") for body in objects])


# --- scans: pages of pixels with no text layer -------------------------------

_FONT_FILES = ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/dejavu/DejaVuSans.ttf")
LETTER_INCHES = (8.5, 11.0)
_MARGIN_INCHES = 1.0


def scan_font(pixels: int) -> Any:
    """DejaVu Sans at ``pixels`` where installed, else Pillow's built-in scalable font."""
    from PIL import ImageFont

    for path in _FONT_FILES:
        if Path(path).is_file():
            return ImageFont.truetype(path, pixels)
    return ImageFont.load_default(size=pixels)


def draw_scan(lines: list[str], *, dpi: int = 200, points: int = 12, inches: tuple[float, float] = LETTER_INCHES) -> Any:
    """A white page of ``inches`` at ``dpi`` (8-bit grey PIL image) with ``lines`` printed at ``points``, one per line."""
    from PIL import Image, ImageDraw

    width, height = (round(side * dpi) for side in inches)
    margin = round(_MARGIN_INCHES * dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    font = scan_font(round(points * dpi / 72))
    leading = round(points * 1.5 * dpi / 72)
    for number, line in enumerate(lines):
        if draw.textlength(line, font=font) > width - 2 * margin:
            raise ValueError(f"line {number + 1} is too wide for the page at {points} pt: {line!r}")
        draw.text((margin, margin + number * leading), line, font=font, fill=0)
    return image


def image_pdf(images: list[Any], dpi: int) -> bytes:
    """A PDF of one page per image (8-bit grey, Flate, losslessly) at ``dpi``, as a scanner writes it: no text layer."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    for image in images:
        page_id = len(objects) + 1
        kids.append(f"{page_id} 0 R")
        width_pt, height_pt = image.width * 72 / dpi, image.height * 72 / dpi
        content = f"q {width_pt:.2f} 0 0 {height_pt:.2f} 0 0 cm /Im0 Do Q".encode()
        pixels = zlib.compress(image.convert("L").tobytes(), 6)
        objects += [
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {width_pt:.2f} {height_pt:.2f}] /Contents {page_id + 1} 0 R "
            f"/Resources << /XObject << /Im0 {page_id + 2} 0 R >> >> >>".encode(),
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
            b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 "
            b"/Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream" % (image.width, image.height, len(pixels), pixels),
        ]
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(images)} >>".encode()
    return pdf_of(objects)


def pdf_of(objects: list[bytes]) -> bytes:
    """A PDF of ``objects`` (numbered from 1, the first its catalog), with the cross-reference table that finds them."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref_at = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref_at)
    return bytes(out)


def make_scan_pdf(pages: list[list[str]], *, dpi: int = 200, points: int = 12) -> bytes:
    """A scanned PDF: one page of pixels per list of lines, with no text layer."""
    return image_pdf([draw_scan(lines, dpi=dpi, points=points) for lines in pages], dpi)


# What `python -m s3wq.dev.samples DIR` writes: a folder of scans to try the ocr processor on (README.md).
SAMPLE_SCANS = {
    "letter.pdf": [
        ["Dear members of the records office,", "the archive boxes arrived on Monday."],
        ["Box 14 holds the minutes of 1987.", "Please scan them before the summer."],
    ],
    "receipt.png": [["Receipt 2041: 3 boxes, 42.50 EUR", "Paid in cash at the front desk"]],
}


def write_sample_scans(folder: Path) -> list[Path]:
    """Write SAMPLE_SCANS into ``folder`` (a two-page scanned PDF and a PNG of a scan); their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, pages in SAMPLE_SCANS.items():
        path = folder / name
        if name.endswith(".pdf"):
            path.write_bytes(make_scan_pdf(pages))
        else:
            draw_scan(pages[0], inches=(8.5, 2.5)).save(path, dpi=(200, 200))
        written.append(path)
    return written


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        asked = sys.argv[1:] in (["-h"], ["--help"])
        usage = "usage: python -m s3wq.dev.samples FOLDER  (writes sample scans with known text; needs Pillow: the ocr extra)"
        print(usage, file=sys.stdout if asked else sys.stderr)
        sys.exit(0 if asked else 2)
    try:
        written = write_sample_scans(Path(sys.argv[1]))
    except ImportError as exc:  # Pillow comes with the ocr extra, not with s3wq itself
        sys.exit(
            f"python -m s3wq.dev.samples: error: drawing scans needs Pillow ({exc.name} is missing): make ocr-venv, or pip install pillow"
        )
    for path in written:
        print(path)
