"""A corpus of real-world-like documents with known content, and the tests made from it: ``python bench/doc_corpus.py FOLDER --size tiny``.

Every document is generated from a seed, so one seed and size give the same
corpus byte for byte (reportlab's invariant mode; Tesseract's layer aside).
Kinds of document (``DocKind``):

* ``born-digital``: reportlab PDFs of three layouts (doc_content.Layout): a
  one-column report (ruled table, bullet lists, "Downloaded from" banner), a
  two-column journal (sidebar box, unruled table) and a three-column
  newsletter (numbered lists, ruled table), all with running headers and
  page numbers over three or more pages, numbered sections and headings;
* ``scan-150``, ``scan-200``, ``scan-300``: the same pages rendered by
  pypdfium2 at that dpi with light noise, as image-only PDFs;
* ``skewed``: at 200 dpi, each page turned 0.5 to 2 degrees either way;
* ``old-ocr-layer``: the 200-dpi scans under an invisible GlyphLessFont text
  layer of corrupted text, as old OCR left them;
* ``tesseract-layer``: the 200-dpi scans under Tesseract's own hidden layer;
* ``image-headline``: a page whose headline and lead are images, with a short
  caption of real text below;
* ``ligatures-accents``: a born-digital page with ligature glyphs and accents
  drawn apart from their letters.

``--size`` chooses how much: ``tiny`` (CI: one journal; its first page
scanned at 200 dpi, bare and under each hidden layer), ``small`` (every layout, every page scanned) or ``full`` (two
documents per layout, four pages). A long born-digital document, untested,
times the text-layer path. The manifest, ``corpus.json`` in the folder,
lists each document's file, kind, pages and tests.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from doc_content import Layout
from doc_layout import Fragment, LaidOut, lay_out
from doc_render import ACCENT_WORDS, LIGATURE_WORDS, born_digital, image_headline, typography
from doc_scans import hidden_layer_pdf, scan, tesseract_layer
from doc_tests import DocTest, tests_for

MANIFEST = "corpus.json"
SKEW_DEGREES = (0.5, 2.0)
LAYER_DPI = 200


class DocKind(StrEnum):
    BORN_DIGITAL = "born-digital"
    SCAN_150 = "scan-150"
    SCAN_200 = "scan-200"
    SCAN_300 = "scan-300"
    SKEWED = "skewed"
    OLD_OCR_LAYER = "old-ocr-layer"
    TESSERACT_LAYER = "tesseract-layer"
    IMAGE_HEADLINE = "image-headline"
    LIGATURES_ACCENTS = "ligatures-accents"

    @property
    def image_only(self) -> bool:
        """Pages with no text layer at all: what the 3-core-second target is judged on."""
        return self in (DocKind.SCAN_150, DocKind.SCAN_200, DocKind.SCAN_300, DocKind.SKEWED)

    @property
    def scanned(self) -> bool:
        return self.image_only or self in (DocKind.OLD_OCR_LAYER, DocKind.TESSERACT_LAYER)


SCAN_DPI = {DocKind.SCAN_150: 150, DocKind.SCAN_200: 200, DocKind.SCAN_300: 300, DocKind.SKEWED: 200}


class Size(StrEnum):
    TINY = "tiny"
    SMALL = "small"
    FULL = "full"


@dataclass(frozen=True)
class SizeSpec:
    layouts: tuple[Layout, ...]
    documents_per_layout: int
    pages: int
    scanned_pages: int  # of each document's pages, the first this many are scanned
    scan_kinds: tuple[DocKind, ...]
    throughput_pages: int


ALL_SCANS = tuple(kind for kind in DocKind if kind.scanned)
SIZES = {
    Size.TINY: SizeSpec((Layout.JOURNAL,), 1, 3, 1, (DocKind.SCAN_200, DocKind.OLD_OCR_LAYER, DocKind.TESSERACT_LAYER), 40),
    Size.SMALL: SizeSpec(tuple(Layout), 1, 3, 3, ALL_SCANS, 200),
    Size.FULL: SizeSpec(tuple(Layout), 2, 4, 4, ALL_SCANS, 400),
}


@dataclass(frozen=True)
class Document:
    name: str
    kind: DocKind
    file: str
    pages: int
    tests: tuple[DocTest, ...]

    def as_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "file": self.file, "pages": self.pages, "tests": [t.as_json() for t in self.tests]}


def on_pages(laid: LaidOut, pages: int) -> tuple[list[Fragment], list[str]]:
    """The fragments and furniture of ``laid``'s first ``pages`` pages."""
    fragments = [fragment for fragment in laid.fragments if fragment.page < pages]
    return fragments, [text for page in laid.pages[:pages] for text in page.furniture]


