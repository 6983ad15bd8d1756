"""Inputs built to sink a group (issue #27), written by the OCR venv's Python (it has Pillow): ``python hostile.py OUTDIR``.

Prints, as JSON, each file's name and size. None is stored in the tree:
each is made here in a few seconds, from nothing but zlib and Pillow.

* ``flate-bomb.pdf``: one page whose content stream (spaces) inflates to
  1 GiB from ~1 MB; pdfium took 2 GB of RSS to load the page.
* ``cmyk.jpg``: a 79-megapixel progressive CMYK JPEG of ~1.2 MB, which
  libjpeg decodes through 632 MB of coefficients.
* ``blank-pages.pdf``: 100,000 blank pages in ~600 KB, every one the same
  page object; each was rendered and OCR'd, ~1.3 s a page.
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

from PIL import Image

from s3wq.dev.samples import pdf_of

BOMB_INFLATED = 1 << 30
BOMB_BLOCK = 1 << 20
JPEG_SIDE = 8888  # 79 Mpx: under the 80 Mpx an image may be (5 x the pixel cap), so only its bytes can refuse it
BLANK_PAGES = 100_000
LETTER = b"[0 0 612 792]"


def inflating_to(size: int) -> bytes:
    """A zlib stream of ``size`` spaces, made without compressing them all.

    After a full flush deflate refers to nothing before it, so the second
    block's compressed bytes stand for every later block; the checksum is
    computed over the whole.
    """
    block = b" " * BOMB_BLOCK
    deflate = zlib.compressobj(9)
    first = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    again = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    blocks = size // BOMB_BLOCK
    checksum = 1
    for _ in range(blocks):
        checksum = zlib.adler32(block, checksum)
    end = deflate.flush()[:-4]  # the final empty block; its checksum covered two blocks only
    return first + again * (blocks - 1) + end + checksum.to_bytes(4, "big")


def flate_bomb_pdf() -> bytes:
    stream = inflating_to(BOMB_INFLATED)
    return pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox " + LETTER + b" /Contents 4 0 R >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream),
        ]
    )


def blank_pages_pdf() -> bytes:
    kids = b" ".join([b"3 0 R"] * BLANK_PAGES)
    return pdf_of(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, BLANK_PAGES),
            b"<< /Type /Page /Parent 2 0 R /MediaBox " + LETTER + b" >>",
        ]
    )


def write_inputs(out: Path) -> dict[str, int]:
    (out / "flate-bomb.pdf").write_bytes(flate_bomb_pdf())
    Image.new("CMYK", (JPEG_SIDE, JPEG_SIDE)).save(out / "cmyk.jpg", "JPEG", progressive=True, quality=1)
    (out / "blank-pages.pdf").write_bytes(blank_pages_pdf())
    return {path.name: path.stat().st_size for path in sorted(out.iterdir())}


if __name__ == "__main__":
    print(json.dumps(write_inputs(Path(sys.argv[1]))))
