"""Inputs with known text for the ocr tests, written by the OCR venv's Python (it has Pillow): ``python scans.py OUTDIR``.

Prints, as JSON, each file's name and the lines printed on each of its pages
(None for a file that holds no readable page). Scans are drawn with DejaVu
Sans by s3wq.dev.samples, as the demo draws them; the images are short pages
(a few lines) so that each OCR'd page costs little.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pypdf
from PIL import Image, ImageDraw

from s3wq.dev.samples import draw_scan, image_pdf, make_pdf, scan_font

SCAN_LINES = [
    "Invoice 2024-117 for the quarterly delivery",
    "Total due: 1,482 EUR, payable within 30 days",
    "The warehouse confirmed the shipment on Monday",
    "Please quote the order number on every payment",
]
TEXT_LAYER_LINES = [["Minutes of the board meeting", "Approved by the committee"], ["Second page of the text layer"]]
MIXED_LINES = [["This page has a text layer"], ["This page was scanned at the office", "Budget review for the annual report"]]
IMAGE_LINES = {
    "page.png": ["Letter from the school council", "Meeting at nine in the morning"],
    "page.jpg": ["Customer account statement", "Balance carried forward 250"],
}
TIFF_LINES = [["First page of the fax", "Hospital insurance record"], ["Second page of the fax", "Signed by the manager"]]
COLUMNS_HEADING = "Notes from the annual meeting"
COLUMNS = (
    ["The committee met on Monday", "to review the annual budget", "and the schedule of delivery", "for the new warehouse"],
    ["Payments are due in thirty", "days from the invoice date", "unless the contract says", "otherwise in section four"],
)
STAMP = "BATES-000123"
STAMPED_LINES = ["Deposition exhibit of the plaintiff", "Received by the clerk in March"]
ROTATED_LINES = ["Photo of the delivery note", "Parcel left with the neighbour"]
STRIP_LINES = ["Page after a torn strip", "Read as any other page"]
SHORT_PAGE = (8.5, 2.5)  # inches: two lines of print, a quarter of the OCR work of a letter page


def pdf_bytes(writer: pypdf.PdfWriter) -> bytes:
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def mixed_pdf() -> bytes:
    """Page 1 from a text-layer PDF, page 2 from a scanned one."""
    writer = pypdf.PdfWriter()
    writer.add_page(pypdf.PdfReader(io.BytesIO(make_pdf(MIXED_LINES[:1]))).pages[0])
    scanned = image_pdf([draw_scan(MIXED_LINES[1])], 200)
    writer.add_page(pypdf.PdfReader(io.BytesIO(scanned)).pages[0])
    return pdf_bytes(writer)


def encrypted_pdf() -> bytes:
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(make_pdf([["A secret page"]]))))
    writer.encrypt(user_password="opensesame", owner_password="owner")
    return pdf_bytes(writer)


def image_file(lines: list[str], fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    draw_scan(lines, inches=SHORT_PAGE).save(buffer, fmt, dpi=(200, 200), **options)
    return buffer.getvalue()


def two_columns_png() -> bytes:
    """A heading across the page, then two columns of four lines, at 200 dpi (12 pt)."""
    image = Image.new("L", (1700, 700), 255)
    draw, font = ImageDraw.Draw(image), scan_font(33)
    draw.text((150, 80), COLUMNS_HEADING, font=font, fill=0)
    for number, (left, right) in enumerate(zip(*COLUMNS)):
        draw.text((150, 180 + number * 50), left, font=font, fill=0)
        draw.text((900, 180 + number * 50), right, font=font, fill=0)
    buffer = io.BytesIO()
    image.save(buffer, "PNG", dpi=(200, 200))
    return buffer.getvalue()


def two_page_tiff() -> bytes:
    first, second = (draw_scan(lines, inches=SHORT_PAGE) for lines in TIFF_LINES)
    buffer = io.BytesIO()
    first.save(buffer, "TIFF", save_all=True, append_images=[second], compression="tiff_deflate", dpi=(200, 200))
    return buffer.getvalue()


def scan_with_text_layer(lines: list[str], layer: list[str]) -> bytes:
    """A short scanned page of ``lines`` with a text layer of ``layer`` near its foot."""
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(image_pdf([draw_scan(lines, inches=SHORT_PAGE)], 200))))
    stamp = pypdf.PdfReader(io.BytesIO(make_pdf([layer]))).pages[0]
    writer.pages[0].merge_transformed_page(stamp, pypdf.Transformation().translate(0, -680))  # make_pdf's first line is at y=720: 40 pt up
    return pdf_bytes(writer)


def rotated_jpeg() -> bytes:
    """A phone's photo of a page: stored turned a quarter left, with EXIF Orientation 6 to show it upright."""
    image = draw_scan(ROTATED_LINES, inches=SHORT_PAGE).rotate(90, expand=True)
    exif = image.getexif()
    exif[0x0112] = 6
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90, dpi=(200, 200), exif=exif.tobytes())
    return buffer.getvalue()