def write(
    folder: Path, name: str, kind: DocKind, pdf: bytes, pages: int, fragments: list[Fragment], furniture: list[str], seed: int
) -> Document:
    file = f"{name}.pdf"
    (folder / file).write_bytes(pdf)
    # The typography page is tested where its ligatures and accents are, not at random windows that may miss them.
    focus = frozenset(LIGATURE_WORDS + ACCENT_WORDS) if kind is DocKind.LIGATURES_ACCENTS else frozenset()
    return Document(name, kind, file, pages, tuple(tests_for(name, fragments, furniture, seed, focus)))


def scanned_documents(folder: Path, laid: LaidOut, base: str, spec: SizeSpec, seed: int) -> list[Document]:
    pages = min(spec.scanned_pages, len(laid.pages))
    fragments, furniture = on_pages(laid, pages)
    digital = born_digital(laid, list(range(pages)))
    documents = []
    layer_images = None
    for kind in spec.scan_kinds:
        name, kind_seed = f"{base}-{kind}", seed * 31 + list(DocKind).index(kind)
        if kind.image_only:
            pdf, images = scan(digital, SCAN_DPI[kind], SKEW_DEGREES if kind is DocKind.SKEWED else None, kind_seed)
            if kind is DocKind.SCAN_200:
                layer_images = images
        else:
            if layer_images is None:
                _, layer_images = scan(digital, LAYER_DPI, None, seed * 31)
            if kind is DocKind.OLD_OCR_LAYER:
                pdf = hidden_layer_pdf(layer_images, LAYER_DPI, laid.pages[:pages], kind_seed)
            else:
                pdf = tesseract_layer(layer_images, LAYER_DPI)
        documents.append(write(folder, name, kind, pdf, pages, fragments, furniture, kind_seed))
    return documents


def build(folder: Path, size: Size, seed: int) -> dict:
    """Write the corpus of ``size`` into ``folder`` with its manifest; the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    spec = SIZES[size]
    documents: list[Document] = []
    for layout_number, layout in enumerate(spec.layouts):
        for copy in range(spec.documents_per_layout):
            doc_seed = seed * 1000 + layout_number * 10 + copy
            base = f"{layout}-{copy + 1}"
            laid = lay_out(layout, doc_seed, spec.pages)
            fragments, furniture = on_pages(laid, len(laid.pages))
            documents.append(write(folder, base, DocKind.BORN_DIGITAL, born_digital(laid), len(laid.pages), fragments, furniture, doc_seed))
            documents += scanned_documents(folder, laid, base, spec, doc_seed)
    for kind, make in ((DocKind.IMAGE_HEADLINE, image_headline), (DocKind.LIGATURES_ACCENTS, typography)):
        pdf, fragments = make(seed)
        documents.append(write(folder, str(kind), kind, pdf, 1, fragments, [], seed))
    throughput = lay_out(Layout.JOURNAL, seed * 1000 + 999, spec.throughput_pages)
    (folder / "throughput.pdf").write_bytes(born_digital(throughput))
    manifest = {
        "size": size,
        "seed": seed,
        "documents": [document.as_json() for document in documents],
        "throughput": {"file": "throughput.pdf", "pages": len(throughput.pages)},
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    return manifest


def load(folder: Path) -> tuple[list[Document], dict]:
    """The documents of a built corpus, and its manifest."""
    manifest = json.loads((folder / MANIFEST).read_text())
    documents = [
        Document(d["name"], DocKind(d["kind"]), d["file"], d["pages"], tuple(DocTest.from_json(t) for t in d["tests"]))
        for d in manifest["documents"]
    ]
    return documents, manifest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--size", type=Size, choices=list(Size), default=Size.TINY)
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    manifest = build(args.folder, args.size, args.seed)
    summary = {d["name"]: {"kind": d["kind"], "pages": d["pages"], "tests": len(d["tests"])} for d in manifest["documents"]}
    json.dump({"folder": str(args.folder), "documents": summary}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
