"""Documents that show each defect issue #29 names, written by the OCR venv's Python: ``python documents.py OUTDIR``.

Prints, as JSON, each file's name. It imports Pillow only where it draws, so
that the tests' own venv can read the known texts. What each must read as is in
test_ocr_documents.py, beside the test that reads it. Text is set in
Helvetica with the page's own content stream (so that its order in the
stream can differ from its order on the page), and scans are drawn with
DejaVu Sans (s3wq.dev.samples).
"""

from __future__ import annotations

import json
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from s3wq.dev.samples import _pdf_string, draw_scan, pdf_of, scan_font

LETTER = (612.0, 792.0)
SCAN_DPI = 200

MAHOMEDAN = ["The Mahomedan faith spread along the coast", "in the years after the treaty of peace", "and the old harbour grew into a city"]
BAD_LAYER = [
    "The i'lfinomedan faith sprcad a1ong thc coast",
    "..LCV WI.GL,41.44-gta*Air. tbe trcaty",
    "aud tbe o1d harhour grcw iuto a citv",
]
HEADLINE = "Harbour Strike Ends After Nine Days"
UNDER_HEADLINE = "Dockers voted on Friday to return to work on Monday."  # 52 characters of text layer
SECTIONS = [
    ("1. Scope of the survey", "The survey covers the northern districts only."),
    ("2. Method of counting", "Households were counted by two clerks at once."),
    ("3. Results in brief", "The population grew by a tenth in ten years."),
]
JOURNAL = "Journal of Harbour Studies, Vol. 12 (1931)"
DOWNLOADED = "Downloaded from https://archive.example.org on 2 March 2026"
BODY = [
    ["The first chapter describes the old quays.", "Ships of every size moored along them."],
    ["The second chapter turns to the warehouses.", "Grain and timber were stored side by side."],
    ["The third chapter follows the railway line.", "Goods left the port by night in long trains."],
]
TABLE = [["Item", "Quantity", "Price"], ["Rope", "12", "4.50"], ["Anchor", "2", "310.00"], ["Lantern", "7", "18.25"], ["Tar", "30", "1.10"]]
LEFT = [
    "The committee met on Monday to",
    "review the annual budget and the",
    "schedule of delivery for the new",
    "warehouse on the eastern quay.",
]
RIGHT = [
    "Payments are due within thirty",
    "days from the date of invoice",
    "unless the contract says so in",
    "section four of the agreement.",
]
SIDEBAR = ["Box: key dates", "Founded in 1854", "Rebuilt in 1921"]


@dataclass(frozen=True)
class Run:
    """Text set at ``x``, ``top`` (points from the page's top-left) in Helvetica at ``size``; ``hidden`` in render mode 3."""

    x: float
    top: float
    text: str
    size: float = 11.0
    hidden: bool = False


def pdf(pages: list[tuple[list[Run], list[tuple[Any, tuple[float, float, float, float]]]]]) -> bytes:
    """A PDF of pages, each its runs (in stream order as given) and its images, each at (left, top, width, height) in points."""
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /GlyphLessFont /Encoding /WinAnsiEncoding >>")
    kids = []
    for runs, images in pages:
        page_id = len(objects) + 1
        kids.append(f"{page_id} 0 R")
        ops, xobjects = [], []
        for number, (image, (left, top, width, height)) in enumerate(images):
            bottom = LETTER[1] - top - height
            ops.append(f"q {width:.2f} 0 0 {height:.2f} {left:.2f} {bottom:.2f} cm /Im{number} Do Q")
            xobjects.append((f"/Im{number}", image))
        for run in runs:
            font, mode = ("/F2", 3) if run.hidden else ("/F1", 0)
            ops.append(
                f"BT {font} {run.size} Tf {mode} Tr {run.x:.2f} {LETTER[1] - run.top - run.size:.2f} Td {_pdf_string(run.text)} Tj ET"
            )
        content = "\n".join(ops).encode()
        image_ids = {name: page_id + 2 + i for i, (name, _) in enumerate(xobjects)}
        resources = "/Font << /F1 3 0 R /F2 4 0 R >>" + (
            " /XObject << " + " ".join(f"{name} {ref} 0 R" for name, ref in image_ids.items()) + " >>" if xobjects else ""
        )
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {LETTER[0]} {LETTER[1]}] /Contents {page_id + 1} 0 R "
            f"/Resources << {resources} >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
        for _, image in xobjects:
            grey = image.convert("L")
            pixels = zlib.compress(grey.tobytes(), 6)
            objects.append(
                b"<< /Type /XObject /Subtype /Image /Width %d /Height %d /ColorSpace /DeviceGray /BitsPerComponent 8 "
                b"/Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream" % (grey.width, grey.height, len(pixels), pixels)
            )
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>".encode()
    return pdf_of(objects)


def full_page(image: Any) -> tuple[Any, tuple[float, float, float, float]]:
    return image, (0.0, 0.0, *LETTER)


def layer_over(lines: list[str]) -> list[Run]:
    """A hidden layer of ``lines`` where draw_scan prints them (1 inch margin, 12 pt at 1.5 leading)."""
    return [Run(72, 72 + 18 * number, line, size=12, hidden=True) for number, line in enumerate(lines)]


