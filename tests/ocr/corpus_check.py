"""Build the tiny document corpus twice in the OCR venv and score each PDF's own text layer (pypdf) on its tests: ``python corpus_check.py FOLDER``.

Prints JSON: per document, its kind, the pass rate of each test kind on the
text layer alone, and whether a second build from the same seed gave the
same bytes (Tesseract's layer aside) and the same tests.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "bench"))

import pypdf  # noqa: E402
from doc_corpus import DocKind, Size, build, load  # noqa: E402


def text_layer(pdf: bytes) -> str:
    return "\n".join(page.extract_text() or "" for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)


def main(folder: Path) -> dict:
    first, second = folder / "first", folder / "second"
    manifests = [build(first, Size.TINY, 29), build(second, Size.TINY, 29)]
    documents, _ = load(first)
    report = {}
    for document in documents:
        output = text_layer((first / document.file).read_bytes())
        by_kind: dict[str, list[int]] = {}
        for test in document.tests:
            counts = by_kind.setdefault(str(test.kind), [0, 0])
            counts[0] += test.passes(output)
            counts[1] += 1
        same = (first / document.file).read_bytes() == (second / document.file).read_bytes()
        report[document.name] = {
            "kind": str(document.kind),
            "pass_rates": {kind: passed / tests for kind, (passed, tests) in by_kind.items()},
            "same_bytes": same if document.kind is not DocKind.TESSERACT_LAYER else None,
        }
    return {"documents": report, "same_tests": manifests[0]["documents"] == manifests[1]["documents"]}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