def strip_tiff() -> bytes:
    """A 4000x10 strip with a rule across it (too thin for the engine to detect on at 1280 px: it raises), then a page to read.

    The rule is ink: a strip with none would be taken for a blank page and never reach the engine.
    """
    buffer = io.BytesIO()
    strip, page = Image.new("L", (4000, 10), 255), draw_scan(STRIP_LINES, inches=SHORT_PAGE)
    ImageDraw.Draw(strip).line([(100, 5), (3900, 5)], fill=0, width=2)
    strip.save(buffer, "TIFF", save_all=True, append_images=[page], compression="tiff_deflate", dpi=(200, 200))
    return buffer.getvalue()


def huge_png() -> bytes:
    """9000x9000 pixels (81 Mpx, past 5 x the 16 Mpx cap) in a few KB: refused from its header, never decoded."""
    buffer = io.BytesIO()
    Image.new("1", (9000, 9000), 1).save(buffer, "PNG")
    return buffer.getvalue()


def write_inputs(out: Path) -> dict[str, list[list[str]] | None]:
    """Write every input into ``out``; each name with the lines of each of its pages."""
    files: dict[str, tuple[bytes, list[list[str]] | None]] = {
        "scan.pdf": (image_pdf([draw_scan(SCAN_LINES)], 200), [SCAN_LINES]),
        "text.pdf": (make_pdf(TEXT_LAYER_LINES), TEXT_LAYER_LINES),
        "mixed.pdf": (mixed_pdf(), MIXED_LINES),
        "page.png": (image_file(IMAGE_LINES["page.png"], "PNG"), [IMAGE_LINES["page.png"]]),
        "page.jpg": (image_file(IMAGE_LINES["page.jpg"], "JPEG", quality=85), [IMAGE_LINES["page.jpg"]]),
        "fax.tiff": (two_page_tiff(), TIFF_LINES),
        "columns.png": (two_columns_png(), [[COLUMNS_HEADING, *COLUMNS[0], *COLUMNS[1]]]),
        "blank.pdf": (image_pdf([Image.new("L", (850, 250), 255)], 100), [[]]),
        "encrypted.pdf": (encrypted_pdf(), None),
        "corrupt.pdf": (make_pdf([["cut short"]])[:120], None),
        "corrupt.png": (image_file(["cut short"], "PNG")[:200], None),
        # A scan stamped with a Bates number's text layer, as a review tool leaves it: OCR'd.
        "stamped.pdf": (scan_with_text_layer(STAMPED_LINES, [STAMP]), [[*STAMPED_LINES, STAMP]]),
        # A searchable scan: its text layer holds the page's print, and is taken as it is.
        "searchable.pdf": (scan_with_text_layer(STAMPED_LINES, STAMPED_LINES), [STAMPED_LINES]),
        "rotated.jpg": (rotated_jpeg(), [ROTATED_LINES]),
        "strip.tiff": (strip_tiff(), [[], STRIP_LINES]),
        "huge.png": (huge_png(), None),
        # A PDF page over a 9000x9000 image (81 Mpx, a few KB): refused from the image's size, never decoded.
        "huge-image.pdf": (image_pdf([Image.new("L", (9000, 9000), 255)], 600), None),
        "note.txt": (b"Scanned by the records office\nBox 14 of 20\n", [["Scanned by the records office", "Box 14 of 20"]]),
    }
    for name, (data, _) in files.items():
        (out / name).write_bytes(data)
    return {name: lines for name, (_, lines) in files.items()}


if __name__ == "__main__":
    print(json.dumps(write_inputs(Path(sys.argv[1]))))