def drawn(lines: list[str], *, points: int, inches: tuple[float, float]) -> Any:
    """``lines`` drawn large on a strip of paper, as a headline set as a picture."""
    from PIL import Image, ImageDraw  # the OCR venv's: the tests' own venv imports this module for its known texts

    image = Image.new("L", (round(inches[0] * SCAN_DPI), round(inches[1] * SCAN_DPI)), 255)
    draw = ImageDraw.Draw(image)
    font = scan_font(round(points * SCAN_DPI / 72))
    for number, line in enumerate(lines):
        draw.text((20, 20 + number * points * 1.4 * SCAN_DPI / 72), line, font=font, fill=0)
    return image


def columns_scan(*, skew: float = 0.0, sidebar: bool = False) -> Any:
    """A scanned page at 11 pt, turned by ``skew`` degrees: two columns (LEFT, RIGHT); or, with ``sidebar``, one column
    (LEFT, then RIGHT) with a boxed sidebar beside it."""
    from PIL import Image, ImageDraw

    page = Image.new("L", (round(8.5 * SCAN_DPI), round(11 * SCAN_DPI)), 255)
    draw = ImageDraw.Draw(page)
    font = scan_font(round(11 * SCAN_DPI / 72))
    placed = [(1.0, 1.5, LEFT + RIGHT)] if sidebar else [(1.0, 1.5, LEFT), (4.4, 1.5, RIGHT)]
    for left, top, lines in placed:
        for number, line in enumerate(lines):
            draw.text((left * SCAN_DPI, (top + number * 0.25) * SCAN_DPI), line, font=font, fill=0)
    if sidebar:
        draw.rectangle((4.9 * SCAN_DPI, 1.9 * SCAN_DPI, 7.5 * SCAN_DPI, 3.0 * SCAN_DPI), outline=0, width=3)
        for number, line in enumerate(SIDEBAR):
            draw.text((5.05 * SCAN_DPI, (2.05 + number * 0.3) * SCAN_DPI), line, font=font, fill=0)
    if skew:
        page = page.rotate(skew, resample=Image.Resampling.BICUBIC, fillcolor=255, expand=False)
    return page


def documents() -> dict[str, bytes]:
    scan = draw_scan(MAHOMEDAN)
    sections_in_stream_order = [SECTIONS[0], SECTIONS[2], SECTIONS[1]]
    tops = {SECTIONS[0]: 100, SECTIONS[1]: 200, SECTIONS[2]: 300}
    section_runs = [r for s in sections_in_stream_order for r in (Run(72, tops[s], s[0], size=14), Run(72, tops[s] + 24, s[1]))]
    furniture_pages = []
    for number, lines in enumerate(BODY, start=1):
        runs = [Run(72, 36, JOURNAL, size=9)] + [Run(72, 120 + 16 * i, line) for i, line in enumerate(lines)]
        runs += [Run(290, 750, str(number), size=9), Run(72, 770, DOWNLOADED, size=7)]
        furniture_pages.append((runs, []))
    table_runs = [Run(72, 80, "Stores bought for the voyage", size=14)]
    for row_number, row in enumerate(TABLE):
        for x, cell in zip((72, 220, 330), row):
            table_runs.append(Run(x, 120 + 18 * row_number, cell))
    return {
        "bad_layer.pdf": pdf([(layer_over(BAD_LAYER), [full_page(scan)])]),
        "good_layer.pdf": pdf([(layer_over(MAHOMEDAN), [full_page(scan)])]),
        "headline_image.pdf": pdf(
            [([Run(72, 200, UNDER_HEADLINE)], [(drawn([HEADLINE], points=26, inches=(7.0, 0.9)), (54.0, 60.0, 504.0, 64.8))])]
        ),
        "sections.pdf": pdf([(section_runs, [])]),
        "furniture.pdf": pdf(furniture_pages),
        "table.pdf": pdf([(table_runs, [])]),
        "columns.pdf": pdf([([], [full_page(columns_scan())])]),
        "skewed_columns.pdf": pdf([([], [full_page(columns_scan(skew=1.5))])]),
        "sidebar.pdf": pdf([([], [full_page(columns_scan(sidebar=True))])]),
        "layer.pdf": pdf([([Run(72, 100, BODY[0][0]), Run(72, 120, BODY[0][1])], []), ([Run(72, 100, BODY[1][0])], [])]),
        # For the vlm and auto processors: a text-layer page, a clean scan, a table page; and a long text-layer PDF.
        "vlm_mixed.pdf": pdf([([Run(72, 100, BODY[0][0]), Run(72, 120, BODY[0][1])], []), ([], [full_page(scan)]), (table_runs, [])]),
        "vlm_long.pdf": pdf([([Run(72, 100, f"Page {n} of the long report."), Run(72, 120, BODY[n % 3][0])], []) for n in range(1, 41)]),
    }


def main(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, data in documents().items():
        (folder / name).write_bytes(data)
        written[name] = str(folder / name)
    return written


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
