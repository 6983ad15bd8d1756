"""Small, valid sample inputs for the demo and the tests: text documents and PDFs with known text.

The PDF writer covers exactly what a sample needs -- pages of ASCII lines in
the standard Helvetica font -- so extraction can be checked against the text
that went in, without shipping binary fixtures.
"""

from __future__ import annotations

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

    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("ascii")
    xref_at = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode("ascii")
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode("ascii")
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref_at}\n%%EOF\n".encode("ascii")
    return bytes(out)
